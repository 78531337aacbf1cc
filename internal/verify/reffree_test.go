package verify

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
)

// A model whose answers no one knows in advance: the reference-free checks judge it.
const realModel = "acme/llama-3.1-8b"

func TestReferenceFree_Deterministic(t *testing.T) {
	for seed := range uint64(50) {
		a, b := ReferenceFree(seed, realModel, 0), ReferenceFree(seed, realModel, 0)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: %+v, then %+v", seed, a, b)
		}
		if len(a) != 3 || a[0].Kind != TestEcho || a[1].Kind != TestArithmetic || a[2].Kind != TestFormat {
			t.Fatalf("seed %d: tests %+v; want one echo, one arithmetic, one format test", seed, a)
		}
		for _, tt := range a {
			r := tt.Request
			if r.Kind != protocol.KindChat || r.Model != realModel || r.Temperature == nil || *r.Temperature != 0 || r.Seed == nil {
				t.Errorf("seed %d %s: request %+v; want a chat at temperature 0 with a seed", seed, tt.Kind, r)
			}
		}
	}
	if reflect.DeepEqual(ReferenceFree(1, realModel, 0), ReferenceFree(2, realModel, 0)) {
		t.Error("two seeds give the same tests")
	}
}

// The simulated engine follows the tests' instructions as a language model does: it passes
// every one, under any model name and salt.
func TestReferenceFree_SimPasses(t *testing.T) {
	for _, salt := range []string{"", "another model"} {
		e := sim.New(sim.Config{Salt: salt, Models: []engine.Model{{Name: realModel}}})
		for seed := range uint64(2000) {
			for _, tt := range ReferenceFree(seed, realModel, 0) {
				got := run(t, e, tt.Request)
				if ok, detail := tt.Judge(got); !ok {
					t.Fatalf("salt %q seed %d: %s test failed on the sim's %q: %s", salt, seed, tt.Kind, got, detail)
				}
			}
		}
	}
}

// Text generators fail every kind of test: a fixed answer, random words, the prompt echoed.
func TestReferenceFree_GarbageFails(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("hello world the model answer token river mountain quick brown fox 42 7 APPLE RIVER")
	generators := map[string]func(Test) string{
		"hello world": func(Test) string { return "hello world" },
		"empty":       func(Test) string { return "" },
		"random words": func(Test) string {
			var b strings.Builder
			for range 40 {
				b.WriteString(words[r.IntN(len(words))] + " ")
			}
			return b.String()
		},
		"lines of random words": func(Test) string {
			var b strings.Builder
			for range 20 {
				b.WriteString(strings.ToUpper(formatWords[r.IntN(len(formatWords))]) + "\n")
			}
			return b.String()
		},
		"the prompt echoed": func(tt Test) string { return tt.ask },
	}
	for name, gen := range generators {
		t.Run(name, func(t *testing.T) {
			checks, passed := 200, 0
			for seed := range uint64(checks) {
				all := true
				for _, tt := range ReferenceFree(seed, realModel, 0) {
					if ok, _ := tt.Judge(gen(tt)); !ok {
						all = false
					}
				}
				if all {
					passed++
				}
			}
			if passed > 0 {
				t.Errorf("%s passed %d of %d reference-free checks; want none", name, passed, checks)
			}
		})
	}
}

// Real models word their answers in many ways; the judge looks at what the answer holds.
func TestTest_Judge(t *testing.T) {
	echo := Test{Kind: TestEcho, code: "K7QM-93XF"}
	sum := Test{Kind: TestArithmetic, result: 95, ask: "What is 37 + 58? Reply with just the number."}
	caps := Test{Kind: TestFormat, words: []string{"apple", "river", "candle"}}
	for _, tt := range []struct {
		name   string
		test   Test
		answer string
		want   bool
	}{
		{"echo: bare", echo, "K7QM-93XF", true},
		{"echo: in a sentence", echo, "Sure! Here is the code: `K7QM-93XF`", true},
		{"echo: lower case", echo, "k7qm-93xf", true},
		{"echo: after thinking aloud", echo, "<think>The user wants the code K7QM-93XF repeated.</think>\n\nK7QM-93XF", true},
		{"echo: only while thinking", echo, "<think>The user wants K7QM-93XF</think>\n\nOK", false},
		{"echo: another code", echo, "K7QM-93XG", false},
		{"sum: bare", sum, "95", true},
		{"sum: a sentence", sum, "The answer is **95**.", true},
		{"sum: the whole sum", sum, "37 + 58 = 95", true},
		{"sum: wrong", sum, "96", false},
		{"sum: the prompt", sum, "What is 37 + 58? Reply with just the number.", false},
		{"sum: thought, then cut short", sum, "<think>37 plus 58 is 95, so", false},
		{"caps: plain", caps, "APPLE\nRIVER\nCANDLE", true},
		{"caps: bullets and a preamble", caps, "Here you go:\n- APPLE\n- RIVER\n- CANDLE", true},
		{"caps: numbered, bold", caps, "1. **APPLE**\n2. **RIVER**\n3. **CANDLE**", true},
		{"caps: on one line", caps, "APPLE, RIVER, CANDLE", false},
		{"caps: lower case", caps, "apple\nriver\ncandle", false},
		{"caps: out of order", caps, "RIVER\nAPPLE\nCANDLE", false},
		{"caps: one missing", caps, "APPLE\nCANDLE", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, detail := tt.test.Judge(tt.answer); got != tt.want {
				t.Errorf("Judge(%q) = %v (%s); want %v", tt.answer, got, detail, tt.want)
			}
		})
	}
}

