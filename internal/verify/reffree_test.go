package verify

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
)

// A model whose answers no one knows in advance: the reference-free checks judge it.
const realModel = "acme/llama-3.1-8b"

func TestReferenceFree_Deterministic(t *testing.T) {
	orders := map[string]bool{}
	for seed := range uint64(50) {
		a, b := ReferenceFree(seed, realModel, 0, false), ReferenceFree(seed, realModel, 0, false)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: %+v, then %+v", seed, a, b)
		}
		var kinds []string
		for _, tt := range a {
			kinds = append(kinds, tt.Kind)
		}
		orders[strings.Join(kinds, " ")] = true
		if slices.Sort(kinds); !slices.Equal(kinds, []string{TestArithmetic, TestEcho, TestFormat}) {
			t.Fatalf("seed %d: tests %v; want one echo, one arithmetic, one format test", seed, kinds)
		}
		for _, tt := range a {
			r := tt.Request
			if r.Kind != protocol.KindChat || r.Model != realModel || r.Temperature == nil || *r.Temperature > 0.3 {
				t.Errorf("seed %d %s: request %+v; want a chat at a low temperature", seed, tt.Kind, r)
			}
		}
	}
	if len(orders) < 4 {
		t.Errorf("the tests come in %d orders; want them shuffled: %v", len(orders), orders)
	}
	if reflect.DeepEqual(ReferenceFree(1, realModel, 0, false), ReferenceFree(2, realModel, 0, false)) {
		t.Error("two seeds give the same tests")
	}
}

// values hides a test's random values in its prompt, leaving its wording.
func values(tt Test) string {
	p := tt.prompt
	for _, w := range tt.words {
		for _, f := range []string{w, upperFirst(w)} {
			p = strings.ReplaceAll(p, f, "W")
		}
	}
	if tt.code != "" {
		p = strings.ReplaceAll(p, tt.code, "CODE")
	}
	for _, l := range [][]string{names[:], places[:]} {
		for _, w := range l {
			p = strings.ReplaceAll(p, w, "X")
		}
	}
	return regexp.MustCompile(`\d+`).ReplaceAllString(p, "N")
}

// onlyValues says whether a phrase of values hides nothing but values.
func onlyValues(phrase string) bool {
	for _, w := range strings.Fields(phrase) {
		if w = strings.Trim(w, ",.:;\"'()?!-*•"); w != "w" && w != "n" && w != "x" && w != "code" && w != "" {
			return false
		}
	}
	return true
}

// A script that recognises the tests by their wording has no wording to hold on to: the
// requests of a kind share no phrase, come in hundreds of wordings even with their values
// hidden, set among a buyer's context, sometimes after a system prompt or an earlier exchange.
func TestReferenceFree_Varied(t *testing.T) {
	const checks = 1000
	prompts := map[string]map[string]bool{}
	wordings := map[string]map[string]bool{}
	phrases := map[string]map[string]int{}
	var inContext, withSystem, withHistory, multiline int
	for seed := range uint64(checks) {
		for _, tt := range ReferenceFree(seed, realModel, 0, false) {
			if prompts[tt.Kind] == nil {
				prompts[tt.Kind], wordings[tt.Kind], phrases[tt.Kind] = map[string]bool{}, map[string]bool{}, map[string]int{}
			}
			prompts[tt.Kind][tt.prompt] = true
			if strings.Contains(tt.prompt, "%!") || strings.Contains(tt.prompt, "{") {
				t.Fatalf("a prompt badly written: %q", tt.prompt)
			}
			wordings[tt.Kind][values(tt)] = true
			// Each phrase of 3 words counted once a prompt.
			ws := strings.Fields(strings.ToLower(values(tt)))
			seen := map[string]bool{}
			for i := 0; i+3 <= len(ws); i++ {
				if ph := strings.Join(ws[i:i+3], " "); !seen[ph] {
					seen[ph] = true
					phrases[tt.Kind][ph]++
				}
			}
			if strings.Count(tt.prompt, ". ")+strings.Count(tt.prompt, "! ")+strings.Count(tt.prompt, "? ") >= 1 {
				inContext++
			}
			if strings.Contains(tt.prompt, "\n") {
				multiline++
			}
			var msgs []struct{ Role string }
			if err := json.Unmarshal(tt.Request.Messages, &msgs); err != nil {
				t.Fatal(err)
			}
			if msgs[0].Role == "system" {
				withSystem++
			}
			if len(msgs) > 2 || len(msgs) == 2 && msgs[0].Role == "user" {
				withHistory++
			}
		}
	}
	for kind, ps := range prompts {
		if len(ps) < checks*99/100 {
			t.Errorf("%s: %d different prompts in %d checks; want nearly all different", kind, len(ps), checks)
		}
		if n := len(wordings[kind]); n < 300 {
			t.Errorf("%s: %d wordings in %d checks, values hidden; want hundreds", kind, n, checks)
		}
		top, most := "", 0
		for ph, n := range phrases[kind] {
			if n > most && !onlyValues(ph) {
				top, most = ph, n
			}
		}
		t.Logf("%s: %d prompts, %d wordings; the commonest phrase %q in %d", kind, len(ps), len(wordings[kind]), top, most)
		if most > checks/4 {
			t.Errorf("%s: the phrase %q is in %d of %d prompts; want no phrase in a quarter", kind, top, most, checks)
		}
	}
	all := 3 * checks
	t.Logf("of %d tests: %d in a buyer's context, %d multi-line, %d after a system prompt, %d after an earlier exchange",
		all, inContext, multiline, withSystem, withHistory)
	if inContext < all/2 || multiline < all/10 || withSystem < all/20 || withHistory < all/20 {
		t.Errorf("%d in context, %d multi-line, %d with a system prompt, %d with history, of %d; want many of each",
			inContext, multiline, withSystem, withHistory, all)
	}
}

