package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

var (
	helloChat = &protocol.Request{Kind: protocol.KindChat, Model: "llama3.2",
		Messages: json.RawMessage(`[{"role":"user","content":"Hello, who are you?"}]`)}
	onceCompletion = &protocol.Request{Kind: protocol.KindCompletion, Model: "llama3.2", Prompt: "Once upon a time"}
)

// collect runs req and gathers what was emitted.
func collect(e *Engine, ctx context.Context, req *protocol.Request) (deltas []protocol.Delta, res engine.Result, err error) {
	res, err = e.Run(ctx, req, engine.Emit(func(d protocol.Delta) error {
		deltas = append(deltas, d)
		return nil
	}))
	return deltas, res, err
}

func join(deltas []protocol.Delta) string {
	var b strings.Builder
	for _, d := range deltas {
		b.WriteString(d.Text)
	}
	return b.String()
}

// answerRoutes serves a for both /api/chat and /api/generate.
func answerRoutes(a http.Handler) map[string]http.Handler {
	return map[string]http.Handler{"POST /api/chat": a, "POST /api/generate": a}
}

func TestRun_stream(t *testing.T) {
	tests := []struct {
		name       string
		req        *protocol.Request
		file       string
		wantDeltas []protocol.Delta
		wantRes    engine.Result
		wantErr    string // the error contains it and wraps engine.ErrIncomplete
	}{{
		name: "documented chat stream", req: helloChat,
		file:       "recorded/ollama_api_chat_stream_doc.ndjson",
		wantDeltas: []protocol.Delta{{Text: "The"}},
		// The durations, in nanoseconds, are not usage.
		wantRes: engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 26, CompletionTokens: 282}},
	}, {
		name: "documented chat stream with tools", req: helloChat,
		file: "recorded/ollama_api_chat_stream_tools_doc.ndjson",
		wantDeltas: []protocol.Delta{{ToolCalls: json.RawMessage(
			`[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]`)}},
		// done_reason is "stop"; OpenAI's is "tool_calls".
		wantRes: engine.Result{FinishReason: "tool_calls", Usage: protocol.Usage{PromptTokens: 169, CompletionTokens: 15}},
	}, {
		name: "two tool calls with ids and indexes", req: helloChat,
		file: "handmade/chat_stream_tools_ids.ndjson",
		wantDeltas: []protocol.Delta{
			{ToolCalls: json.RawMessage(`[{"index":0,"id":"call_k2v9r1xq","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}]`)},
			{ToolCalls: json.RawMessage(`[{"index":1,"id":"call_5hb0c7de","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"Europe/Paris\"}"}}]`)},
		},
		wantRes: engine.Result{FinishReason: "tool_calls", Usage: protocol.Usage{PromptTokens: 212, CompletionTokens: 41}},
	}, {
		name: "thinking, then text cut by length", req: helloChat,
		file: "handmade/chat_stream_thinking_length.ndjson",
		wantDeltas: []protocol.Delta{
			{Reasoning: "The user"}, {Reasoning: " says hi."}, {Text: "Hello"}, {Text: "! <b>é</b> \u2028"},
		},
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 11, CompletionTokens: 6}},
	}, {
		name: "counts left out are estimated", req: helloChat,
		file:       "handmade/chat_stream_no_counts.ndjson",
		wantDeltas: []protocol.Delta{{Text: "Hi"}, {Text: " there"}},
		// "Hello, who are you?" is 19 characters.
		wantRes: engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 4, CompletionTokens: 2}, Estimated: true},
	}, {
		name: "answer in one object", req: helloChat,
		file:       "recorded/ollama_api_chat_prefill_ignored_issue5775.json",
		wantDeltas: []protocol.Delta{{Text: "Hi! It's nice to meet you. Is there something I can help you with, or would you like to chat?"}},
		wantRes:    engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 11, CompletionTokens: 26}},
	}, {
		name: "documented generate stream", req: onceCompletion,
		file:       "recorded/ollama_api_generate_stream_doc.ndjson",
		wantDeltas: []protocol.Delta{{Text: "The"}},
		wantRes:    engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 26, CompletionTokens: 259}},
	}, {
		name: "error in the stream", req: helloChat,
		file:       "handmade/chat_stream_error.ndjson",
		wantDeltas: []protocol.Delta{{Text: "Once"}},
		wantErr:    "error in stream after 1 pieces: an error was encountered while running the model: unexpected EOF",
	}, {
		name: "malformed line", req: helloChat,
		file:       "handmade/chat_stream_malformed.ndjson",
		wantDeltas: []protocol.Delta{{Text: "Once"}},
		wantErr:    "after 1 pieces: bad object in stream: invalid character",
	}, {
		name: "stream without its done object", req: helloChat,
		file:       "handmade/chat_stream_cut.ndjson",
		wantDeltas: []protocol.Delta{{Text: "Once"}, {Text: " upon"}},
		wantErr:    "after 2 pieces: stream ended before its done object",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := serve(t, Config{}, answerRoutes(file(t, tt.file)))
			deltas, res, err := collect(e, context.Background(), tt.req)
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %s, want %s", show(deltas), show(tt.wantDeltas))
			}
			if tt.wantErr != "" {
				if !errors.Is(err, engine.ErrIncomplete) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want engine.ErrIncomplete with %q", err, tt.wantErr)
				}
				if _, ok := errors.AsType[*engine.RequestError](err); ok {
					t.Errorf("error %v is a *engine.RequestError, want a failure of the node", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res != tt.wantRes {
				t.Errorf("result = %+v, want %+v", res, tt.wantRes)
			}
		})
	}
}

