package verify

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode"

	"github.com/shareai/shareai/internal/protocol"
)

// Reference-free tests check a model that no verified node serves yet, so that there is no
// other answer to compare with: the first node of a model. Each asks for something any
// working language model does and a fixed or random text generator cannot: repeat a random
// code, do a small sum, write random words in capitals one per line. The instance is random
// (the prober draws the seed), so no fixed answer passes, and the answer is judged by what it
// must contain, not by its wording:
//
//   - echo: the answer contains the code (8 random letters and digits), in any case;
//   - arithmetic: the last whole number in the answer is the result (a sum or difference of
//     two-digit numbers, or a product of two numbers up to 12);
//   - format: the three words appear in capital letters, in order, each on a line of its own
//     (bullets, numbers and punctuation around a word are allowed).
//
// Text between <think> and </think> is left out, so that a model which writes its reasoning
// into its answer is judged by the answer. A check is the three tests, and passes only when
// all three do: a node that only echoes the prompt passes the first and fails the other two;
// one that answers "hello world", or random words, fails all three.
//
// What they cannot do: tell one model from another. Any small model passes them under a big
// model's name; that is found only by comparing with other nodes of the model, once there are
// some (probes). And they do not look like buyers' requests, so a node that recognises them can
// pass them and serve something else to buyers: until a second provider serves the model,
// its first node is checked by them alone.

// Kinds of reference-free test.
const (
	TestEcho       = "echo"
	TestArithmetic = "arithmetic"
	TestFormat     = "format"
)

// Test is one reference-free test: a request, and what its answer must hold.
type Test struct {
	Kind    string
	Request *protocol.Request
	code    string   // echo: the code to repeat
	result  int      // arithmetic: the result
	words   []string // format: the words, in lower case
	ask     string   // what was asked, for a person to read
}

// refFreeMaxTokens is a test's max_tokens when the context allows: room for a model that
// thinks aloud before it answers.
const refFreeMaxTokens = 256

// minFitTokens is the least max_tokens a check fitted to a small context asks for.
const minFitTokens = 16

// ReferenceFree returns a reference-free check of model: one test of each kind, drawn from
// seed, each a chat request at temperature 0 whose prompt and max_tokens fit contextLength (0:
// unknown, no limit). The same seed always gives the same tests.
func ReferenceFree(seed uint64, model string, contextLength int) []Test {
	r := rand.New(rand.NewPCG(seed, mix(seed)))
	tests := []Test{echoTest(r), arithmeticTest(r), formatTest(r)}
	for i := range tests {
		msgs := encode([]turn{user(tests[i].ask)})
		temperature := 0.0
		s := seeds[r.IntN(len(seeds))]
		tests[i].Request = &protocol.Request{
			Kind: protocol.KindChat, Model: model, Messages: msgs, Temperature: &temperature, Seed: &s,
			MaxTokens: fitTokens(refFreeMaxTokens, PromptEstimate(msgs), contextLength),
		}
	}
	return tests
}

// fitTokens is maxTokens, cut so that a prompt of prompt tokens and the answer fit in
// contextLength (0: no limit), but no less than minFitTokens.
func fitTokens(maxTokens, prompt, contextLength int) int {
	if contextLength <= 0 {
		return maxTokens
	}
	return max(min(maxTokens, contextLength-prompt), minFitTokens)
}

// codeAlphabet has no letters and digits that read alike (0 O, 1 I).
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

var echoAsks = [...]string{
	"Reply with this code exactly, and nothing else: %s",
	"Please repeat the following code back to me exactly, with no other text: %s",
	"Copy this reference exactly as written and reply with nothing more: %s",
}

func echoTest(r *rand.Rand) Test {
	var b strings.Builder
	for i := range 9 {
		if i == 4 {
			b.WriteByte('-')
			continue
		}
		b.WriteByte(codeAlphabet[r.IntN(len(codeAlphabet))])
	}
	code := b.String()
	return Test{Kind: TestEcho, code: code, ask: fmt.Sprintf(echoAsks[r.IntN(len(echoAsks))], code)}
}

