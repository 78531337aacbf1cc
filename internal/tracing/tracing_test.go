package tracing_test

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/shareai/shareai/internal/tracing"
)

// A span's context travels through a frame's carrier and HTTP headers as W3C trace context;
// malformed context is ignored.
func TestInjectExtract(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{"Traceparent": {parent}, "Tracestate": {"vendor=x"}}
	ctx := tracing.ExtractHTTP(t.Context(), h)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("extracted %+v from %s", sc, parent)
	}
	carrier := tracing.Inject(ctx)
	if carrier["traceparent"] != parent || carrier["tracestate"] != "vendor=x" {
		t.Errorf("carrier %v, want the traceparent and tracestate", carrier)
	}
	back := trace.SpanContextFromContext(tracing.Extract(t.Context(), carrier))
	if !back.Equal(sc) {
		t.Errorf("round trip gave %+v, want %+v", back, sc)
	}
	out := http.Header{}
	tracing.InjectHTTP(ctx, out)
	if out.Get("Traceparent") != parent {
		t.Errorf("traceparent header %q, want %q", out.Get("Traceparent"), parent)
	}
	for _, bad := range []map[string]string{nil, {"traceparent": "garbage"}, {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}} {
		if sc := trace.SpanContextFromContext(tracing.Extract(t.Context(), bad)); sc.IsValid() {
			t.Errorf("Extract(%v) gave a valid context %+v", bad, sc)
		}
	}
}

func TestShort(t *testing.T) {
	long := string(make([]byte, 300))
	if got := tracing.Short(long); len(got) > 204 {
		t.Errorf("Short of 300 bytes is %d bytes", len(got))
	}
	if got := tracing.Short("é" + long); got[len(got)-len("…"):] != "…" {
		t.Errorf("Short does not mark the cut: %q", got[len(got)-5:])
	}
}

// Off is nil or a no-op provider: its spans record nothing, and nothing is injected.
func TestEnabled_Off(t *testing.T) {
	if tracing.Enabled(nil) || tracing.Enabled(noop.NewTracerProvider()) {
		t.Error("a nil or no-op provider is enabled")
	}
	ctx, span := tracing.Tracer(nil, "test").Start(t.Context(), "nothing")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("a span of a nil provider records, or has a context")
	}
	if c := tracing.Inject(ctx); c != nil {
		t.Errorf("Inject = %v without a span context, want nil", c)
	}
	h := http.Header{}
	tracing.InjectHTTP(ctx, h)
	if len(h) != 0 {
		t.Errorf("headers %v set without a span context", h)
	}
}