// show prints deltas with their raw tool calls as text.
func show(deltas []protocol.Delta) string {
	b, _ := json.Marshal(deltas)
	return string(b)
}

func TestRun_errorStatus(t *testing.T) {
	tests := []struct {
		name    string
		a       answer
		wantReq *engine.RequestError // nil: a plain error
		wantErr []string             // a plain error contains all of them
	}{
		{"model not found", jsonAnswer(404, `{"error":"model 'x' not found"}`),
			&engine.RequestError{Status: 404, Message: "model 'x' not found"}, nil},
		{"model without tools", jsonAnswer(400, `{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}`),
			&engine.RequestError{Status: 400, Message: "registry.ollama.ai/library/gemma:2b does not support tools"}, nil},
		{"runner crashed", jsonAnswer(500, `{"error":"llama runner process has terminated: exit status 2"}`),
			nil, []string{"/api/chat", "500", "llama runner process has terminated: exit status 2"}},
		{"proxy refuses", answer{401, "text/plain", []byte("Unauthorized\n")},
			nil, []string{"401", "Unauthorized"}},
		{"empty 503", answer{503, "text/plain", nil},
			nil, []string{"503", "Service Unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := serve(t, Config{}, answerRoutes(tt.a))
			deltas, _, err := collect(e, context.Background(), helloChat)
			if len(deltas) != 0 {
				t.Errorf("emitted %s, want nothing", show(deltas))
			}
			re, isReq := errors.AsType[*engine.RequestError](err)
			if tt.wantReq != nil {
				if !isReq || *re != *tt.wantReq {
					t.Fatalf("error = %#v, want %#v", err, tt.wantReq)
				}
				return
			}
			if err == nil || isReq {
				t.Fatalf("error = %#v, want a plain error", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestRun_connectionRefused(t *testing.T) {
	e, _ := serve(t, Config{}, nil)
	e.base = closedURL(t)
	_, _, err := collect(e, context.Background(), helloChat)
	if err == nil || !strings.Contains(err.Error(), "ollama engine: /api/chat:") {
		t.Fatalf("error = %v, want one naming /api/chat", err)
	}
	if _, ok := errors.AsType[*engine.RequestError](err); ok || errors.Is(err, engine.ErrIncomplete) {
		t.Errorf("error %v is a request error or an incomplete answer, want a plain error", err)
	}
}

func TestRun_requestBody(t *testing.T) {
	messages := `[{"role":"developer","content":"Be <brief> & kind"},
	{"role":"user","content":[{"type":"text","text":"What is in this image?"},
	  {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
	  {"type":"text","text":"And this one?"},{"type":"image_url","image_url":"data:image/jpeg;base64,/9j/4AAQ"}]},
	{"role":"assistant","content":null,"reasoning_content":"Look it up.",
	  "tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
	{"role":"tool","tool_call_id":"call_a","content":"{\"temp\": 21}"},
	{"role":"user","content":"\u00e9t\u00e9 ✓"}]`
	wantMessages := `[{"role":"system","content":"Be <brief> & kind"},
	{"role":"user","content":"What is in this image?\nAnd this one?","images":["iVBORw0KGgo=","/9j/4AAQ"]},
	{"role":"assistant","content":"","thinking":"Look it up.",
	  "tool_calls":[{"id":"call_a","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
	{"role":"tool","content":"{\"temp\": 21}","tool_name":"get_weather","tool_call_id":"call_a"},
	{"role":"user","content":"été ✓"}]`
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	schema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	temp, topP, seed, freq, pres := 0.0, 1.0, int64(-3), 0.5, -1.25
	tests := []struct {
		name     string
		cfg      Config
		req      *protocol.Request
		wantPath string
		want     string // the body, as JSON
	}{{
		name: "chat with every field",
		cfg:  Config{NumCtx: 8192},
		req: &protocol.Request{Kind: protocol.KindChat, Model: "llama3.2", Messages: json.RawMessage(messages),
			MaxTokens: 64, Temperature: &temp, TopP: &topP, Seed: &seed, Stop: []string{"\n\n", "END"},
			FrequencyPenalty: &freq, PresencePenalty: &pres,
			Tools: json.RawMessage(tools), ToolChoice: json.RawMessage(`"auto"`),
			ResponseFormat: json.RawMessage(`{"type": "json_object"}`)},
		wantPath: "/api/chat",
		want: `{"model":"llama3.2","messages":` + wantMessages + `,"tools":` + tools + `,"format":"json",
			"options":{"num_ctx":8192,"num_predict":64,"temperature":0,"top_p":1,"seed":-3,"stop":["\n\n","END"],"frequency_penalty":0.5,"presence_penalty":-1.25},
			"stream":true}`,
	}, {
		name: "chat with a schema and tool_choice none",
		req: &protocol.Request{Kind: protocol.KindChat, Model: "qwen3:8b", Messages: helloChat.Messages,
			Tools: json.RawMessage(tools), ToolChoice: json.RawMessage(`"none"`),
			ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"city","schema":` + schema + `}}`)},
		wantPath: "/api/chat",
		want:     `{"model":"qwen3:8b","messages":[{"role":"user","content":"Hello, who are you?"}],"format":` + schema + `,"stream":true}`,
	}, {
		name: "chat with a text format and null fields",
		req: &protocol.Request{Kind: protocol.KindChat, Model: "llama3.2", Messages: helloChat.Messages,
			Tools: json.RawMessage("null"), ResponseFormat: json.RawMessage(`{"type":"text"}`)},
		wantPath: "/api/chat",
		want:     `{"model":"llama3.2","messages":[{"role":"user","content":"Hello, who are you?"}],"stream":true}`,
	}, {
		name:     "completion is raw",
		req:      &protocol.Request{Kind: protocol.KindCompletion, Model: "llama3.2", Prompt: "Once upon a time", MaxTokens: 16, Seed: &seed},
		wantPath: "/api/generate",
		want:     `{"model":"llama3.2","prompt":"Once upon a time","raw":true,"options":{"num_predict":16,"seed":-3},"stream":true}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, f := serve(t, tt.cfg, answerRoutes(file(t, "recorded/ollama_api_chat_stream_doc.ndjson")))
			if _, _, err := collect(e, context.Background(), tt.req); err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := f.last(t, tt.wantPath)
			if got.method != http.MethodPost {
				t.Errorf("method = %s, want POST", got.method)
			}
			assertJSON(t, got.body, tt.want)
			if strings.Contains(string(got.body), `\u003c`) {
				t.Errorf("body %s escapes HTML", got.body)
			}
		})
	}
}

// assertJSON checks that body is the JSON want, whatever its spacing and key order.
func assertJSON(t *testing.T, body []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body =\n%s\nwant\n%s", body, want)
	}
}

// TestRun_continue replays the answer to the continuation recorded in Ollama's issue 5890 (a
// 0.2.8 release candidate): the partial answer "Thanks for asking! I am " is continued, and
// only the new text comes back.
func TestRun_continue(t *testing.T) {
	const partial = "Thanks for asking! I am " // 24 bytes: 6 tokens by the estimate
	t.Run("chat", func(t *testing.T) {
		e, f := serve(t, Config{}, answerRoutes(file(t, "recorded/ollama_api_chat_prefill_issue5890.json")))
		req := &protocol.Request{Kind: protocol.KindChat, Model: "llama3.1:8b-instruct-q8_0", MaxTokens: 100, Continue: true,
			Messages: json.RawMessage(`[{"role":"user","content":"Hi, how are you?"},{"role":"assistant","content":"` + partial + `"}]`)}
		deltas, res, err := collect(e, context.Background(), req)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := "doing well, thanks for checking in! How about you, is there anything I can help with or would you like to chat?"
		if got := join(deltas); got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
		if want := (engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 50, CompletionTokens: 27}}); res != want {
			t.Errorf("result = %+v, want %+v", res, want)
		}
		assertJSON(t, f.last(t, "/api/chat").body, `{"model":"llama3.1:8b-instruct-q8_0",
			"messages":[{"role":"user","content":"Hi, how are you?"},{"role":"assistant","content":"`+partial+`"}],
			"options":{"num_predict":94},"stream":true}`)
	})
	t.Run("completion", func(t *testing.T) {
		e, f := serve(t, Config{}, answerRoutes(file(t, "recorded/ollama_api_generate_stream_doc.ndjson")))
		req := &protocol.Request{Kind: protocol.KindCompletion, Model: "llama3.2", Prompt: "Q: How are you?\nA: ",
			Partial: partial, MaxTokens: 100, Continue: true}
		if _, _, err := collect(e, context.Background(), req); err != nil {
			t.Fatalf("Run: %v", err)
		}
		assertJSON(t, f.last(t, "/api/generate").body, `{"model":"llama3.2","prompt":"Q: How are you?\nA: `+partial+`",
			"raw":true,"options":{"num_predict":94},"stream":true}`)
	})
}

func TestRun_badRequest(t *testing.T) {
	nan := 0.0
	nan /= nan
	chat := func(messages string) *protocol.Request {
		return &protocol.Request{Kind: protocol.KindChat, Model: "m", Messages: json.RawMessage(messages)}
	}
	tests := []struct {
		name    string
		req     *protocol.Request
		wantReq bool // a *engine.RequestError, or a plain error
		wantErr string
	}{
		{"chat without messages", &protocol.Request{Kind: protocol.KindChat, Model: "m"}, true, "messages is required"},
		{"messages not an array", chat(`{"role":"user"}`), true, "messages: json: cannot unmarshal"},
		{"content a number", chat(`[{"role":"user","content":1}]`), true, "content must be a string, an array of parts or null"},
		{"arguments not an object", chat(`[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]`),
			true, `messages[0].tool_calls[0]: arguments "[1]" are not a JSON object`},
		{"image data not base64", chat(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml,<svg/>"}}]}]`),
			true, "a data: URL must hold base64 data"},
		{"temperature NaN", &protocol.Request{Kind: protocol.KindCompletion, Model: "m", Temperature: &nan}, true, "temperature is not a finite number"},
		{"response_format not an object", &protocol.Request{Kind: protocol.KindCompletion, Model: "m", ResponseFormat: json.RawMessage(`"json"`)},
			true, "response_format: json: cannot unmarshal"},
		{"image by address", chat(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]`),
			false, "messages[0]: content[0]: images must be data: URLs: Ollama does not fetch them"},
		{"audio", chat(`[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]}]`),
			false, `parts of type "input_audio" are not supported by Ollama`},
		{"unknown kind", &protocol.Request{Kind: "embedding", Model: "m"}, false, `unknown request kind "embedding"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, f := serve(t, Config{}, nil)
			_, _, err := collect(e, context.Background(), tt.req)
			if _, isReq := errors.AsType[*engine.RequestError](err); err == nil || isReq != tt.wantReq || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one with %q (request error %v)", err, tt.wantErr, tt.wantReq)
			}
			if len(f.got) != 0 {
				t.Errorf("Ollama got a request")
			}
		})
	}
}

