// Package meter counts the tokens of the text the coordinator relayed from a node, so that a
// node's usage claim is checked against what its buyer received instead of taken on trust.
//
// A model's family names its tokenizer (see [FamilyOf]): the Llama 3 and Qwen families count
// with OpenAI's cl100k_base encoding, whose 100,000 tokens their own vocabularies extend and
// whose split rules they share (Qwen splits numbers into single digits: the count adds one a
// digit), and gpt-oss with o200k_base, the encoding it was trained with. A model of any other
// family is bounded by the cl100k count times a ratio learned from the honest claims of
// verified nodes serving the same model (see [Meter.Learn]), [DefaultRatio] until enough are
// known.
//
// [Meter.Check] first compares a claim with the number of words in the text (runs of
// characters between white space): no tokenizer of these families makes fewer tokens than
// words, so a claim within it needs no count. Honest claims of engines that count a token a
// word (the simulated engine) are never counted; others are, when their claims exceed their
// answers' words. The cl100k count cuts text by the encoding's split rules itself and
// remembers the counts of short pieces (split.go): about 0.1 µs a token of prose, a tenth of
// the library's own; o200k counts with the library, about 1 µs a token.
//
// It imports the standard library and the tokenizer only; it must not import fleet, gateway,
// ledger or store.
package meter

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

// Family is a model family whose tokenizer the meter knows, or Unknown.
type Family uint8

const (
	Unknown Family = iota
	Llama3         // Llama 3, 3.1, 3.2, 3.3: a tiktoken BPE extending cl100k_base
	Qwen           // Qwen 2, 2.5, 3 and QwQ: a BPE extending cl100k_base, digits split one by one
	GPTOSS         // gpt-oss: o200k_base (o200k_harmony adds special tokens only)
	OpenAI         // OpenAI's own models, where an engine serves them under their names
)

func (f Family) String() string {
	switch f {
	case Llama3:
		return "llama3"
	case Qwen:
		return "qwen"
	case GPTOSS:
		return "gpt-oss"
	case OpenAI:
		return "openai"
	}
	return "unknown"
}

// FamilyOf reads a model's family from its name, as engines and hubs spell it:
// "meta-llama/Llama-3.1-8B-Instruct", "llama3.2:3b", "sim/llama-3.1-8b", "Qwen/Qwen2.5-7B",
// "qwen3:8b", "openai/gpt-oss-20b", "gpt-oss:120b".
func FamilyOf(model string) Family {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case strings.HasPrefix(m, "llama-3") || strings.HasPrefix(m, "llama3") ||
		strings.HasPrefix(m, "meta-llama-3") || strings.HasPrefix(m, "hermes-3-llama-3"):
		return Llama3
	case strings.HasPrefix(m, "qwen2") || strings.HasPrefix(m, "qwen-2") || strings.HasPrefix(m, "qwen3") ||
		strings.HasPrefix(m, "qwen-3") || strings.HasPrefix(m, "qwq"):
		return Qwen
	case strings.HasPrefix(m, "gpt-oss"):
		return GPTOSS
	case strings.HasPrefix(m, "gpt-4o") || strings.HasPrefix(m, "gpt-4.1") || strings.HasPrefix(m, "gpt-5"):
		return GPTOSS // o200k_base as well
	case strings.HasPrefix(m, "gpt-4") || strings.HasPrefix(m, "gpt-3.5"):
		return OpenAI
	}
	return Unknown
}

// The encodings, made on first use: each builds a vocabulary of 100,000 or 200,000 entries.
var (
	cl100k = sync.OnceValue(codec.NewCl100kBase)
	o200k  = sync.OnceValue(codec.NewO200kBase)
)

// chunk bounds the text handed to the library's tokenizer at once, so that no answer, however
// built, makes its work (which grows with the square of a piece's length) large: text is cut
// before a word where it can be, which its split rules cut too.
const chunk = 256

// Count returns the tokens of text in the family's tokenizer; for Unknown, in cl100k_base.
func Count(f Family, text string) int {
	n, words := 0, Words(text)
	if f != GPTOSS {
		n = countCl100k(text)
		if f == Qwen {
			n += extraDigits(text)
		}
		return max(n, words)
	}
	c := o200k()
	for len(text) > 0 {
		piece := text
		if len(piece) > chunk {
			piece = text[:split(text, chunk)]
		}
		k, _ := c.Count(piece) // no error in the default error mode: invalid UTF-8 counts as bytes
		n += k
		text = text[len(piece):]
	}
	// The library's split rules skip U+007F, which every tokenizer here counts: never count
	// fewer tokens than words.
	return max(n, words)
}