// The simulated engine follows the tests' instructions as a language model does: it passes
// every one, under any model name and salt, in any context.
func TestReferenceFree_SimPasses(t *testing.T) {
	for _, salt := range []string{"", "another model"} {
		e := sim.New(sim.Config{Salt: salt, Models: []engine.Model{{Name: realModel}}})
		for seed := range uint64(3000) {
			ctxLen := []int{0, 0, 512, 8192}[seed%4]
			for _, tt := range ReferenceFree(seed, realModel, ctxLen, seed%3 == 0) {
				got := run(t, e, tt.Request)
				if ok, detail := tt.Judge(got); !ok {
					t.Fatalf("salt %q seed %d: %s test failed on the sim's %q: %s\nprompt: %s", salt, seed, tt.Kind, got, detail, tt.prompt)
				}
			}
		}
	}
}

// oldTemplates are the few fixed asks the reference-free tests once had: a script that knew
// them passed every check and could answer buyers with anything.
var oldTemplates = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`^(?:Reply with this code exactly, and nothing else|Please repeat the following code back to me exactly, with no other text|Copy this reference exactly as written and reply with nothing more): (\S+)$`), TestEcho},
	{regexp.MustCompile(`^What is (\d+) \+ (\d+)\? Reply with just the number\.$`), "+"},
	{regexp.MustCompile(`^Compute (\d+) - (\d+)\. Answer with the result only\.$`), "-"},
	{regexp.MustCompile(`^What is (\d+) times (\d+)\? Give only the number\.$`), "*"},
	{regexp.MustCompile(`^(?:Write these words in capital letters, one per line, and nothing else|Put each of these words on its own line in uppercase letters, with no other text): (\w+), (\w+), (\w+)$`), TestFormat},
}

// oldScript answers the old templates rightly, and anything else with garbage.
func oldScript(prompt string) string {
	for _, o := range oldTemplates {
		m := o.re.FindStringSubmatch(prompt)
		if m == nil {
			continue
		}
		a, _ := strconv.Atoi(m[1])
		b := 0
		if len(m) > 2 {
			b, _ = strconv.Atoi(m[2])
		}
		switch o.kind {
		case TestEcho:
			return m[1]
		case TestFormat:
			return strings.ToUpper(strings.Join(m[1:], "\n"))
		case "+":
			return strconv.Itoa(a + b)
		case "-":
			return strconv.Itoa(a - b)
		default:
			return strconv.Itoa(a * b)
		}
	}
	return "hello world"
}

