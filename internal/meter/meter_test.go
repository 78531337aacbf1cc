package meter

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func TestFamilyOf(t *testing.T) {
	tests := []struct {
		model string
		want  Family
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", Llama3},
		{"llama3.2:3b", Llama3},
		{"sim/llama-3.1-8b", Llama3},
		{"Qwen/Qwen2.5-7B-Instruct", Qwen},
		{"qwen3:8b", Qwen},
		{"sim/qwen-2.5-7b", Qwen},
		{"openai/gpt-oss-20b", GPTOSS},
		{"gpt-oss:120b", GPTOSS},
		{"gpt-4", OpenAI},
		{"mistralai/Mistral-7B-Instruct-v0.3", Unknown},
		{"llama-2-7b-chat", Unknown},
		{"tiny", Unknown},
		{"", Unknown},
	}
	for _, tt := range tests {
		if got := FamilyOf(tt.model); got != tt.want {
			t.Errorf("FamilyOf(%q) = %v, want %v", tt.model, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		f    Family
		text string
		want int
	}{
		{Llama3, "Hello world", 2},
		{Llama3, "", 0},
		{GPTOSS, "Hello world", 2},
		{Llama3, "12345", 2}, // cl100k: "123", "45"
		{Qwen, "12345", 5},   // one token a digit
		{Qwen, "Hello world", 2},
	}
	for _, tt := range tests {
		if got := Count(tt.f, tt.text); got != tt.want {
			t.Errorf("Count(%v, %q) = %d, want %d", tt.f, tt.text, got, tt.want)
		}
	}
}

// The count of a long text, tokenized in chunks, is the count of the whole.
func TestCount_Chunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "network", "café", "Zürich", "東京", "🙂", "12345", "don't", "\n", "  ", "x=1;", "naïve"}
	var b strings.Builder
	for b.Len() < 5*chunk {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	text := b.String()
	whole, _ := cl100k().Count(text)
	if got := Count(Llama3, text); got != whole {
		t.Errorf("chunked count = %d, whole count = %d", got, whole)
	}
	// No white space at all: cut on character boundaries, each cut costing at most a token.
	dense := strings.Repeat("東京", 3*chunk)
	whole, _ = cl100k().Count(dense)
	if got := Count(Llama3, dense); got < whole || got > whole+len(dense)/chunk+1 {
		t.Errorf("dense count = %d, whole count = %d", got, whole)
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"   ", 0},
		{"one", 1},
		{" Hello, world. ", 2},
		{"a\tb\nc  d", 4},
		{"café\u00a0bar", 1}, // a non-ASCII space joins: the bound is only lower
	}
	for _, tt := range tests {
		if got := Words(tt.text); got != tt.want {
			t.Errorf("Words(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// FuzzWords checks that Words is a lower bound of every family's count, as Check relies on.
func FuzzWords(f *testing.F) {
	for _, s := range []string{"Hello, world.", "  a  b ", "東京 🙂", "x\u00a0y z", "\xff\xfe a", "don't stop", "1 22 333 4444"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w := Words(s)
		// The library skips U+007F (Count makes up for it): '~' is of the same class.
		s = strings.ReplaceAll(s, "\x7f", "~")
		for _, c := range []interface{ Count(string) (int, error) }{cl100k(), o200k()} {
			if n, _ := c.Count(s); w > n {
				t.Fatalf("Words(%q) = %d > %d tokens", s, w, n)
			}
		}
	})
}

func TestCheck(t *testing.T) {
	m := New()
	text := "The quick brown fox jumps over the lazy dog, again and again until morning comes."
	honest := Count(Llama3, text)
	tests := []struct {
		name     string
		model    string
		claim    int
		wantBill int
		wantOver bool
	}{
		{"honest", "llama3.1:8b", honest, honest, false},
		{"one end-of-text token", "llama3.1:8b", honest + 1, honest + 1, false},
		{"within words", "llama3.1:8b", Words(text), Words(text), false},
		{"inflated", "llama3.1:8b", 97, honest + 1, true},
		{"under-claimed", "llama3.1:8b", 3, 3, false},
		{"unknown family, default ratio", "mistral-7b", 97, int(float64(Count(Unknown, text))*DefaultRatio+0.999) + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := m.Check(tt.model, tt.claim, 1, text)
			if got, over := v.Billed, v.Clamped; got != tt.wantBill || over != tt.wantOver || v.Inflated != over {
				t.Errorf("Check(%d) = %d, %v; want %d, %v", tt.claim, got, over, tt.wantBill, tt.wantOver)
			}
		})
	}
}

// The scenario: 96 bytes of answer, 97 tokens claimed. The buyer pays at most 10% more
// than the honest count where the family's tokenizer is known, and at most 25% more elsewhere,
// once the meter has learned the model's ratio from verified nodes.
func TestCheck_InflationScenario(t *testing.T) {
	text := "Paris is the capital of France. It sits on the Seine, and three million people live in the city."
	if len(text) != 96 {
		t.Fatalf("scenario text is %d bytes, want 96", len(text))
	}
	m := New()
	t.Run("known tokenizer", func(t *testing.T) {
		honest := Count(Llama3, text)
		v := m.Check("meta-llama/Llama-3.1-8B-Instruct", 97, 1, text)
		billed, over := v.Billed, v.Inflated
		t.Logf("honest %d tokens, claimed 97, billed %d", honest, billed)
		if !over || float64(billed) > 1.1*float64(honest) {
			t.Errorf("billed %d (flagged %v) of an honest %d: want flagged, at most %d", billed, over, honest, int(1.1*float64(honest)))
		}
	})
	t.Run("unknown tokenizer", func(t *testing.T) {
		// Verified nodes of a SentencePiece model, of two providers, make about 1.2 times
		// cl100k's tokens.
		corpus := []string{
			"Rivers carry water from the mountains to the sea, shaping valleys over many thousands of years.",
			"A good answer is short, clear and honest about what it does not know, and it names its sources.",
			"The engine reads the prompt, builds its cache of keys and values, then writes the answer token by token.",
			"Winter mornings in the city are quiet; the first trams run empty, and the bakeries open before six.",
		}
		model := "mistralai/Mistral-7B-Instruct-v0.3"
		for i := range 3 * minSamples {
			s := corpus[i%len(corpus)]
			m.Learn(model, []string{"acct_a", "acct_b"}[i%2], int(1.2*float64(Count(Unknown, s))), s)
		}
		honest := int(1.2 * float64(Count(Unknown, text)))
		v := m.Check(model, 97, 1, text)
		billed, over := v.Billed, v.Inflated
		t.Logf("honest %d tokens, claimed 97, billed %d (ratio %.3f)", honest, billed, m.Ratio(model))
		if !over || float64(billed) > 1.25*float64(honest) {
			t.Errorf("billed %d (flagged %v) of an honest %d: want flagged, at most %d", billed, over, honest, int(1.25*float64(honest)))
		}
		if v := m.Check(model, honest, 1, text); v.Clamped || v.Billed != honest {
			got, over := v.Billed, v.Clamped
			t.Errorf("honest claim %d billed %d (clamped %v)", honest, got, over)
		}
	})
}

// A provider of verified nodes inflating its claims does not move the learned ratio: the
// lowest provider's ratio bounds the model, and a provider alone cannot raise it above the
// default.
func TestLearn_Robust(t *testing.T) {
	m := New()
	s := "Rivers carry water from the mountains to the sea, shaping valleys over many thousands of years."
	n := Count(Unknown, s)
	for range 200 {
		m.Learn("tiny", "acct_inflating", 2*n, s) // at the bound each time, never flagged
	}
	if r := m.Ratio("tiny"); r > DefaultRatio {
		t.Errorf("ratio = %.3f with one provider inflating; want at most the default %.2f", r, DefaultRatio)
	}
	for range 20 {
		m.Learn("tiny", "acct_honest", n, s)
	}
	if r := m.Ratio("tiny"); r > margin {
		t.Errorf("ratio = %.3f with an honest provider too; want the honest one's %.2f", r, margin)
	}
	m.Learn("llama3.1:8b", "acct_honest", 1000, s) // known families learn nothing
	if len(m.models) != 1 {
		t.Errorf("learned %d models, want 1", len(m.models))
	}
}

// A claim a little above the count, as an approximate tokenizer may be off, is billed at the
// count but not held against the node; one well above it is.
func TestCheck_FlagMargin(t *testing.T) {
	text := "The quick brown fox jumps over the lazy dog, again and again until morning comes."
	bound := Count(Llama3, text) + 1
	for _, tt := range []struct {
		claim    int
		inflated bool
	}{{bound + 1, false}, {bound + 3, false}, {bound*11/10 + 3, true}, {97, true}} {
		v := New().Check("llama3.1:8b", tt.claim, 1, text)
		if !v.Clamped || v.Billed != bound || v.Inflated != tt.inflated {
			t.Errorf("claim %d of a bound %d: %+v; want clamped, inflated %v", tt.claim, bound, v, tt.inflated)
		}
	}
}

// A real engine's honest claim, recorded from llama.cpp with a tiny SentencePiece-style
// vocabulary (a family the meter does not know), is billed as claimed.
func TestCheck_RecordedLlamaCpp(t *testing.T) {
	b, err := os.ReadFile("testdata/llamacpp_chat_nonstream.json")
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatal(err)
	}
	text, claim := answer.Choices[0].Message.Content, answer.Usage.CompletionTokens
	if v := New().Check("tiny", claim, 1, text); v.Clamped || v.Billed != claim {
		got, over := v.Billed, v.Clamped
		t.Errorf("claim %d for %q billed %d (flagged %v), want as claimed", claim, text, got, over)
	}
}

func BenchmarkCheck(b *testing.B) {
	// 20 words, as the path benchmark's answers: claims within the words need no count.
	words := strings.Repeat(" word", 20)
	long := strings.Repeat("The engine reads the prompt, builds its cache, then writes the answer token by token. ", 12)
	m := New()
	b.Run("words", func(b *testing.B) {
		for b.Loop() {
			m.Check("llama3.1:8b", 20, 1, words)
		}
	})
	b.Run("library-1KB", func(b *testing.B) {
		b.SetBytes(int64(len(long)))
		for b.Loop() {
			cl100k().Count(long)
		}
	})
	degenerate := strings.Repeat(" \n", 32<<10) // one piece of 64 KiB: the library's worst
	b.Run("degenerate-64KB", func(b *testing.B) {
		b.SetBytes(int64(len(degenerate)))
		for b.Loop() {
			Count(Llama3, degenerate)
			Count(GPTOSS, degenerate)
		}
	})
	b.Run("counted-1KB", func(b *testing.B) {
		claim := Words(long) + 10
		b.SetBytes(int64(len(long)))
		for b.Loop() {
			m.Check("llama3.1:8b", claim, 1, long)
		}
	})
}

// countCl100k cuts text as the library's regular expression does: its counts are the
// library's, piece by piece.
func FuzzCountCl100k(f *testing.F) {
	for _, s := range []string{
		"Hello, world.", "  a  b ", "東京 🙂", "x\u00a0y z", "\xff\xfe a", "don't stop", "DON'T", "it'll", "we'RE",
		"1 22 333 4444 55555", "a\n\n b", "a \n\t b", "x  ", "  ", "\r\n\r\n", "'sup 'ſ", "¿Qué?", "x+=1;\n\tfoo()",
		"naïve café", "e\u0301t\u00e9", "....!!!\n", " ,", "\u2028a", "  \u3000x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ReplaceAll(s, "\x7f", "~") // the library skips U+007F
		want, _ := cl100k().Count(s)
		cuts := 0 // pieces longer than maxPiece are counted in parts, a token more or less a cut
		for i := 0; i < len(s); {
			j := nextPiece(s, i)
			cuts += (j - i - 1) / maxPiece
			i = j
		}
		if got := countCl100k(s); got < want-cuts || got > want+cuts {
			t.Fatalf("countCl100k(%q) = %d, the library counts %d (%d cuts)", s, got, want, cuts)
		}
	})
}