// Every test fits a small context, prompt and answer.
func TestReferenceFree_FitsContext(t *testing.T) {
	for _, ctxLen := range []int{0, 128, 200, 512, 8192} {
		for seed := range uint64(20) {
			for _, tt := range ReferenceFree(seed, realModel, ctxLen) {
				total := PromptEstimate(tt.Request.Messages) + tt.Request.MaxTokens
				if ctxLen > 0 && total > ctxLen {
					t.Errorf("context %d: a %s test takes %d tokens", ctxLen, tt.Kind, total)
				}
				if tt.Request.MaxTokens < minFitTokens || tt.Request.MaxTokens > refFreeMaxTokens {
					t.Errorf("context %d: max_tokens %d", ctxLen, tt.Request.MaxTokens)
				}
			}
		}
	}
}

func TestFitProbe(t *testing.T) {
	for _, ctxLen := range []int{0, 160, 256, 512, 8192} {
		for i := range NumProbes {
			req := FitProbe(i, testModel, ctxLen)
			total := PromptEstimate(req.Messages) + req.MaxTokens
			switch {
			case ctxLen == 0:
				if !reflect.DeepEqual(req, Probe(i, testModel)) {
					t.Errorf("unknown context: FitProbe(%d) is not Probe(%d)", i, i)
				}
			case total > ctxLen && req.MaxTokens > minFitTokens:
				t.Errorf("context %d: probe %d takes %d tokens", ctxLen, i, total)
			}
			if req.MaxTokens < minFitTokens {
				t.Errorf("context %d: probe %d asks for %d tokens", ctxLen, i, req.MaxTokens)
			}
		}
	}
	// A context the probes fill still gets varied probes, not always the shortest.
	seen := map[string]bool{}
	for i := range NumProbes {
		seen[string(FitProbe(i, testModel, 256).Messages)] = true
	}
	if len(seen) < 5 {
		t.Errorf("a context of 256 tokens gets %d different probes; want variety", len(seen))
	}
}

func TestInflated(t *testing.T) {
	for _, tt := range []struct {
		name         string
		claimed      int
		got          string
		refTokens    int
		ref          string
		want         bool
		wantExpected int
	}{
		{"the same count", 50, "same text", 50, "same text", false, 50},
		{"an end-of-text token more", 51, "same text", 50, "same text", false, 50},
		{"a fifth more", 60, "same text", 50, "same text", false, 50},
		{"twice as many", 100, "same text", 50, "same text", true, 50},
		{"a shorter answer scaled", 40, "half", 50, "halfhalf", true, 25},
		{"no reference count", 500, "text", 0, "text", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expected, got := Inflated(tt.claimed, tt.got, tt.refTokens, tt.ref)
			if got != tt.want || expected != tt.wantExpected {
				t.Errorf("Inflated = %d, %v; want %d, %v", expected, got, tt.wantExpected, tt.want)
			}
		})
	}
}

// A sim answers a reference-free test the same way each time, and engines with other salts
// (other models) word it otherwise: known answers tell them apart.
func TestReferenceFree_SimWording(t *testing.T) {
	honest := sim.New(sim.Config{Models: []engine.Model{{Name: realModel}}})
	other := sim.New(sim.Config{Salt: "x", Models: []engine.Model{{Name: realModel}}})
	same := 0
	for seed := range uint64(100) {
		for _, tt := range ReferenceFree(seed, realModel, 0) {
			a, b := run(t, honest, tt.Request), run(t, honest, tt.Request)
			if a != b {
				t.Fatalf("the sim answered %q, then %q", a, b)
			}
			if run(t, other, tt.Request) == a {
				same++
			}
		}
	}
	if same > 150 {
		t.Errorf("another salt words %d of 300 answers the same; want most different", same)
	}
}
