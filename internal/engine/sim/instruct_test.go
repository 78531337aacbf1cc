package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// The simulated model follows simple instructions, in one of a few wordings.
func TestInstructions(t *testing.T) {
	e := New(Config{})
	for _, tt := range []struct {
		ask  string
		want []string // one of the wordings
	}{
		{"Reply with this code exactly, and nothing else: K7Q2-93XF",
			[]string{"K7Q2-93XF", "`K7Q2-93XF`", "Here it is: K7Q2-93XF", "Sure: K7Q2-93XF"}},
		{"What is 37 + 58? Reply with just the number.", []string{"95", "95.", "The answer is 95.", "37 + 58 = 95."}},
		{"Compute 71 - 29. Answer with the result only.", []string{"42", "42.", "The answer is 42.", "71 - 29 = 42."}},
		{"What is 7 times 8? Give only the number.", []string{"56", "56.", "The answer is 56.", "7 times 8 = 56."}},
		{"Write these words in capital letters, one per line, and nothing else: apple, river, candle",
			[]string{"APPLE\nRIVER\nCANDLE", "- APPLE\n- RIVER\n- CANDLE", "1. APPLE\n2. RIVER\n3. CANDLE"}},
		{"Put each of these words on its own line in uppercase letters, with no other text: lemon, tiger",
			[]string{"LEMON\nTIGER", "- LEMON\n- TIGER", "1. LEMON\n2. TIGER"}},
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

// Only a user's last message of that shape is an instruction: anything else gets the usual
// answer.
func TestInstructions_OnlyWhenAsked(t *testing.T) {
	for _, msg := range []string{
		"What is the time complexity of quicksort, and why is the worst case O(n^2)?",
		"Convert this JSON to YAML: {\"ports\": [80, 443]}",
		"Tell me exactly what you think.",
		"Reply with this code exactly:\nK7Q2-93XF",
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