func TestCountCl100k_Library(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	parts := []string{"the", " network", "Café", "Zürich", "東京", "🙂", "12345", "don't", "I'LL", "\n", "\r\n", "  ", "\t",
		"x=1;", "naïve", ",", ".", "...", "(", "\u00a0", "é", "\u0301", "'s", "'", "-", "  \n ", "ſ", "Ⅻ", "٣"}
	for range 3000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		s := b.String()
		if want, _ := cl100k().Count(s); countCl100k(s) != want {
			t.Fatalf("countCl100k(%q) = %d, the library counts %d", s, countCl100k(s), want)
		}
	}
}

// A running count of a growing text is the count of the whole.
func TestRunning(t *testing.T) {
	m := New()
	text := strings.Repeat("The engine reads the prompt, builds its cache, then writes the answer token by token. ", 40)
	var r Running
	for n := 1; n <= len(text); n += 37 {
		if got, want := r.Bound(m, "llama3.1:8b", text[:n]), m.Bound("llama3.1:8b", text[:n]); got != want {
			t.Fatalf("running count of %d bytes = %d, the whole's %d", n, got, want)
		}
	}
}

// A provider that claims fewer tokens than its nodes make lowers what every provider of the
// model is billed, not the bar its rivals are flagged at.
func TestLearn_UnderClaimerFlagsNobody(t *testing.T) {
	m := New()
	s := "Rivers carry water from the mountains to the sea, shaping valleys over many thousands of years."
	n := Count(Unknown, s)
	for range 20 {
		m.Learn("tiny", "acct_rival", int(0.8*float64(n)), s)
		m.Learn("tiny", "acct_honest", int(1.2*float64(n)), s)
	}
	v := m.Check("tiny", int(1.2*float64(Count(Unknown, s))), 1, s)
	if v.Inflated {
		t.Errorf("the honest provider's claim was flagged: %+v (ratio %.2f)", v, m.Ratio("tiny"))
	}
}