// guard is a context for a run on a hanging server, which ends after a while so that a
// regression fails the test rather than hangs it.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitGone waits until the server has seen the request end, failing the test if it does not.
func waitGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the server never saw the request end: the engine left its connection open")
	}
}

// hanging serves the first lines of a stream, then waits until the client goes and closes
// gone.
func hanging(t *testing.T, lines int) (e *Engine, started, gone chan struct{}) {
	t.Helper()
	a := file(t, "handmade/chat_stream_thinking_length.ndjson")
	body := strings.SplitAfter(string(a.body), "\n")[:lines]
	started, gone = make(chan struct{}), make(chan struct{})
	e, _ = serve(t, Config{}, map[string]http.Handler{"POST /api/chat": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", a.contentType)
		for _, l := range body {
			io.WriteString(w, l)
		}
		w.(http.Flusher).Flush()
		close(started)
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(30 * time.Second): // so that a regression fails the test, not hangs it
		}
	})})
	return e, started, gone
}

func TestRun_cancel(t *testing.T) {
	t.Run("in emit", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		ctx, cancel := context.WithCancel(guard(t))
		defer cancel()
		n := 0
		_, err := e.Run(ctx, helloChat, engine.Emit(func(d protocol.Delta) error {
			if n++; n == 2 {
				cancel()
			}
			return nil
		}))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		if n != 2 {
			t.Errorf("emitted %d deltas, want 2: none after the cancel", n)
		}
		waitGone(t, gone)
	})
	t.Run("waiting for the next line", func(t *testing.T) {
		e, started, gone := hanging(t, 2)
		ctx, cancel := context.WithCancel(guard(t))
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		_, _, err := collect(e, ctx, helloChat)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		waitGone(t, gone)
	})
}

