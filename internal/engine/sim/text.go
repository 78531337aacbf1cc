package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// words is the vocabulary of answers. A few words are not ASCII, so that multibyte UTF-8 occurs
// in most answers. No word holds a quote or a backslash: answers are also JSON string contents.
var words = [...]string{
	"the", "a", "model", "answer", "network", "node", "token", "request", "buyer", "provider",
	"price", "market", "graph", "layer", "weight", "stream", "signal", "river", "mountain",
	"city", "garden", "window", "engine", "memory", "cache", "queue", "cluster", "question",
	"idea", "story", "light", "shadow", "morning", "evening", "winter", "summer", "ocean",
	"forest", "paper", "letter", "number", "pattern", "system", "tensor", "kernel", "batch",
	"is", "was", "becomes", "runs", "holds", "moves", "sends", "finds", "builds", "reads",
	"writes", "learns", "keeps", "turns", "shows", "brings", "quiet", "bright", "slow", "quick",
	"simple", "careful", "warm", "cold", "large", "small", "open", "shared", "fair", "honest",
	"with", "from", "into", "over", "under", "near", "through", "after", "before", "and", "but",
	"so", "then", "again", "always", "often", "rarely", "together",
	"café", "naïve", "Zürich", "señor", "東京", "🙂", "über", "résumé", "jalapeño", "Kraków",
	"niño", "façade",
}

// titles holds words with their first letter in upper case, for the start of a sentence.
var titles = func() [len(words)]string {
	var t [len(words)]string
	for i, w := range words {
		r, n := utf8.DecodeRuneInString(w)
		t[i] = string(unicode.ToUpper(r)) + w[n:]
	}
	return t
}()

// Natural answer lengths, in words.
const (
	minWords = 20
	maxWords = 200
)

// rng is a fast deterministic random number generator.
type rng struct{ pcg rand.PCG }

// newRNG seeds a generator from the SHA-256 hash of b.
func newRNG(b []byte) rng {
	sum := sha256.Sum256(b)
	var r rng
	r.pcg.Seed(binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16]))
	return r
}

// intn returns a number in [0, n). Its slight bias does not matter here.
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.pcg.Uint64(), uint64(n))
	return int(hi)
}

// writer builds an answer's text and records where each of its tokens ends.
type writer struct {
	b    []byte
	ends []int
}

func newWriter(words int, prefix string) *writer {
	w := &writer{b: make([]byte, 0, len(prefix)+8*words+16), ends: make([]int, 0, words+2)}
	w.b = append(w.b, prefix...)
	return w
}

// token writes s and ends a token after it.
func (w *writer) token(s string) {
	w.b = append(w.b, s...)
	w.ends = append(w.ends, len(w.b))
}

// commaOdds is the chance, out of 1<<32, of a comma after a word inside a sentence.
const commaOdds = 1 << 32 / 6

// sentences writes n words as sentences: a capital letter at the start of each, a full stop at
// the end, some commas between. lead is written before the first word and trail after the last
// one, both inside their tokens; every other word has a leading space.
func (w *writer) sentences(r *rng, n int, lead, trail string) {
	b, ends := w.b, w.ends
	for i := 0; i < n; {
		size := 4 + r.intn(12)
		if n-i-size < 4 {
			size = n - i // no short sentence at the end
		}
		for j := range size {
			if i == 0 {
				b = append(b, lead...)
			} else {
				b = append(b, ' ')
			}
			x := r.pcg.Uint64() // one draw for the word and the comma
			k := int(uint64(uint32(x)) * uint64(len(words)) >> 32)
			if j == 0 {
				b = append(b, titles[k]...)
			} else {
				b = append(b, words[k]...)
			}
			switch {
			case j == size-1:
				b = append(b, '.')
			case j > 0 && j < size-2 && x>>32 < commaOdds:
				b = append(b, ',')
			}
			i++
			if i == n {
				b = append(b, trail...)
			}
			ends = append(ends, len(b))
		}
	}
	w.b, w.ends = b, ends
}

// String returns the text written.
func (w *writer) String() string { return string(w.b) }

// text is an answer with the ends of its tokens. The tokens to emit are text[from:ends[0]],
// text[ends[0]:ends[1]], ...; text[:from] is the prefix the buyer already has.
type text struct {
	s    string
	ends []int
	from int
}

// naturalAnswer generates the answer to the conversation that seeds r: plain sentences, or a
// JSON object {"answer": "..."} when asJSON.
func naturalAnswer(r *rng, asJSON bool) text {
	n := minWords + r.intn(maxWords-minWords+1)
	w := newWriter(n, "")
	if asJSON {
		w.token(`{"answer":`)
		w.sentences(r, n, ` "`, `"`)
		w.token("}")
	} else {
		w.sentences(r, n, "", "")
	}
	return text{s: w.String(), ends: w.ends}
}

// continuation generates a continuation of prefix, which is not a prefix of the natural answer.
func continuation(r *rng, prefix string) text {
	n := minWords + r.intn(maxWords-minWords+1)
	w := newWriter(n, prefix)
	lead := ""
	if last, _ := utf8.DecodeLastRuneInString(prefix); prefix != "" && !unicode.IsSpace(last) {
		lead = " "
	}
	w.sentences(r, n, lead, "")
	return text{s: w.String(), ends: w.ends, from: len(prefix)}
}

// after returns t with the tokens to emit starting at byte offset from, which must lie on a
// rune boundary.
func (t text) after(from int) text {
	i := 0
	for i < len(t.ends) && t.ends[i] <= from {
		i++
	}
	return text{s: t.s, ends: t.ends[i:], from: from}
}

// cut returns the offset in t.s where output must end: before the first stop string found in
// the text after t.from, or the end of the text.
func (t text) cut(stop []string) (int, bool) {
	rest := t.s[t.from:]
	at := -1
	for _, s := range stop {
		if s == "" {
			continue
		}
		if i := strings.Index(rest, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return len(t.s), false
	}
	c := t.from + at
	for c > t.from && !utf8.RuneStart(t.s[c]) {
		c-- // a stop string that starts inside a character: never split it
	}
	return c, true
}
