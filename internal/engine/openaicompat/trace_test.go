package openaicompat

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// The engine passes the agent's span on to the upstream server as a W3C traceparent header
// (vLLM and others continue the trace), and sends none without a span.
func TestRun_forwardsTraceparent(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"traced", trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"not traced", context.Background(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, s := replay(t, Config{}, recorded(t, 0, "llamacpp-server/02_chat_stream.body"))
			if _, _, err := collect(e, tt.ctx, helloChat); err != nil {
				t.Fatal(err)
			}
			_, _, header, _ := s.get()
			if got := header.Get("Traceparent"); got != tt.want {
				t.Errorf("upstream got traceparent %q, want %q", got, tt.want)
			}
		})
	}
}
