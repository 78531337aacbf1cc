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
// code, do a small sum, write random words in capitals one per line. The answer is judged by
// what it must contain, not by its wording:
//
//   - echo: the answer contains the code (8 or 9 random capitals and digits, in groups), in any
//     case;
//   - arithmetic: the last whole number in the answer is the result (a sum or difference of
//     two-digit numbers, or a product of two numbers up to 12);
//   - format: the 3 or 4 words appear in capital letters, each on a line of its own, in the
//     order asked (as given, alphabetical or reversed); bullets, numbers and punctuation
//     around a word are allowed.
//
// A node that recognised the tests could pass them and answer buyers with anything, so each
// request is drawn to look like a buyer's and to vary on every count (reffree_ask.go): the
// task's wording is put together from several independent choices (the verb, the object, the
// qualifier, the constraint on the answer, where the data goes, how a list is written), set
// among a buyer's context (an opening, a situation with random names and places, a closing,
// in a random order), sometimes after a system prompt or an earlier exchange of an ordinary
// chat; the values (the code and its shape, the numbers, the words and their order), the
// order of the three tests, the temperature, the seed and max_tokens are random too. The
// prober draws the seed, so no fixed answer passes and no fixed prompt comes back.
//
// Text between <think> and </think> (and before a </think> that none opens) is left out, so
// that a model which writes its reasoning into its answer is judged by the answer. A check is
// the three tests, and passes only when all three do: a node that only echoes the prompt
// passes the first and fails the other two; one that answers "hello world", or random words,
// fails all three. A model that reasons before it answers (named so, see [Reasoning], or seen
// to) gets room to: a max_tokens of thousands, within its context; an answer cut by that
// limit before it was given decides nothing (see check.go).
//
// What they cannot do: tell one model from another. Any small model passes them under a big
// model's name; that is found only by comparing with other nodes of the model, once there are
// some (probes). And varied as they are, they are drawn from what this file can write: a node
// that runs a small model, or rules of its own, on every request that holds a code, a small
// sum or a word list, and something else on the others, passes them; so does a node that
// cheats only on long answers, on sampled ones, or on requests these tests never make. Until a
// second provider serves the model, its first node is checked by them alone.

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
	words   []string // format: the words, in lower case, in the order the answer must give them
	order   string   // format: the order asked, for a person to read ("" as given)
	ask     string   // what was asked, for a person to read
	prompt  string   // the user's last message, which asks it
}

// Budgets of max_tokens, when the context allows: buyers' common values, enough for a short
// answer and some thinking aloud; and for a model that reasons before it answers, enough for
// its reasoning (thousands of tokens on a trivial task for the DeepSeek R1 distills, QwQ or
// Qwen3 thinking).
var (
	refFreeMaxTokens   = [...]int{256, 300, 400, 500, 512}
	reasoningMaxTokens = [...]int{3000, 3072, 4000, 4096}
)

// minFitTokens is the least max_tokens a check fitted to a small context asks for.
const minFitTokens = 16

// answerRoom is the room for the answer a test's prompt leaves in a small context: when a
// buyer-like prompt would leave less, a plainer one is drawn.
const answerRoom = 96

// ReferenceFree returns a reference-free check of model: one test of each kind, in a random
// order, drawn from seed, each a chat request whose prompt and max_tokens fit contextLength
// (0: unknown, no limit). thinks gives the model room to reason first (see [Reasoning]). The
// same arguments always give the same tests.
func ReferenceFree(seed uint64, model string, contextLength int, thinks bool) []Test {
	r := rand.New(rand.NewPCG(seed, mix(seed)))
	kinds := []func(*composer) Test{(*composer).echo, (*composer).arithmetic, (*composer).format}
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	budgets := refFreeMaxTokens[:]
	if thinks {
		budgets = reasoningMaxTokens[:]
	}
	tests := make([]Test, len(kinds))
	for i, kind := range kinds {
		budget := budgets[r.IntN(len(budgets))]
		var (
			t    Test
			msgs []byte
		)
		// Dressed as a buyer's request, or plainer when that does not fit.
		for level := dressed; level >= bare; level-- {
			c := &composer{r: r, level: level}
			t = kind(c)
			msgs = encode(c.conversation(t.prompt))
			if contextLength <= 0 || PromptEstimate(msgs)+min(budget, answerRoom) <= contextLength {
				break
			}
		}
		t.Request = &protocol.Request{
			Kind: protocol.KindChat, Model: model, Messages: msgs,
			MaxTokens: fitTokens(budget, PromptEstimate(msgs), contextLength),
		}
		t.Request.Temperature, t.Request.Seed = sampling(r)
		tests[i] = t
	}
	return tests
}

// sampling draws a test's temperature and seed as buyers who want a steady answer send them:
// low temperatures, with or without one of the seeds buyers commonly send.
func sampling(r *rand.Rand) (*float64, *int64) {
	temps := [...]float64{0, 0, 0, 0.1, 0.2, 0.3}
	t := temps[r.IntN(len(temps))]
	if r.IntN(2) == 0 {
		return &t, nil
	}
	s := seeds[r.IntN(len(seeds))]
	return &t, &s
}

// reasoningParts are parts, and reasoningWords words, of the names of models that reason
// before they answer: DeepSeek R1 and its distills, QwQ, Qwen3, gpt-oss, Magistral, Phi-4
// reasoning, and any "thinking" model.
var (
	reasoningParts = [...]string{"qwq", "qwen3", "think", "reason", "gpt-oss", "magistral", "deepseek-r"}
	reasoningWords = [...]string{"r1", "o1", "o3", "or1"}
)

// Reasoning says whether model's name is of a family of models that reason before they
// answer, at length: they get a larger max_tokens in reference-free checks. It is a guess from
// the name; the prober also gives the room to a model it saw reasoning.
func Reasoning(model string) bool {
	m := strings.ToLower(model)
	for _, p := range reasoningParts {
		if strings.Contains(m, p) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(m, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }) {
		for _, rw := range reasoningWords {
			if w == rw {
				return true
			}
		}
	}
	return false
}

// fitTokens is maxTokens, cut so that a prompt of prompt tokens and the answer fit in
// contextLength (0: no limit), but no less than minFitTokens.
func fitTokens(maxTokens, prompt, contextLength int) int {
	if contextLength <= 0 {
		return maxTokens
	}
	return max(min(maxTokens, contextLength-prompt), minFitTokens)
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
		return false, fmt.Sprintf("asked %s (%d), answered %s", t.ask, t.result, quoteShort(answer))
	case TestFormat:
		if inCapitals(a, t.words) {
			return true, "wrote words in capitals, one per line"
		}
		order := ""
		if t.order != "" {
			order = ", " + t.order
		}
		return false, fmt.Sprintf("asked for %s in capitals one per line%s, answered %s",
			strings.Join(t.words, ", "), order, quoteShort(answer))
	}
	return false, "unknown test"
}

// withoutThinking leaves out what lies between <think> and </think>, an unclosed <think> to
// the end, and what comes before a </think> that no <think> opens (a chat template that opens
// the reasoning itself, as DeepSeek R1's does).
func withoutThinking(s string) string {
	if j := strings.Index(s, "</think>"); j >= 0 && !strings.Contains(s[:j], "<think>") {
		s = s[j+len("</think>"):]
	}
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