func TestRun_emitError(t *testing.T) {
	e, _, gone := hanging(t, 3)
	errStop := errors.New("buyer went away")
	var got []protocol.Delta
	_, err := e.Run(guard(t), helloChat, engine.Emit(func(d protocol.Delta) error {
		got = append(got, d)
		return errStop
	}))
	if err != errStop {
		t.Errorf("Run error = %v, want %v", err, errStop)
	}
	if want := []protocol.Delta{{Reasoning: "The user"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("emitted %+v, want %+v", got, want)
	}
	waitGone(t, gone)
}

// recorder is an engine.Output that logs its calls.
type recorder struct {
	calls []string
	flush func(r *recorder) error
}

func (r *recorder) Delta(d protocol.Delta) error {
	r.calls = append(r.calls, "delta "+d.Reasoning+d.Text)
	return nil
}

func (r *recorder) Flush() error {
	r.calls = append(r.calls, "flush")
	if r.flush != nil {
		return r.flush(r)
	}
	return nil
}

func TestRun_flush(t *testing.T) {
	t.Run("before waiting for Ollama", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		ctx, cancel := context.WithCancel(guard(t))
		defer cancel()
		out := &recorder{flush: func(r *recorder) error {
			if len(r.calls) >= 2 && r.calls[len(r.calls)-2] == "delta Hello" {
				cancel() // the engine is about to wait with the three pieces flushed
			}
			return nil
		}}
		_, err := e.Run(ctx, helloChat, out)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		// The three lines come in one read: one flush, after them.
		if want := []string{"delta The user", "delta  says hi.", "delta Hello", "flush"}; !reflect.DeepEqual(out.calls, want) {
			t.Errorf("calls = %q, want %q", out.calls, want)
		}
		waitGone(t, gone)
	})
	t.Run("error", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		errFlush := errors.New("coordinator gone")
		out := &recorder{flush: func(*recorder) error { return errFlush }}
		_, err := e.Run(guard(t), helloChat, out)
		if err != errFlush {
			t.Errorf("Run error = %v, want %v", err, errFlush)
		}
		waitGone(t, gone)
	})
	t.Run("whole answer in one read is no flush", func(t *testing.T) {
		e, _ := serve(t, Config{}, answerRoutes(file(t, "handmade/chat_stream_thinking_length.ndjson")))
		out := &recorder{}
		if _, err := e.Run(context.Background(), helloChat, out); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Run returns with the pieces held: they travel with the job's end.
		for _, c := range out.calls {
			if c == "flush" {
				t.Errorf("calls = %q, want no flush for an answer read whole", out.calls)
				break
			}
		}
	})
}

// endless is an object that never ends.
type endless struct{ started bool }

func (r *endless) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		return copy(p, `{"response":"`), nil
	}
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestObjects_tooLong(t *testing.T) {
	var c chunk
	err := newObjects(&endless{}, nil).next(&c)
	if !errors.Is(err, errObjectTooLong) {
		t.Errorf("next() error = %v, want %v", err, errObjectTooLong)
	}
}
