package openaicompat

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// benchStream is a vLLM-style answer of 20 pieces: a role chunk, 20 one-token chunks, a finish
// chunk, a usage chunk and [DONE].
func benchStream() []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-9814ea0f38ec847a","object":"chat.completion.chunk","created":1778166117,"model":"Qwen/Qwen3-4B","choices":[{"index":0,"delta":`
	b.WriteString(head + `{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	for i := range 20 {
		fmt.Fprintf(&b, head+`{"content":" tok%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(head + `{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-9814ea0f38ec847a","object":"chat.completion.chunk","created":1778166117,"model":"Qwen/Qwen3-4B","choices":[],"usage":{"prompt_tokens":15,"total_tokens":35,"completion_tokens":20}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

var benchReq = &protocol.Request{Kind: protocol.KindChat, Model: "qwen",
	Messages:  []byte(`[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about the sea."}]`),
	MaxTokens: 64}

// BenchmarkRun is one streamed job of 20 pieces over HTTP, the test server's work included.
func BenchmarkRun(b *testing.B) {
	body := benchStream()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	e, err := New(Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	emit := engine.Emit(func(protocol.Delta) error { n++; return nil })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Run(ctx, benchReq, emit); err != nil {
			b.Fatal(err)
		}
	}
	if n == 0 {
		b.Fatal("nothing emitted")
	}
	b.ReportMetric(float64(conns.Load())/float64(b.N), "conns/op")
}

// BenchmarkRead is the agent's share alone: reading the same 20-piece stream from memory.
func BenchmarkRead(b *testing.B) {
	body := benchStream()
	emit := engine.Emit(func(protocol.Delta) error { return nil })
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := readers.Get().(*reader)
		r.start(bytes.NewReader(body), emit)
		if _, err := r.read(benchReq); err != nil {
			b.Fatal(err)
		}
		putReader(r)
	}
}

// BenchmarkRequestBody is the encoding of a request.
func BenchmarkRequestBody(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := appendRequest(make([]byte, 0, requestSize(benchReq, "qwen")), benchReq, "qwen"); err != nil {
			b.Fatal(err)
		}
	}
}