func arithmeticTest(r *rand.Rand) Test {
	t := Test{Kind: TestArithmetic}
	switch r.IntN(3) {
	case 0:
		a, b := 11+r.IntN(89), 11+r.IntN(89)
		t.result, t.ask = a+b, fmt.Sprintf("What is %d + %d? Reply with just the number.", a, b)
	case 1:
		a := 50 + r.IntN(50)
		b := 11 + r.IntN(a-11)
		t.result, t.ask = a-b, fmt.Sprintf("Compute %d - %d. Answer with the result only.", a, b)
	default:
		a, b := 3+r.IntN(10), 3+r.IntN(10)
		t.result, t.ask = a*b, fmt.Sprintf("What is %d times %d? Give only the number.", a, b)
	}
	return t
}

// formatWords are common words no model misspells in capitals.
var formatWords = [...]string{
	"apple", "river", "candle", "window", "garden", "pencil", "rabbit", "orange", "bridge", "mirror",
	"forest", "button", "rocket", "silver", "castle", "pepper", "ticket", "basket", "doctor", "planet",
	"guitar", "jacket", "camera", "violin", "island", "winter", "summer", "market", "tomato", "carpet",
	"hammer", "kitten", "lemon", "piano", "tiger", "cloud", "stone", "horse", "bread", "chair",
	"table", "glass", "paper", "music", "water", "green", "purple", "yellow", "spoon", "train",
}

var formatAsks = [...]string{
	"Write these words in capital letters, one per line, and nothing else: %s, %s, %s",
	"Put each of these words on its own line in uppercase letters, with no other text: %s, %s, %s",
}

func formatTest(r *rand.Rand) Test {
	p := r.Perm(len(formatWords))
	w := []string{formatWords[p[0]], formatWords[p[1]], formatWords[p[2]]}
	return Test{Kind: TestFormat, words: w, ask: fmt.Sprintf(formatAsks[r.IntN(len(formatAsks))], w[0], w[1], w[2])}
}

// Judge reports whether answer passes the test, with a sentence saying what was checked.
func (t Test) Judge(answer string) (passed bool, detail string) {
	a := withoutThinking(answer)
	switch t.Kind {
	case TestEcho:
		clean := strings.NewReplacer("`", "", `"`, "", "'", "", "*", "").Replace(a)
		if strings.Contains(strings.ToUpper(clean), t.code) {
			return true, "repeated a random code"
		}
		return false, fmt.Sprintf("asked to repeat the code %s, answered %s", t.code, quoteShort(answer))
	case TestArithmetic:
		if n, ok := lastNumber(a); ok && n == t.result {
			return true, "did a small sum"
		}
		return false, fmt.Sprintf("asked %q (%d), answered %s", t.ask, t.result, quoteShort(answer))
	case TestFormat:
		if inCapitals(a, t.words) {
			return true, "wrote words in capitals, one per line"
		}
		return false, fmt.Sprintf("asked for %s in capitals one per line, answered %s",
			strings.Join(t.words, ", "), quoteShort(answer))
	}
	return false, "unknown test"
}

// withoutThinking leaves out what lies between <think> and </think>, and an unclosed <think>
// to the end.
func withoutThinking(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len("</think>"):]
	}
}

// lastNumber returns the last whole number written in s (a minus sign right before it makes
// it negative).
func lastNumber(s string) (int, bool) {
	end := strings.LastIndexFunc(s, unicode.IsDigit)
	if end < 0 {
		return 0, false
	}
	start := end
	for start > 0 && s[start-1] >= '0' && s[start-1] <= '9' {
		start--
	}
	if end-start > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s[start : end+1])
	if err != nil {
		return 0, false
	}
	if start > 0 && s[start-1] == '-' && (start == 1 || s[start-2] == ' ' || s[start-2] == '\n') {
		n = -n
	}
	return n, true
}

// inCapitals reports whether each of words appears in capital letters on a line of its own,
// in order: the line's letters are the word's, all capitals.
func inCapitals(s string, words []string) bool {
	lines := strings.Split(s, "\n")
	k := 0
	for _, w := range words {
		want := strings.ToUpper(w)
		for ; k < len(lines); k++ {
			if lettersOf(lines[k]) == want {
				break
			}
		}
		if k == len(lines) {
			return false
		}
		k++
	}
	return true
}

func lettersOf(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) {
			return r
		}
		return -1
	}, s)
}

// quoteShort quotes the start of s, for a check's detail.
func quoteShort(s string) string {
	const n = 60
	if r := []rune(s); len(r) > n {
		return strconv.Quote(string(r[:n])) + "…"
	}
	return strconv.Quote(s)
}