// Text generators fail every kind of test: a fixed answer, random words, the prompt echoed; so
// does a script that knows a few fixed wordings.
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
		"the prompt echoed":       func(tt Test) string { return tt.prompt },
		"the messages echoed":     func(tt Test) string { return string(tt.Request.Messages) },
		"the old templates known": func(tt Test) string { return oldScript(tt.prompt) },
	}
	// The script knew the old tests: it passed every one of them.
	for _, ask := range []string{
		"Reply with this code exactly, and nothing else: K7QM-93XF", "What is 37 + 58? Reply with just the number.",
		"Write these words in capital letters, one per line, and nothing else: apple, river, candle",
	} {
		if oldScript(ask) == "hello world" {
			t.Fatalf("the old script does not know %q", ask)
		}
	}
	for name, gen := range generators {
		t.Run(name, func(t *testing.T) {
			checks, passed, passedTests := 500, 0, 0
			for seed := range uint64(checks) {
				all := true
				for _, tt := range ReferenceFree(seed, realModel, 0, false) {
					if ok, _ := tt.Judge(gen(tt)); !ok {
						all = false
					} else {
						passedTests++
					}
				}
				if all {
					passed++
				}
			}
			t.Logf("%s passed %d of %d tests", name, passedTests, 3*checks)
			if passed > 0 {
				t.Errorf("%s passed %d of %d reference-free checks; want none", name, passed, checks)
			}
		})
	}
}

// Real models word their answers in many ways; the judge looks at what the answer holds.
func TestTest_Judge(t *testing.T) {
	echo := Test{Kind: TestEcho, code: "K7QM-93XF"}
	sum := Test{Kind: TestArithmetic, result: 95, ask: `"37 + 58"`}
	caps := Test{Kind: TestFormat, words: []string{"apple", "river", "candle"}}
	sorted := Test{Kind: TestFormat, words: []string{"apple", "candle", "river"}, order: "in alphabetical order"}
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
		{"echo: thinking opened by the template", echo, "The user wants K7QM-93XF.\n</think>\n\nOK", false},
		{"echo: after thinking opened by the template", echo, "The user wants a code.\n</think>\n\nK7QM-93XF", true},
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
		{"sorted: sorted", sorted, "APPLE\nCANDLE\nRIVER", true},
		{"sorted: as given", sorted, "APPLE\nRIVER\nCANDLE", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, detail := tt.test.Judge(tt.answer); got != tt.want {
				t.Errorf("Judge(%q) = %v (%s); want %v", tt.answer, got, detail, tt.want)
			}
		})
	}
}

// Every test fits a small context, prompt and answer; a model that reasons gets thousands of
// tokens where the context allows.
func TestReferenceFree_FitsContext(t *testing.T) {
	for _, thinks := range []bool{false, true} {
		for _, ctxLen := range []int{0, 128, 200, 256, 512, 1024, 8192} {
			for seed := range uint64(200) {
				for _, tt := range ReferenceFree(seed, realModel, ctxLen, thinks) {
					prompt, maxTokens := PromptEstimate(tt.Request.Messages), tt.Request.MaxTokens
					switch {
					case maxTokens < minFitTokens:
						t.Errorf("context %d: max_tokens %d", ctxLen, maxTokens)
					case ctxLen > 0 && prompt+maxTokens > ctxLen && maxTokens > minFitTokens:
						t.Errorf("context %d: a %s test takes %d tokens", ctxLen, tt.Kind, prompt+maxTokens)
					case ctxLen >= 256 && maxTokens < min(answerRoom, ctxLen-prompt):
						t.Errorf("context %d: a %s test leaves %d tokens for the answer", ctxLen, tt.Kind, maxTokens)
					case (ctxLen == 0 || ctxLen >= 8192) && thinks && maxTokens < 3000:
						t.Errorf("context %d: a model that reasons gets max_tokens %d", ctxLen, maxTokens)
					case !thinks && maxTokens > 512:
						t.Errorf("context %d: max_tokens %d", ctxLen, maxTokens)
					}
				}
			}
		}
	}
}

func TestReasoning(t *testing.T) {
	for _, tt := range []struct {
		model string
		want  bool
	}{
		{"deepseek-r1:8b", true},
		{"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", true},
		{"Qwen/QwQ-32B", true},
		{"qwen3:30b-a3b", true},
		{"Qwen/Qwen3-235B-A22B-Thinking-2507", true},
		{"openai/gpt-oss-20b", true},
		{"microsoft/Phi-4-reasoning-plus", true},
		{"mistralai/Magistral-Small-2506", true},
		{"open-thoughts/OpenThinker-7B", true},
		{"llama3.1:8b", false},
		{"meta-llama/Llama-3.1-8B-Instruct", false},
		{"qwen2.5:7b", false},
		{"mistral-nemo:12b", false},
		{"acme/llama-3.1-8b", false},
	} {
		if got := Reasoning(tt.model); got != tt.want {
			t.Errorf("Reasoning(%q) = %v; want %v", tt.model, got, tt.want)
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
		for _, tt := range ReferenceFree(seed, realModel, 0, false) {
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
