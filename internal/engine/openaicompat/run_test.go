package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// The requests the recordings were made with.
var (
	helloChat = &protocol.Request{Kind: protocol.KindChat, Model: "tiny",
		Messages: json.RawMessage(`[{"role":"user","content":"Hello, who are you?"}]`)}
	onceCompletion = &protocol.Request{Kind: protocol.KindCompletion, Model: "tiny", Prompt: "Once upon a time"}
)

// The answers in the recordings.
const (
	llamaChatText  = "nsb thought been made number\f| more far_ show schoolol"
	llamaComplText = "hG why she\r here'Kf almost country below idle thought$ or"
)

// collect runs req and gathers what was emitted.
func collect(e *Engine, ctx context.Context, req *protocol.Request) (deltas []protocol.Delta, res engine.Result, err error) {
	res, err = e.Run(ctx, req, engine.Emit(func(d protocol.Delta) error {
		deltas = append(deltas, d)
		return nil
	}))
	return deltas, res, err
}

func join(deltas []protocol.Delta) (text, reasoning string) {
	var t, r strings.Builder
	for _, d := range deltas {
		t.WriteString(d.Text)
		r.WriteString(d.Reasoning)
	}
	return t.String(), r.String()
}

func TestRun_stream(t *testing.T) {
	tests := []struct {
		name          string
		req           *protocol.Request
		files         []string
		wantText      string
		wantReasoning string
		wantN         int // deltas emitted
		wantDeltas    []protocol.Delta
		wantRes       engine.Result
		wantErr       string // the error contains it and wraps engine.ErrIncomplete
	}{{
		name: "llama.cpp chat without usage is estimated", req: helloChat,
		files:    []string{"llamacpp-server/02_chat_stream.body"},
		wantText: llamaChatText, wantN: 16,
		// "Hello, who are you?" is 19 characters.
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 4, CompletionTokens: 16}, Estimated: true},
	}, {
		name: "llama.cpp chat include_usage", req: helloChat,
		files:    []string{"llamacpp-server/03_chat_stream_include_usage.body"},
		wantText: llamaChatText, wantN: 16,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 76, CompletionTokens: 16}},
	}, {
		name: "llama.cpp accepts an unknown model", req: &protocol.Request{Kind: protocol.KindChat, Model: "no-such-model", Messages: helloChat.Messages},
		files:    []string{"llamacpp-server/07b_error_unknown_model_stream.body"},
		wantText: llamaChatText, wantN: 16,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 4, CompletionTokens: 16}, Estimated: true},
	}, {
		name: "llama.cpp completions usage in last chunk", req: onceCompletion,
		files:    []string{"llamacpp-server/06_completions_stream.body"},
		wantText: llamaComplText, wantN: 16,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 23, CompletionTokens: 16}},
	}, {
		name: "llama.cpp completions include_usage", req: onceCompletion,
		files:    []string{"llamacpp-server/06b_completions_stream_include_usage.body"},
		wantText: llamaComplText, wantN: 16,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 23, CompletionTokens: 16}},
	}, {
		name: "llama.cpp chat error event without [DONE]", req: helloChat,
		files:   []string{"llamacpp-server/invalid-utf8-model/02_chat_stream.body"},
		wantErr: "(server_error 500): The model produced output that does not match the expected peg-native format",
	}, {
		name: "llama.cpp completions error event mid-stream", req: onceCompletion,
		files:    []string{"llamacpp-server/invalid-utf8-model/06_completions_stream.body"},
		wantText: "hG why she\r here'", wantN: 7,
		wantErr: "does not match the expected Content-only format",
	}, {
		name: "llama.cpp stream cut by the client", req: helloChat,
		files:    []string{"llamacpp-server/12_chat_stream_client_cut_after_3_chunks.body"},
		wantText: "ns", wantN: 2,
		wantErr: "stream ended without [DONE]",
	}, {
		name: "ollama /v1 include_usage tail", req: helloChat,
		files:   []string{"recorded/ollama_v1_chat_stream_include_usage_tail.sse"},
		wantRes: engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 32, CompletionTokens: 4}},
	}, {
		name: "vllm 0.5 first chunks (excerpt)", req: helloChat,
		files:    []string{"recorded/vllm_chat_stream_v0.5_first_chunks.sse"},
		wantText: "我是阿里", wantN: 2,
		wantErr: "stream ended without [DONE]",
	}, {
		name: "vllm 0.5 first chunks and tail", req: helloChat,
		files:    []string{"recorded/vllm_chat_stream_v0.5_first_chunks.sse", "handmade/handmade_vllm_chat_stream_v0.5_tail.sse"},
		wantText: "我是阿里", wantN: 2,
		wantRes: engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 20, CompletionTokens: 4}},
	}, {
		name: "vllm continuous usage (excerpt)", req: helloChat,
		files:    []string{"recorded/vllm_omni_chat_stream_continuous_usage.sse"},
		wantText: "v", wantN: 1,
		wantErr: "stream ended without [DONE]",
	}, {
		name: "vllm continuous usage keeps the last", req: helloChat,
		files:    []string{"recorded/vllm_omni_chat_stream_continuous_usage.sse", "handmade/handmade_vllm_omni_chat_stream_continuous_usage_tail.sse"},
		wantText: "vec", wantN: 2,
		wantRes: engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 15, CompletionTokens: 3}},
	}, {
		name: "vllm completions (excerpt)", req: onceCompletion,
		files:    []string{"recorded/vllm_completions_stream_qwen3.sse"},
		wantText: " city in", wantN: 2,
		wantErr: "stream ended without [DONE]",
	}, {
		name: "vllm completions usage null then usage chunk", req: onceCompletion,
		files:    []string{"recorded/vllm_completions_stream_qwen3.sse", "handmade/handmade_vllm_completions_stream_qwen3_tail.sse"},
		wantText: " city in", wantN: 2,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 5, CompletionTokens: 2}},
	}, {
		name: "vllm reasoning and tool calls", req: helloChat,
		files: []string{"handmade/handmade_vllm_chat_stream_reasoning_tool_calls.sse"},
		wantDeltas: []protocol.Delta{
			{Reasoning: "The user wants"},
			{Reasoning: " the weather."},
			{ToolCalls: json.RawMessage(`[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"get_weather"}}]`)},
			{ToolCalls: json.RawMessage(`[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]`)},
		},
		wantRes: engine.Result{FinishReason: "tool_calls", Usage: protocol.Usage{PromptTokens: 31, CompletionTokens: 20}},
	}, {
		name: "sse framing: CRLF, comments, fields, split data", req: helloChat,
		files:      []string{"handmade/handmade_sse_crlf_comments_events.sse"},
		wantDeltas: []protocol.Delta{{Reasoning: "Hmm."}, {Text: "Hi \u2028there"}},
		wantRes:    engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 9, CompletionTokens: 2}},
	}, {
		name: "vllm error event before [DONE]", req: helloChat,
		files:    []string{"handmade/handmade_vllm_chat_stream_error_event.sse"},
		wantText: "Sure", wantN: 1,
		wantErr: "(BadRequestError 400): Error in tool parser",
	}, {
		name: "server ignoring stream answers JSON", req: helloChat,
		files:    []string{"llamacpp-server/01_chat_nonstream.body"},
		wantText: llamaChatText, wantN: 1,
		wantRes: engine.Result{FinishReason: "length", Usage: protocol.Usage{PromptTokens: 76, CompletionTokens: 16}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := replay(t, Config{}, recorded(t, 0, tt.files...))
			deltas, res, err := collect(e, context.Background(), tt.req)
			if tt.wantDeltas != nil {
				if !reflect.DeepEqual(deltas, tt.wantDeltas) {
					t.Errorf("deltas = %+v, want %+v", deltas, tt.wantDeltas)
				}
			} else {
				text, reasoning := join(deltas)
				if text != tt.wantText || reasoning != tt.wantReasoning || len(deltas) != tt.wantN {
					t.Errorf("got %d deltas, text %q, reasoning %q; want %d, %q, %q",
						len(deltas), text, reasoning, tt.wantN, tt.wantText, tt.wantReasoning)
				}
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

func TestRun_errorStatus(t *testing.T) {
	tests := []struct {
		name    string
		a       answer
		wantReq *engine.RequestError // nil: a plain error
		wantErr []string             // a plain error contains all of them
	}{
		{"llama.cpp max_tokens negative", recorded(t, 0, "llamacpp-server/09_error_max_tokens_negative.body"),
			&engine.RequestError{Status: 400, Message: "Field 'max_tokens': Value must be between -1 <= value <= 2147483647, but got -5"}, nil},
		{"llama.cpp missing messages", recorded(t, 0, "llamacpp-server/09d_error_missing_messages.body"),
			&engine.RequestError{Status: 400, Message: "'messages' is required"}, nil},
		{"llama.cpp malformed json is a 500", recorded(t, 0, "llamacpp-server/08_error_malformed_json.body"),
			nil, []string{"500", "[json.exception.parse_error.101] parse error at line 1"}},
		{"vllm old flat error", recorded(t, 400, "recorded/vllm_error_old_flat_pre_0.10.1.json"),
			&engine.RequestError{Status: 400, Message: "This model's maximum context length is 32768 tokens. However, you requested 39197 tokens in the messages, Please reduce the length of the messages. None"}, nil},
		{"vllm new nested error", recorded(t, 400, "recorded/vllm_error_new_nested_0.10.1plus.json"),
			&engine.RequestError{Status: 400, Message: "This model's maximum context length is 32768 tokens. However, you requested 39197 tokens in the messages, Please reduce the length of the messages. None"}, nil},
		{"vllm unknown model is the node's fault", recorded(t, 404, "handmade/handmade_vllm_error_unknown_model_404.json"),
			nil, []string{"404", "The model `no-such-model` does not exist."}},
		{"plain text 413", answer{413, "text/plain", []byte("request body too large\n")},
			&engine.RequestError{Status: 413, Message: "request body too large"}, nil},
		{"fastapi 422", answer{422, "application/json", []byte(`{"detail":[{"loc":["body","messages"],"msg":"Field required"}]}`)},
			&engine.RequestError{Status: 422, Message: `[{"loc":["body","messages"],"msg":"Field required"}]`}, nil},
		{"429", answer{429, "application/json", []byte(`{"error":{"message":"Too many requests","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)},
			nil, []string{"429", "Too many requests"}},
		{"401 string error", answer{401, "application/json", []byte(`{"error":"unauthorized"}`)},
			nil, []string{"401", "unauthorized"}},
		{"503 empty body", answer{503, "text/plain", nil},
			nil, []string{"503", "Service Unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := replay(t, Config{}, tt.a)
			deltas, _, err := collect(e, context.Background(), helloChat)
			if len(deltas) != 0 {
				t.Errorf("emitted %+v, want nothing", deltas)
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

func TestRun_requestBody(t *testing.T) {
	messages := `[ {"role":"system","content":"Be <brief> & kind"},
	{"role":"user","content":[{"type":"text","text":"What is in this image?"},
	  {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
	{"role":"assistant","content":"\u00e9t\u00e9 ✓"} ]`
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	temp, topP, seed, freq, pres := 0.0, 1.0, int64(-3), 0.5, -1.25
	tests := []struct {
		name     string
		req      *protocol.Request
		wantPath string
		want     map[string]string // every key of the body and its raw value
	}{{
		name:     "chat with only messages",
		req:      &protocol.Request{Kind: protocol.KindChat, Model: "llama", Messages: json.RawMessage(messages)},
		wantPath: "/v1/chat/completions",
		want: map[string]string{"model": `"llama"`, "messages": messages,
			"stream": "true", "stream_options": `{"include_usage":true}`},
	}, {
		name: "chat with every field and a mapped model",
		req: &protocol.Request{Kind: protocol.KindChat, Model: "tiny", Messages: json.RawMessage(messages),
			MaxTokens: 64, Temperature: &temp, TopP: &topP, Seed: &seed, Stop: []string{"\n\n", "END"},
			FrequencyPenalty: &freq, PresencePenalty: &pres,
			Tools: json.RawMessage(tools), ToolChoice: json.RawMessage(`"auto"`),
			ResponseFormat: json.RawMessage(`{"type": "json_object"}`)},
		wantPath: "/v1/chat/completions",
		want: map[string]string{"model": `"tiny-utf8.gguf"`, "messages": messages, "max_tokens": "64",
			"temperature": "0", "top_p": "1", "seed": "-3", "frequency_penalty": "0.5", "presence_penalty": "-1.25", "stop": `["\n\n","END"]`, "tools": tools,
			"tool_choice": `"auto"`, "response_format": `{"type": "json_object"}`,
			"stream": "true", "stream_options": `{"include_usage":true}`},
	}, {
		name:     "chat with null raw fields",
		req:      &protocol.Request{Kind: protocol.KindChat, Model: "m", Messages: json.RawMessage(`[]`), Tools: json.RawMessage("null")},
		wantPath: "/v1/chat/completions",
		want:     map[string]string{"model": `"m"`, "messages": `[]`, "stream": "true", "stream_options": `{"include_usage":true}`},
	}, {
		name:     "completion",
		req:      &protocol.Request{Kind: protocol.KindCompletion, Model: "tiny", Prompt: "Once \"upon\"\n\ta time\x01 <b>&</b>\u2028é\xff", MaxTokens: 16},
		wantPath: "/v1/completions",
		want: map[string]string{"model": `"tiny-utf8.gguf"`, "prompt": `"Once \"upon\"\n\ta time\u0001 <b>&</b>\u2028é\ufffd"`,
			"max_tokens": "16", "stream": "true", "stream_options": `{"include_usage":true}`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{APIKey: "sk-test", Upstream: map[string]string{"tiny": "tiny-utf8.gguf"}}
			e, s := replay(t, cfg, recorded(t, 0, "recorded/ollama_v1_chat_stream_include_usage_tail.sse"))
			if _, _, err := collect(e, context.Background(), tt.req); err != nil {
				t.Fatalf("Run: %v", err)
			}
			method, path, header, body := s.get()
			if method != http.MethodPost || path != tt.wantPath {
				t.Errorf("request = %s %s, want POST %s", method, path, tt.wantPath)
			}
			for k, want := range map[string]string{"Authorization": "Bearer sk-test",
				"Content-Type": "application/json", "Accept": "text/event-stream"} {
				if got := header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if m := tt.req.Messages; m != nil && !strings.Contains(string(body), `"messages":`+string(m)+`,`) {
				t.Errorf("body %s does not hold the messages byte for byte", body)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			gotS := make(map[string]string, len(got))
			for k, v := range got {
				gotS[k] = string(v)
			}
			if !reflect.DeepEqual(gotS, tt.want) {
				t.Errorf("body = %s\nwant fields %q", body, tt.want)
			}
		})
	}
}

func TestRun_badRequest(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		name    string
		req     *protocol.Request
		wantReq bool
		wantErr string
	}{
		{"chat without messages", &protocol.Request{Kind: protocol.KindChat, Model: "m"}, true, "messages is required"},
		{"temperature NaN", &protocol.Request{Kind: protocol.KindCompletion, Model: "m", Temperature: &nan}, true, "temperature is not a finite number"},
		{"unknown kind", &protocol.Request{Kind: "embedding", Model: "m"}, false, `unknown request kind "embedding"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, s := replay(t, Config{}, answer{status: 200})
			_, _, err := collect(e, context.Background(), tt.req)
			if _, isReq := errors.AsType[*engine.RequestError](err); err == nil || isReq != tt.wantReq || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one with %q (request error %v)", err, tt.wantErr, tt.wantReq)
			}
			if method, _, _, _ := s.get(); method != "" {
				t.Errorf("the server got a request")
			}
		})
	}
}

// hanging serves the first chunks of a llama.cpp stream, then waits until the client goes and
// closes gone.
func hanging(t *testing.T, chunks int) (e *Engine, started, gone chan struct{}) {
	t.Helper()
	a := recorded(t, 0, "llamacpp-server/02_chat_stream.body")
	events := strings.SplitAfter(string(a.body), "\n\n")[:chunks]
	started, gone = make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			w.Write([]byte(ev))
		}
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(gone)
	}))
	t.Cleanup(srv.Close)
	e, err := New(Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	return e, started, gone
}

func TestRun_cancel(t *testing.T) {
	t.Run("in emit", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		ctx, cancel := context.WithCancel(context.Background())
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
		<-gone // the server saw the request end
	})
	t.Run("waiting for the next chunk", func(t *testing.T) {
		e, started, gone := hanging(t, 2)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		_, _, err := collect(e, ctx, helloChat)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		<-gone
	})
}

func TestRun_emitError(t *testing.T) {
	e, _, gone := hanging(t, 3)
	errStop := errors.New("buyer went away")
	var got []protocol.Delta
	_, err := e.Run(context.Background(), helloChat, engine.Emit(func(d protocol.Delta) error {
		got = append(got, d)
		return errStop
	}))
	if err != errStop {
		t.Errorf("Run error = %v, want %v", err, errStop)
	}
	if want := []protocol.Delta{{Text: "n"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("emitted %+v, want %+v", got, want)
	}
	<-gone // the server saw the client go
}

func TestRun_connectionCut(t *testing.T) {
	a := recorded(t, 0, "llamacpp-server/02_chat_stream.body")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(a.body[:len(a.body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // cut the connection in the middle of the chunked body
	}))
	defer srv.Close()
	e, err := New(Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	deltas, _, err := collect(e, context.Background(), helloChat)
	if !errors.Is(err, engine.ErrIncomplete) {
		t.Errorf("Run error = %v, want engine.ErrIncomplete", err)
	}
	if len(deltas) == 0 {
		t.Errorf("emitted nothing, want the deltas before the cut")
	}
}

// eofTransport records whether answers were read to their end before being closed. Once the
// client asks for more after "[DONE]", it closes release.
type eofTransport struct {
	sawEOF  atomic.Bool
	release chan struct{}
	once    sync.Once
}

type eofBody struct {
	io.ReadCloser
	t    *eofTransport
	done *bool
}

func (b eofBody) Read(p []byte) (int, error) {
	if *b.done {
		b.t.once.Do(func() { close(b.t.release) })
	}
	n, err := b.ReadCloser.Read(p)
	if bytes.Contains(p[:n], []byte("data: [DONE]")) {
		*b.done = true
	}
	if err == io.EOF {
		b.t.sawEOF.Store(true)
	}
	return n, err
}

func (t *eofTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = eofBody{resp.Body, t, new(bool)}
	}
	return resp, err
}

// TestRun_readsToEnd checks that the answer is read to its end after "[DONE]", which lets the
// transport reuse the connection, also when the end of the HTTP answer comes later.
func TestRun_readsToEnd(t *testing.T) {
	a := recorded(t, 0, "llamacpp-server/03_chat_stream_include_usage.body")
	tr := &eofTransport{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(a.body)
		w.(http.Flusher).Flush()
		<-tr.release // the end of the chunked body waits for the client
	}))
	defer srv.Close()
	defer tr.once.Do(func() { close(tr.release) })
	e, err := New(Config{BaseURL: srv.URL + "/v1", Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(e, context.Background(), helloChat); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !tr.sawEOF.Load() {
		t.Errorf("the answer was closed before its end")
	}
}

// recorder is an engine.Output that logs its calls.
type recorder struct {
	calls []string
	flush func(r *recorder) error
}

func (r *recorder) Delta(d protocol.Delta) error {
	r.calls = append(r.calls, "delta "+d.Text)
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
	t.Run("before waiting for the server", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &recorder{flush: func(r *recorder) error {
			if len(r.calls) >= 3 && r.calls[len(r.calls)-2] == "delta s" {
				cancel() // the engine is about to wait with both pieces flushed
			}
			return nil
		}}
		_, err := e.Run(ctx, helloChat, out)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		if got := out.calls[len(out.calls)-1]; got != "flush" {
			t.Errorf("calls = %q, want a flush last", out.calls)
		}
		<-gone
	})
	t.Run("error", func(t *testing.T) {
		e, _, gone := hanging(t, 3)
		errFlush := errors.New("coordinator gone")
		out := &recorder{flush: func(*recorder) error { return errFlush }}
		_, err := e.Run(context.Background(), helloChat, out)
		if err != errFlush {
			t.Errorf("Run error = %v, want %v", err, errFlush)
		}
		<-gone
	})
	t.Run("whole answer in one read is no flush", func(t *testing.T) {
		e, _ := replay(t, Config{}, recorded(t, 0, "llamacpp-server/03_chat_stream_include_usage.body"))
		out := &recorder{}
		if _, err := e.Run(context.Background(), helloChat, out); err != nil {
			t.Fatalf("Run: %v", err)
		}
		flushes := 0
		for _, c := range out.calls {
			if c == "flush" {
				flushes++
			}
		}
		// Run returns with the pieces held: they travel with the job's end.
		if flushes != 0 {
			t.Errorf("%d flushes for an answer read whole, want 0: %q", flushes, out.calls)
		}
	})
}
