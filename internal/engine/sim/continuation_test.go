package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/protocol"
)

// checkContinuation runs req continued from answer[:n] and checks that it emits the rest.
func checkContinuation(t testing.TB, e *Engine, req *protocol.Request, answer string, n int) {
	t.Helper()
	p := answer[:n]
	deltas, res := stream(t, e, withPrefix(t, req, p))
	if got := p + strings.Join(deltas, ""); got != answer {
		t.Fatalf("prefix %d bytes %q: prefix + stream =\n%q\nwant\n%q", n, p, got, answer)
	}
	for _, d := range deltas {
		if !utf8.ValidString(d) {
			t.Fatalf("prefix %d bytes: delta %q splits a character", n, d)
		}
	}
	if res.Usage.CompletionTokens != len(deltas) || res.FinishReason != "stop" {
		t.Fatalf("prefix %d bytes: result %+v, want %d completion tokens and finish stop", n, res, len(deltas))
	}
}

func TestRun_ContinuationFromEveryPrefix(t *testing.T) {
	e := New(Config{})
	tests := []struct {
		name string
		req  *protocol.Request
	}{
		{"text", user("Continue me.", 11)},
		{"json", func() *protocol.Request {
			r := user("Continue me as JSON.", 12)
			r.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := e.Answer(tt.req)
			full, _ := stream(t, e, tt.req)
			tested, skipped := 0, 0
			for n := 0; n <= len(answer); n++ {
				if !utf8.ValidString(answer[:n]) {
					skipped++ // the prefix would end inside a character
					continue
				}
				checkContinuation(t, e, tt.req, answer, n)
				tested++
			}
			if skipped == 0 {
				t.Errorf("the answer has no multibyte character: %q", answer)
			}
			if want := utf8.RuneCountInString(answer) + 1; tested != want {
				t.Errorf("tested %d prefixes, want %d", tested, want)
			}
			// A prefix that ends on a token boundary continues with whole tokens.
			p := strings.Join(full[:5], "")
			deltas, res := stream(t, e, withPrefix(t, tt.req, p))
			if !slices.Equal(deltas, full[5:]) || res.Usage.CompletionTokens != len(full)-5 {
				t.Errorf("continued after 5 tokens: %d deltas %q, want %q", len(deltas), deltas, full[5:])
			}
		})
	}
}

func TestRun_ContinuationOfOtherText(t *testing.T) {
	e := New(Config{})
	req := user("Continue me.", 11)
	tests := []struct {
		name, prefix, lead string
	}{
		{"word", "Something else entirely", " "},
		{"space", "Something else ", ""},
		{"multibyte", "Über 東京", " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cont := withPrefix(t, req, tt.prefix)
			deltas, res := stream(t, e, cont)
			again, _ := stream(t, New(Config{}), cont)
			got := strings.Join(deltas, "")
			if got != strings.Join(again, "") {
				t.Errorf("continuations differ:\n%q\n%q", got, strings.Join(again, ""))
			}
			if want := e.Answer(cont); tt.prefix+got != want {
				t.Errorf("prefix + stream = %q, want the answer %q", tt.prefix+got, want)
			}
			if !strings.HasPrefix(got, tt.lead) || strings.HasPrefix(got, tt.lead+" ") || len(deltas) < minWords {
				t.Errorf("continuation = %q, want %d+ words starting with %q", got, minWords, tt.lead)
			}
			if res.Usage.CompletionTokens != len(deltas) {
				t.Errorf("completion tokens = %d, want %d", res.Usage.CompletionTokens, len(deltas))
			}
		})
	}
}

func FuzzContinuation(f *testing.F) {
	for _, n := range []uint{0, 1, 7, 100, 333} {
		f.Add(int64(n), n)
	}
	e := New(Config{})
	f.Fuzz(func(t *testing.T, seed int64, n uint) {
		req := user("Fuzz me.", seed)
		answer := e.Answer(req)
		n %= uint(len(answer) + 1)
		for !utf8.ValidString(answer[:n]) {
			n-- // back to a character boundary
		}
		checkContinuation(t, e, req, answer, int(n))
	})
}
