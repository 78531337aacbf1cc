package verify

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// How two answers of the same model to the same probe are compared.
//
// Exact comparison is too strict for real GPUs: greedy decoding picks the most likely token,
// and when two tokens are nearly tied, the rounding of another GPU, engine, batch size or
// quantization kernel can pick the other one. From there on the two answers go separate ways,
// though usually late, as near ties are rare: the same model agrees with itself on a long
// prefix. Another model (a smaller one under the big one's name, say) words its answer
// differently from the first few tokens on. So the measure looks at how long the answers
// agree before they part, and, in case they part early on a near tie and then say much the
// same, at how many short phrases they share:
//
//	similarity = max(prefix, phrases)
//	prefix     = common prefix, in units / max(units of the shorter, min(units of the longer, 16))
//	phrases    = Jaccard index of the two answers' sets of unit 3-grams
//
// and the answers agree when similarity >= [AgreeThreshold], 0.5: they agree on at least half
// the shorter answer before they part, or share half their phrases.
//
// Units are words, numbers and single punctuation marks, after Unicode NFKC normalisation,
// lower case, and with typographic quotes and apostrophes made plain: a difference in
// whitespace, Unicode form or detokenisation ("Hello ," for "Hello,") changes no unit. A
// Chinese or Japanese character is a unit of its own, as those scripts put no spaces between
// words.
//
// Dividing the common prefix by the shorter answer lets an answer cut short (a node that
// stopped earlier, or counts tokens otherwise) agree with the whole one. Without a floor it
// would also let a one-word answer agree with any answer that starts with that word ("The"),
// so the divisor is at least 16 units, or the longer answer's length if that is less: an
// answer shorter than 8 units agrees only with an answer as short (the same, or almost).
//
// One probe is weak evidence either way: an honest node may part early on a near tie, and on
// a prompt with one canonical answer (a textbook function) a smaller model may say the same.
// The prober should judge a node on several probes.

// AgreeThreshold is the similarity at and above which two answers agree.
const AgreeThreshold = 0.5

// minEvidence is the least divisor of the common prefix, in units (unless the longer answer
// is shorter).
const minEvidence = 16

// shingle is the length of the phrases compared, in units.
const shingle = 3

// Agree reports whether got and want, two answers of the same model to the same request,
// agree, and their similarity, in [0, 1]: 1 for answers that are the same but for whitespace,
// Unicode form, case and quotes, or one a prefix of the other of at least 16 units; about 0
// for answers of different models. Agree(a, b) == Agree(b, a).
func Agree(got, want string) (bool, float64) {
	s := similarity(units(got), units(want))
	return s >= AgreeThreshold, s
}

// AgreeExact reports whether got is exactly want: how an answer is compared with a known
// answer of a deterministic engine (see [KnownAnswer]), which an honest node gives byte for
// byte.
func AgreeExact(got, want string) bool { return got == want }

func similarity(a, b []string) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	short, long := min(len(a), len(b)), max(len(a), len(b))
	common := 0
	for common < short && a[common] == b[common] {
		common++
	}
	prefix := float64(common) / float64(max(short, min(long, minEvidence)))
	return max(prefix, jaccard(shingles(a), shingles(b)))
}

// shingles returns the set of a text's phrases of shingle units; a text shorter than that is
// one phrase.
func shingles(u []string) map[string]struct{} {
	set := make(map[string]struct{}, max(len(u)-shingle+1, 1))
	if len(u) == 0 {
		return set
	}
	if len(u) < shingle {
		set[strings.Join(u, "\x00")] = struct{}{}
		return set
	}
	for i := 0; i+shingle <= len(u); i++ {
		set[strings.Join(u[i:i+shingle], "\x00")] = struct{}{}
	}
	return set
}

func jaccard(a, b map[string]struct{}) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	both := 0
	for s := range a {
		if _, ok := b[s]; ok {
			both++
		}
	}
	return float64(both) / float64(len(a)+len(b)-both)
}

// plainQuotes makes typographic quotes plain.
var plainQuotes = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201a", "'", "\u201b", "'", "\u2032", "'",
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u201f", `"`, "\u2033", `"`, "\u00ab", `"`, "\u00bb", `"`,
)

// units splits a text into the units compared: runs of letters, digits and marks; single
// Han, Hiragana and Katakana characters; single other characters but spaces. Invalid UTF-8
// bytes are units of U+FFFD.
func units(s string) []string {
	s = strings.ToLower(plainQuotes.Replace(norm.NFKC.String(s)))
	var out []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			out = append(out, s[start:end])
			start = -1
		}
	}
	for i, r := range s {
		switch {
		case unicode.IsSpace(r):
			flush(i)
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana):
			flush(i)
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			if start < 0 {
				start = i
			}
		default:
			flush(i)
			out = append(out, string(r))
		}
	}
	flush(len(s))
	return out
}

// How a node's usage claim is checked against another count of the same answer. The same
// model has the same tokenizer whatever the engine, so for the same text two honest nodes
// count the same completion tokens, give or take one at the end (an end-of-text token). A
// node paid per token may claim more than it generated; when its answer agrees with a
// reference's (or the known answer), its claim is compared with the reference's count, scaled
// to the length of its own answer when the two differ.

// InflationSlack and InflationRatio: a claim is inflated when it is more than InflationRatio
// times the reference's count (scaled) plus InflationSlack tokens.
const (
	InflationRatio = 1.25
	InflationSlack = 2
)

// Inflated reports whether claimed, a node's completion tokens for its answer got, is well
// above the count of the reference, which counted refTokens for its answer ref to the same
// request; expected is the reference's count scaled to got's length (what the node is billed
// when its claim is inflated). There is no judgement (false) without a reference count.
func Inflated(claimed int, got string, refTokens int, ref string) (expected int, inflated bool) {
	if refTokens <= 0 || len(ref) == 0 || len(got) == 0 {
		return 0, false
	}
	expected = refTokens
	if len(got) != len(ref) {
		expected = (refTokens*len(got) + len(ref) - 1) / len(ref)
	}
	return expected, float64(claimed) > InflationRatio*float64(expected)+InflationSlack
}
