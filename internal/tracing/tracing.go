// Package tracing carries W3C trace context (traceparent, tracestate) across the network's
// hops — a buyer's HTTP request, the protocol's job frames, an engine's HTTP request to its
// upstream — and holds the spans' names, attribute keys and small helpers. It is light: it
// links OpenTelemetry's API, not its SDK nor an exporter, which the programs set up with
// package tracing/otlp.
//
// Library code never uses the global provider: each part is handed a trace.TracerProvider
// (nil is off), so that tests can run several networks in one process, each recording its own
// spans.
//
// Spans carry no secret and no content: an API key only by its id, never a prompt or an answer.
//
// It must not import anything in internal/, nor OpenTelemetry's SDK or exporters.
package tracing

import (
	"context"
	"net/http"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether tp records spans: false for nil and for a no-op provider.
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}

// Tracer returns the tracer of an instrumentation scope (the package's import path) from tp;
// a nil tp gives a no-op tracer.
func Tracer(tp trace.TracerProvider, scope string) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(scope)
}

// propagator is W3C trace context alone: no baggage, which would carry whatever a caller
// puts in it from hop to hop.
var propagator = propagation.TraceContext{}

// Inject returns the trace context of ctx's span as a carrier for a protocol frame
// ({"traceparent": …, "tracestate": …}), or nil when ctx has none.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c
}

// Extract returns ctx with the remote span context a carrier holds (see Inject); ctx itself
// when it holds none or a malformed one.
func Extract(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(carrier))
}

// InjectHTTP sets the traceparent (and tracestate) headers of ctx's span on h; nothing when
// ctx has no span context.
func InjectHTTP(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// ExtractHTTP returns ctx with the remote span context of h's traceparent header, if valid.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if h.Get("Traceparent") == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// maxStatus bounds an error's text in a span's status.
const maxStatus = 200

// Fail marks span as failed by err, with err's text (cut to 200 bytes) as its description.
// Nothing when err is nil.
func Fail(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, Short(err.Error()))
}

// Short cuts s to 200 bytes at most, on a character boundary: for errors' texts in spans.
func Short(s string) string {
	if len(s) <= maxStatus {
		return s
	}
	n := maxStatus
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
