package ollama

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// The engine passes the agent's span on to Ollama as a W3C traceparent header.
func TestRun_forwardsTraceparent(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "recorded/ollama_api_chat_stream_doc.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	e, _ := serve(t, Config{}, answerRoutes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(body)
	})))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	if _, _, err := collect(e, trace.ContextWithSpanContext(context.Background(), sc), helloChat); err != nil {
		t.Fatal(err)
	}
	if tp, want := <-got, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; tp != want {
		t.Errorf("Ollama got traceparent %q, want %q", tp, want)
	}
}
