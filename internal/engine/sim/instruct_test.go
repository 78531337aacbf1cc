package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// The simulated model follows simple instructions however they are worded and wherever they
// stand in the message, in one of a few wordings of its own.
func TestInstructions(t *testing.T) {
	e := New(Config{})
	code := func(c string) []string {
		return []string{c, "`" + c + "`", "Here it is: " + c, "Sure: " + c, "Sure, here it is:\n\n" + c, "**" + c + "**"}
	}
	number := func(n, sum string) []string {
		return []string{n, n + ".", "The answer is " + n + ".", sum + " = " + n + ".", "**" + n + "**"}
	}
	lines := func(ws ...string) []string {
		var plain, dashes, numbered []string
		for i, w := range ws {
			plain, dashes, numbered = append(plain, w), append(dashes, "- "+w), append(numbered, string(rune('1'+i))+". "+w)
		}
		return []string{strings.Join(plain, "\n"), strings.Join(dashes, "\n"), strings.Join(numbered, "\n")}
	}
	for _, tt := range []struct {
		ask  string
		want []string // one of the wordings
	}{
		{"Reply with this code exactly, and nothing else: K7Q2-93XF", code("K7Q2-93XF")},
		{"Reply with this code exactly:\nK7Q2-93XF", code("K7Q2-93XF")},
		{"Hey! My parcel's tracking ID is ZX81-QQ40, can you echo it back to me verbatim?", code("ZX81-QQ40")},
		{"AB3-77Q-KP9\n\nCopy the reference above, character for character. It's for a form.", code("AB3-77Q-KP9")},
		{"What is 37 + 58? Reply with just the number.", number("95", "37 + 58")},
		{"Compute 71 - 29. Answer with the result only.", number("42", "71 - 29")},
		{"What is 7 times 8? Give only the number.", number("56", "7 × 8")},
		{"hey quick one, what's 12 x 11? just the number pls", number("132", "12 × 11")},
		{"I'm doing my taxes. Please subtract 19 from 64 and give me the result, nothing else.", number("45", "64 - 19")},
		{"Number only: the product of 6 and 7.", number("42", "6 × 7")},
		{"My calculator died. How much is 83 − 73?", number("10", "83 - 73")},
		{"Write these words in capital letters, one per line, and nothing else: apple, river, candle", lines("APPLE", "RIVER", "CANDLE")},
		{"Put each of these words on its own line in uppercase letters, with no other text: lemon, tiger", lines("LEMON", "TIGER")},
		{"For a poster: could you list \"dog\", \"cat\" and \"owl\" in all caps, one per line, sorted alphabetically?", lines("CAT", "DOG", "OWL")},
		{"Uppercase please, each on a new line, in reverse order:\n- one\n- two\n- three", lines("THREE", "TWO", "ONE")},
		{"Signs for the party. My words: Lemon, Mirror and Yellow. Type them in block capitals on separate lines.", lines("LEMON", "MIRROR", "YELLOW")},
	} {
		t.Run(tt.ask, func(t *testing.T) {
			seen := map[string]bool{}
			for seed := range int64(40) {
				req := user(tt.ask, seed)
				got := emitted(t, e, req)
				if !contains(tt.want, got) {
					t.Fatalf("seed %d: %q; want one of %q", seed, got, tt.want)
				}
				if got != e.Answer(req) {
					t.Errorf("Run emitted %q, Answer says %q", got, e.Answer(req))
				}
				seen[got] = true
			}
			if len(seen) < 2 {
				t.Errorf("one wording only: %v", seen)
			}
		})
	}
}

// Only a user's last message that asks one of them is an instruction: anything else gets the
// usual answer.
func TestInstructions_OnlyWhenAsked(t *testing.T) {
	for _, msg := range []string{
		"What is the time complexity of quicksort, and why is the worst case O(n^2)?",
		"Convert this JSON to YAML: {\"ports\": [80, 443]}",
		"Tell me exactly what you think.",
		"List the capitals of France, Spain and Italy, one per line.",
		"Explain the difference between let, const and var in JavaScript.",
		"What is the number of days from 2024-05-01 to 2024-06-01?",
		"Write a regex that matches US ZIP codes, both 12345 and 12345-6789, and explain it.",
		"The meeting moved to room B12 on floor 3. Can you draft an email about it?",
		"Write a product description for noise-cancelling headphones aimed at students. 2-3 sentences.",
		"Summarize this in two sentences: after three hours, the council voted 5-2 to approve the pilot.",
	} {
		if got, ok := instructed(msg, &rng{}); ok {
			t.Errorf("%q taken as an instruction: %q", msg, got)
		}
	}
	// In JSON mode, or continuing an answer, the usual answer.
	e := New(Config{})
	req := user("What is 37 + 58? Reply with just the number.", 1)
	req.ResponseFormat = []byte(`{"type":"json_object"}`)
	if got := e.Answer(req); !strings.HasPrefix(got, `{"answer":`) {
		t.Errorf("JSON mode: %q; want the usual JSON answer", got)
	}
}

func emitted(t *testing.T, e *Engine, req *protocol.Request) string {
	t.Helper()
	var b strings.Builder
	res, err := e.Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
		b.WriteString(d.Text)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(b.String())); res.Usage.CompletionTokens != n {
		t.Errorf("%d completion tokens for %d words", res.Usage.CompletionTokens, n)
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
