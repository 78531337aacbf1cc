package sim

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

const model = "sim/llama-3.1-8b"

// chat returns a chat request of messages (JSON) with the given seed.
func chat(messages string, seed int64) *protocol.Request {
	return &protocol.Request{Kind: protocol.KindChat, Model: model, Messages: json.RawMessage(messages), Seed: &seed}
}

// user returns a chat request of one user message.
func user(text string, seed int64) *protocol.Request {
	b, _ := json.Marshal(text)
	return chat(`[{"role":"system","content":"Be brief."},{"role":"user","content":`+string(b)+`}]`, seed)
}

// withPrefix returns req with an assistant message of text p appended.
func withPrefix(t testing.TB, req *protocol.Request, p string) *protocol.Request {
	t.Helper()
	var msgs []any
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": p})
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	r := *req
	r.Messages = b
	return &r
}

// stream runs req on e and returns its text deltas.
func stream(t testing.TB, e *Engine, req *protocol.Request) ([]string, engine.Result) {
	t.Helper()
	var deltas []string
	res, err := e.Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
		deltas = append(deltas, d.Text)
		return nil
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return deltas, res
}

func TestEngine_NameAndModels(t *testing.T) {
	if got := New(Config{}).Name(); got != "sim" {
		t.Errorf("Name() = %q, want %q", got, "sim")
	}
	custom := []engine.Model{{Name: "sim/tiny", ContextLength: 512}}
	continuing := func(ms []engine.Model) []engine.Model {
		ms = slices.Clone(ms)
		for i := range ms {
			ms[i].Continues = true // every simulated model continues a partial answer
		}
		return ms
	}
	tests := []struct {
		name string
		cfg  Config
		want []engine.Model
	}{
		{"default", Config{}, continuing(DefaultModels)},
		{"configured", Config{Models: custom}, continuing(custom)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New(tt.cfg).Models(context.Background())
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Models() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestAnswer_Deterministic(t *testing.T) {
	temp, topP := 1.7, 0.3
	hot := user("Tell me about Zürich.", 7)
	hot.Temperature, hot.TopP = &temp, &topP
	noSeed := user("Tell me about Zürich.", 0)
	noSeed.Seed = nil
	tests := []struct {
		name   string
		req    *protocol.Request
		sameAs *protocol.Request // a request that must have the same answer, if any
	}{
		{"chat", user("Tell me about Zürich.", 7), hot},
		{"nil seed is seed 0", noSeed, user("Tell me about Zürich.", 0)},
		{"completion", &protocol.Request{Kind: protocol.KindCompletion, Model: model, Prompt: "Once upon"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := New(Config{Salt: "s"}), New(Config{Salt: "s"})
			got, want := a.Answer(tt.req), b.Answer(tt.req)
			if got == "" || got != want {
				t.Errorf("two engines answer\n%q\n%q", got, want)
			}
			if tt.sameAs != nil {
				if other := b.Answer(tt.sameAs); other != got {
					t.Errorf("equal requests answer\n%q\n%q", got, other)
				}
			}
		})
	}
}

func TestAnswer_Differs(t *testing.T) {
	base := user("Hello", 1)
	e := New(Config{})
	want := e.Answer(base)
	otherModel := user("Hello", 1)
	otherModel.Model = "sim/qwen-2.5-7b"
	tests := []struct {
		name string
		e    *Engine
		req  *protocol.Request
	}{
		{"seed", e, user("Hello", 2)},
		{"model", e, otherModel},
		{"salt", New(Config{Salt: "cheat"}), base},
		{"message", e, user("Hello!", 1)},
		{"role", e, chat(`[{"role":"system","content":"Be brief."},{"role":"developer","content":"Hello"}]`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Answer(tt.req); got == want {
				t.Errorf("answer = %q, want a different answer", got)
			}
		})
	}
}

func TestAnswer_Readable(t *testing.T) {
	e := New(Config{})
	lengths := map[int]bool{}
	multibyte := 0
	for seed := range int64(200) {
		req := user("Write something.", seed)
		deltas, _ := stream(t, e, req)
		got := strings.Join(deltas, "")
		if !utf8.ValidString(got) {
			t.Fatalf("seed %d: answer is not valid UTF-8: %q", seed, got)
		}
		if first, _ := utf8.DecodeRuneInString(got); !unicode.IsUpper(first) && first < utf8.RuneSelf {
			t.Errorf("seed %d: answer starts with %q, want a capital letter", seed, first)
		}
		if !strings.HasSuffix(got, ".") {
			t.Errorf("seed %d: answer %q does not end with a full stop", seed, got)
		}
		if n := len(deltas); n < minWords || n > maxWords {
			t.Errorf("seed %d: %d tokens, want %d to %d", seed, n, minWords, maxWords)
		}
		for i, d := range deltas {
			w := strings.TrimPrefix(d, " ")
			if (i == 0) != (w == d) || w == "" || strings.ContainsAny(w, " \n\t") {
				t.Fatalf("seed %d: token %d = %q, want one word with a leading space after the first", seed, i, d)
			}
		}
		lengths[len(deltas)] = true
		if len(got) != utf8.RuneCountInString(got) {
			multibyte++
		}
	}
	if len(lengths) < 50 {
		t.Errorf("200 answers have %d different lengths, want at least 50", len(lengths))
	}
	if multibyte < 150 {
		t.Errorf("%d of 200 answers have multibyte characters, want at least 150", multibyte)
	}
}

func TestRun_StreamIsAnswer(t *testing.T) {
	e := New(Config{})
	for _, req := range []*protocol.Request{
		user("a", 1), user("b", 2),
		{Kind: protocol.KindCompletion, Model: model, Prompt: "Once upon a time"},
	} {
		deltas, res := stream(t, e, req)
		if got, want := strings.Join(deltas, ""), e.Answer(req); got != want {
			t.Errorf("stream\n%q\nwant the answer\n%q", got, want)
		}
		if res.FinishReason != "stop" || res.Usage.CompletionTokens != len(deltas) || res.Estimated {
			t.Errorf("result = %+v, want finish stop, %d completion tokens, not estimated", res, len(deltas))
		}
	}
}

func TestAnswer_Canonical(t *testing.T) {
	e := New(Config{})
	want := e.Answer(chat(`[{"role":"user","content":"Describe this."}]`, 3))
	tests := []struct {
		name     string
		messages string
	}{
		{"content parts", `[{"role":"user","content":[{"type":"text","text":"Describe this."}]}]`},
		{"whitespace", "[\n  {\n    \"content\" : \"Describe this.\",\n    \"role\": \"user\"\n  }\n]"},
		{"escapes", `[{"role":"user","content":"Describe \u0074his."}]`},
		{"extra fields", `[{"role":"user","content":"Describe this.","name":"bob"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Answer(chat(tt.messages, 3)); got != want {
				t.Errorf("answer\n%q\nwant\n%q", got, want)
			}
		})
	}
	image := chat(`[{"role":"user","content":[{"type":"text","text":"Describe this."},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]`, 3)
	if got := e.Answer(image); got == want {
		t.Errorf("an image does not change the answer")
	}
}

func TestRun_PromptTokens(t *testing.T) {
	tests := []struct {
		name string
		req  *protocol.Request
		want int
	}{
		{"one message", chat(`[{"role":"user","content":"one two  three"}]`, 0), 4 + 3},
		{"null content and tool call", chat(`[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"search","arguments":"{\"q\": \"x y\"}"}}]},{"role":"tool","tool_call_id":"c","content":"found"}]`, 0), 5 + 4 + (4 + 1 + 3) + 5},
		{"image", chat(`[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"data:x"}}]}]`, 0), 4 + 3 + 85},
		{"continued prefix", chat(`[{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon a"}]`, 0), 5 + 4 + 3},
		{"completion", &protocol.Request{Kind: protocol.KindCompletion, Model: model, Prompt: "a b c d"}, 4},
		{"empty completion", &protocol.Request{Kind: protocol.KindCompletion, Model: model}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, res := stream(t, New(Config{}), tt.req)
			if got := res.Usage.PromptTokens; got != tt.want {
				t.Errorf("prompt tokens = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRun_RequestErrors(t *testing.T) {
	unknown := user("hi", 0)
	unknown.Model = "gpt-5"
	long := &protocol.Request{Kind: protocol.KindCompletion, Model: "sim/tiny", Prompt: strings.Repeat("word ", 20)}
	tests := []struct {
		name   string
		req    *protocol.Request
		status int
	}{
		{"bad messages", chat(`{"role":"user"}`, 0), 400},
		{"bad kind", &protocol.Request{Kind: "embedding", Model: model}, 400},
		{"bad tools", &protocol.Request{Kind: protocol.KindChat, Model: model, Messages: json.RawMessage(`[]`), Tools: json.RawMessage(`{}`)}, 400},
		{"unknown model", unknown, 404},
		{"prompt too long", long, 400},
	}
	e := New(Config{Models: append(slices.Clone(DefaultModels), engine.Model{Name: "sim/tiny", ContextLength: 10})})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Run(context.Background(), tt.req, engine.Emit(func(protocol.Delta) error {
				t.Error("emit called for a refused request")
				return nil
			}))
			var re *engine.RequestError
			if !errors.As(err, &re) || re.Status != tt.status {
				t.Errorf("Run error = %v, want a RequestError with status %d", err, tt.status)
			}
		})
	}
}

func TestRun_EmitError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := New(Config{}).Run(context.Background(), user("hi", 0), engine.Emit(func(protocol.Delta) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	}))
	if !errors.Is(err, boom) || calls != 3 {
		t.Errorf("Run = %v after %d emits, want %v after 3", err, calls, boom)
	}
}

func BenchmarkRun(b *testing.B) {
	e := New(Config{})
	var req *protocol.Request
	for seed := int64(0); req == nil; seed++ { // an answer of 100 tokens
		r := user("Explain mixture-of-experts routing in two paragraphs.", seed)
		if n, _ := stream(b, e, r); len(n) == 100 {
			req = r
		}
	}
	ctx := context.Background()
	emit := func(protocol.Delta) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Run(ctx, req, engine.Emit(emit)); err != nil {
			b.Fatal(err)
		}
	}
}
