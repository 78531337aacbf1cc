package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// chunk is a chat.completion.chunk as the coordinator writes it (internal/relay).
func chunk(delta string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{` + delta + `},"logprobs":null,"finish_reason":null}]}` + "\n\n"
}

const (
	roleChunk  = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	stopChunk  = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n"
	usageChunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"cost":0.000001}}` + "\n\n"
	done       = "data: [DONE]\n\n"
	// failed is how the coordinator ends a stream it cannot finish.
	failed = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"error"}]}` + "\n\n" +
		`data: {"error":{"message":"The answer was cut short: node gone","type":"server_error","param":null,"code":"provider_error"}}` + "\n\n"
)

func TestBench_ReadStream(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the reader's buffer
	tests := []struct {
		name       string
		body       string
		chunks     int
		out, in    int
		usage      bool
		code       string
		firstCalls int
	}{
		{"coordinator", roleChunk + chunk(`"content":" Once"`) + chunk(`"content":" upon"`) + chunk(`"content":" a"`) + stopChunk + usageChunk + done,
			3, 3, 7, true, "", 1},
		{"no usage: chunks counted", roleChunk + chunk(`"content":" a"`) + chunk(`"content":" b"`) + stopChunk + done,
			2, 2, 0, false, "", 1},
		{"spaces, CRLF, comments, no space after data:", ": keep-alive\r\n\r\ndata:{\"choices\": [{\"delta\": {\"content\": \"hi\"}}]}\r\n\r\n" + "event: x\nid: 3\n" + chunk(`"content": "there"`) + done,
			2, 2, 0, false, "", 1},
		{"reasoning and tool calls count", chunk(`"reasoning_content":"hmm"`) + chunk(`"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]`) + done,
			2, 2, 0, false, "", 1},
		{"escaped keys in content are content", chunk(`"content":"say \"content\":\"\" now"`) + done,
			1, 1, 0, false, "", 1},
		{"a line longer than the buffer", chunk(`"content":"`+long+`"`) + done,
			1, 1, 0, false, "", 1},
		{"multi-line data", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"a\"}}]}\n\n" + done,
			1, 1, 0, false, "", 1},
		{"legacy completion", `data: {"id":"cmpl-1","object":"text_completion","choices":[{"text":" Once","index":0,"logprobs":null,"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"cmpl-1","object":"text_completion","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}]}` + "\n\n" + done,
			1, 1, 0, false, "", 1},
		{"[DONE] without a blank line at the end", chunk(`"content":"a"`) + "data: [DONE]",
			1, 1, 0, false, "", 1},
		{"cut short by the coordinator", roleChunk + chunk(`"content":" a"`) + failed, 0, 0, 0, false, "provider_error", 1},
		{"ends without [DONE]", roleChunk + chunk(`"content":" a"`), 0, 0, 0, false, CodeIncompleteStream, 1},
		{"empty", "", 0, 0, 0, false, CodeIncompleteStream, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSender(nil, "", "", nil, true, 0)
			calls := 0
			s.first = func(ttft time.Duration) { calls++ }
			r, err := s.readStream(strings.NewReader(tt.body), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tt.code != "" {
				if r.err == nil || r.err.Code != tt.code || r.err.Status != http.StatusOK || r.err.Message == "" {
					t.Errorf("error %+v; want 200 %s with a message", r.err, tt.code)
				}
			} else if r.err != nil {
				t.Fatalf("error %+v", r.err)
			} else if r.chunks != tt.chunks || r.completionTokens != tt.out || r.promptTokens != tt.in || r.usage != tt.usage {
				t.Errorf("chunks %d, out %d, in %d, usage %v; want %d, %d, %d, %v", r.chunks, r.completionTokens, r.promptTokens, r.usage, tt.chunks, tt.out, tt.in, tt.usage)
			}
			if calls != tt.firstCalls {
				t.Errorf("first token reported %d times, want %d", calls, tt.firstCalls)
			}
		})
	}
}

// slowBody gives its parts one at a time, a pause before each.
type slowBody struct {
	parts []string
	pause time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.pause)
	n := copy(p, b.parts[0])
	b.parts = b.parts[1:]
	return n, nil
}

func TestBench_ReadStreamTimes(t *testing.T) {
	body := &slowBody{pause: 20 * time.Millisecond, parts: []string{roleChunk, chunk(`"content":"a"`), chunk(`"content":"b"`), chunk(`"content":"c"`), stopChunk + usageChunk + done}}
	s := newSender(nil, "", "", nil, true, 0)
	r, err := s.readStream(body, time.Now())
	if err != nil || r.err != nil {
		t.Fatal(err, r.err)
	}
	// The first chunk with content comes with the second read, not the role chunk's.
	if r.ttft < 40*time.Millisecond || r.lastToken < r.ttft+40*time.Millisecond {
		t.Errorf("ttft %v, last token %v; want at least 40ms, and 40ms more", r.ttft, r.lastToken)
	}
}

func TestBench_HTTPError(t *testing.T) {
	tests := []struct {
		status        int
		body          string
		code, message string
	}{
		{404, `{"error":{"message":"The model 'x' does not exist.","type":"not_found_error","param":"model","code":"model_not_found"}}`, "model_not_found", "The model 'x' does not exist."},
		{401, `{"error":{"message":"Missing key.","type":"authentication_error","param":null,"code":null}}`, "", "Missing key."},
		{429, `{"error":{"message":"slow down","type":"rate_limit","code":429}}`, "429", "slow down"},
		{502, "<html>Bad Gateway</html>\n", "", "<html>Bad Gateway</html>"},
		{500, "", "", "Internal Server Error"},
	}
	for _, tt := range tests {
		g := httpError(tt.status, []byte(tt.body))
		if g.Status != tt.status || g.Code != tt.code || g.Message != tt.message {
			t.Errorf("httpError(%d, %q) = %+v; want code %q, message %q", tt.status, tt.body, g, tt.code, tt.message)
		}
	}
}

func TestBench_Failure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if r := failure(ctx, errors.New("connection refused")); r.err == nil || r.err.Code != CodeNetwork {
		t.Errorf("network: %+v", r)
	}
	if r := failure(ctx, context.DeadlineExceeded); r.err == nil || r.err.Code != CodeTimeout {
		t.Errorf("timeout: %+v", r)
	}
	cancel()
	if r := failure(ctx, context.Canceled); !r.cancelled || r.err != nil {
		t.Errorf("interrupted: %+v; want cancelled, not an error", r)
	}
}

// FuzzBench_ReadStream feeds the stream reader arbitrary bodies: it must not panic, and must
// either finish the stream, fail it, or count what it read consistently.
func FuzzBench_ReadStream(f *testing.F) {
	f.Add(roleChunk + chunk(`"content":" Once"`) + stopChunk + usageChunk + done)
	f.Add(roleChunk + failed)
	f.Add("data: {\"usage\":{\"prompt_tokens\":\"x\"}}\n\ndata: [DONE]")
	f.Add("data:\n\ndata: {\"error\":{}}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		s := newSender(nil, "", "", nil, true, 0)
		firsts := 0
		s.first = func(time.Duration) { firsts++ }
		r, err := s.readStream(strings.NewReader(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if firsts > 1 || r.err == nil && (r.chunks < 0 || r.lastToken < r.ttft || !r.usage && r.completionTokens != r.chunks) {
			t.Errorf("inconsistent result %+v after %d first tokens", r, firsts)
		}
	})
}