// split returns where to cut text, at most at max: before the white space that precedes a
// word, where the tokenizers' split rules cut too, or else on a character boundary.
func split(text string, max int) int {
	for i := max - 1; i > max/2; i-- {
		if text[i] == ' ' && !isSpace(text[i+1]) {
			return i
		}
	}
	for i := max; i > 0; i-- {
		if utf8.RuneStart(text[i]) {
			return i
		}
	}
	return max
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// extraDigits is how many more tokens a tokenizer that splits numbers into single digits makes
// of text than one that splits them in threes.
func extraDigits(text string) int {
	extra, run := 0, 0
	for _, r := range text {
		if unicode.IsNumber(r) {
			run++
			continue
		}
		extra += run - (run+2)/3
		run = 0
	}
	return extra + run - (run+2)/3
}

// Words counts the runs of characters between ASCII white space in text: a bound below the
// tokens of any tokenizer that splits text at white space first, as those of every family here
// do. (Other white space may join two words into one run: the bound is only lower.)
func Words(text string) int {
	n, in := 0, false
	for i := 0; i < len(text); i++ {
		space := isSpace(text[i])
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// DefaultRatio bounds the tokens of text for a model of unknown family, as a multiple of its
// cl100k count, until the meter has learned the model's own ratio.
const DefaultRatio = 1.25

// Learning the ratio of a model of unknown family: from each provider's first minSamples
// honest claims of verified nodes, then one in learnEvery (each costs a count), over its last
// len(samples.ring). A provider's ratio is the median of its samples; the model's is the
// lowest of its providers' (all honest nodes of a model share its tokenizer, and the lowest
// is the buyers' side), with a margin, within [1, maxRatio]. With a single provider known, it
// stays at most DefaultRatio: one provider alone cannot raise its own bound. Flags use the
// providers' median instead, never below DefaultRatio: a provider claiming less than its
// tokens lowers what all are billed, not the bar its rivals are flagged at.
const (
	minSamples   = 8
	learnEvery   = 16
	margin       = 1.1
	maxRatio     = 2.5
	maxModels    = 4096 // models whose ratio is learned; others keep the default
	maxProviders = 64   // providers learned from per model
)

// Flagging: a claim above the bound is billed at the bound, and the node is flagged (its
// over-claims count against its reputation) when the claim exceeds the bound by more than
// flagMargin and flagSlack tokens too: what a tokenizer the meter only approximates may count
// beyond it (images, a template's tags) is cut from the bill, not held against the node.
const (
	flagMargin = 1.1
	flagSlack  = 2
)

// Meter checks usage claims against the text a node delivered. It is safe for concurrent use.
type Meter struct {
	mu     sync.Mutex
	models map[string]*model // by model name, for models of unknown family
}

type model struct {
	providers map[string]*samples
	ratio     float64 // the ratio bills use; 0 until a provider has minSamples
	// flag is the ratio flags use: the providers' median, never below DefaultRatio, so that
	// a provider claiming less than its tokens cannot have its rivals flagged.
	flag float64
}

type samples struct {
	seen int // claims offered to Learn
	ring [16]float64
	n    int // samples in ring
	next int
}

func (s *samples) median() float64 {
	xs := slices.Clone(s.ring[:s.n])
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// New returns a meter that knows no ratio yet.
func New() *Meter { return &Meter{models: map[string]*model{}} }

// Verdict is the meter's judgement of a usage claim.
type Verdict struct {
	Billed   int  // the tokens to bill: the claim, or the bound below it
	Clamped  bool // the claim was above the bound
	Inflated bool // ... and above it by more than an approximate count explains: flag the node
}

// Check judges a claim of completion tokens by a node serving model that delivered texts
// (its answer's text, reasoning and tool calls). special is how many tokens beyond the texts
// an engine may count: the end-of-text token, the tags around reasoning or tool calls, a stop
// string; the family may add its own (gpt-oss's harmony format).
func (m *Meter) Check(modelName string, claim, special int, texts ...string) Verdict {
	if FamilyOf(modelName) == GPTOSS {
		special += 16 // harmony's channel and message tags
	}
	words := special
	for _, t := range texts {
		words += Words(t)
	}
	if claim <= words {
		return Verdict{Billed: claim}
	}
	f := FamilyOf(modelName)
	ratio, flagRatio := 1.0, 1.0
	if f == Unknown {
		ratio, flagRatio = m.ratios(modelName)
	}
	bound, flag := special, special
	for _, t := range texts {
		n := Count(f, t)
		bound += int(float64(n)*ratio + 0.999)
		flag += int(float64(n)*flagRatio + 0.999)
	}
	if claim <= bound {
		return Verdict{Billed: claim}
	}
	return Verdict{Billed: bound, Clamped: true, Inflated: float64(claim) > float64(flag)*flagMargin+flagSlack}
}

// Bound is the most tokens text can hold for a model: its family tokenizer's count, or the
// cl100k count times the model's ratio.
func (m *Meter) Bound(modelName, text string) int {
	f := FamilyOf(modelName)
	n := Count(f, text)
	if f != Unknown || n == 0 {
		return n
	}
	return int(float64(n)*m.Ratio(modelName) + 0.999)
}

// Ratio returns the multiple of the cl100k count that bounds a model of unknown family.
func (m *Meter) Ratio(modelName string) float64 {
	r, _ := m.ratios(modelName)
	return r
}

// ratios returns the multiples of the cl100k count that bound a model of unknown family for
// its bills and for flags.
func (m *Meter) ratios(modelName string) (bill, flag float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if md := m.models[modelName]; md != nil && md.ratio > 0 {
		return md.ratio, md.flag
	}
	return DefaultRatio, DefaultRatio
}

// Learn records the claim of a verified node of provider serving model, for text it
// delivered, that was not flagged (a claim cut to the bound is learned too, so that a
// model whose tokenizer makes more than the bound allows can raise it once two providers
// agree). It learns only for models of unknown family, and samples: most calls return at
// once.
func (m *Meter) Learn(modelName, provider string, claim int, text string) {
	if FamilyOf(modelName) != Unknown || claim <= 0 {
		return
	}
	m.mu.Lock()
	md := m.models[modelName]
	if md == nil {
		if len(m.models) >= maxModels {
			m.mu.Unlock()
			return
		}
		md = &model{providers: map[string]*samples{}}
		m.models[modelName] = md
	}
	p := md.providers[provider]
	if p == nil {
		if len(md.providers) >= maxProviders {
			m.mu.Unlock()
			return
		}
		p = &samples{}
		md.providers[provider] = p
	}
	p.seen++
	sample := p.seen <= minSamples || p.seen%learnEvery == 0
	m.mu.Unlock()
	if !sample {
		return
	}
	n := Count(Unknown, text)
	if n < 8 {
		return // too short to tell a ratio
	}
	x := float64(claim) / float64(n)
	if x > maxRatio {
		return // no tokenizer makes that many: not an honest claim
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p.ring[p.next] = x
	p.next = (p.next + 1) % len(p.ring)
	p.n = min(p.n+1, len(p.ring))
	var medians []float64
	for _, q := range md.providers {
		if q.n >= minSamples {
			medians = append(medians, q.median())
		}
	}
	if len(medians) == 0 {
		return
	}
	slices.Sort(medians)
	md.ratio = min(max(medians[0]*margin, 1), maxRatio)
	if len(medians) == 1 {
		md.ratio = min(md.ratio, DefaultRatio)
	}
	md.flag = max(min(medians[len(medians)/2]*margin, maxRatio), md.ratio, DefaultRatio)
}

// Running counts a text that grows, an answer while it streams: each call of Bound counts
// only what was added since the last, from a place where the tokenizers cut too.
type Running struct{ upto, n int }

// Bound is m.Bound(model, text) for a text that extends the one of the previous call (a
// shorter one starts again). Text is counted in parts cut before the white space that precedes
// a word, as the tokenizers cut it, so the sum is the whole's count; only a part of more than
// 4 KiB with no such place is cut between characters, a token more or less.
func (r *Running) Bound(m *Meter, model, text string) int {
	if len(text) < r.upto {
		*r = Running{}
	}
	cut := r.upto
	for i := len(text) - 2; i > r.upto; i-- {
		if text[i] == ' ' && !isSpace(text[i+1]) {
			cut = i
			break
		}
	}
	if cut > r.upto {
		r.n += m.Bound(model, text[r.upto:cut])
		r.upto = cut
	}
	for len(text)-r.upto > 4<<10 { // no place to cut as the tokenizers do
		cut = r.upto + split(text[r.upto:], 4<<10)
		r.n += m.Bound(model, text[r.upto:cut])
		r.upto = cut
	}
	return r.n + m.Bound(model, text[r.upto:])
}
