// Package tracing sets up OpenTelemetry traces, exported over OTLP/HTTP (protobuf), and carries
// W3C trace context (traceparent, tracestate) across the network's hops: a buyer's HTTP
// request, the protocol's job frames, an engine's HTTP request to its upstream.
//
// Tracing is off unless an endpoint is configured: Setup then returns a no-op provider, which
// starts no goroutine and sends nothing. Library code never uses the global provider: each part
// is handed a trace.TracerProvider (nil is off), so that tests can run several networks in one
// process, each recording its own spans.
//
// Spans carry no secret and no content: an API key only by its id, never a prompt or an answer.
//
// It must not import anything in internal/.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures tracing.
type Config struct {
	// Endpoint is the OTLP/HTTP collector: its base URL, such as http://127.0.0.1:4318, to
	// which /v1/traces is added, or the URL of its traces endpoint (a path ending in
	// /v1/traces), taken as it is. http:// sends in the clear, https:// over TLS. Empty:
	// tracing is off.
	Endpoint string
	// Headers go with every export, such as a hosted collector's API key. The exporter also
	// reads OTEL_EXPORTER_OTLP_HEADERS (and the other OTEL_EXPORTER_OTLP_* settings it knows)
	// for what is not set here.
	Headers map[string]string
	// ServiceName and ServiceVersion name the program in its spans' resource (service.name,
	// service.version): shareai-coordinator, shareai-provider.
	ServiceName    string
	ServiceVersion string
	// SampleRatio is the share of traces recorded, from 0 to 1, decided by trace id. A request
	// that comes with a caller's trace context joins the caller's trace, but the ratio decides
	// whether it is recorded, not the caller's flag: no buyer can make the operator trace
	// everything. Spans under a parent in this process follow the parent.
	SampleRatio float64
}

// Setup returns the tracer provider cfg asks for, and the function that flushes the spans
// still queued and stops it, to call on exit. With no Endpoint it returns a no-op provider.
func Setup(ctx context.Context, cfg Config) (trace.TracerProvider, func(context.Context) error, error) {
	if cfg.Endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	u, err := TracesURL(cfg.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, nil, fmt.Errorf("trace sample ratio %g is not between 0 and 1", cfg.SampleRatio)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	ratio := sdktrace.TraceIDRatioBased(cfg.SampleRatio)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		// A parent in this process is followed; a remote one (a buyer's traceparent) is not:
		// the ratio decides, so that no buyer can make the operator trace everything.
		sdktrace.WithSampler(sdktrace.ParentBased(ratio,
			sdktrace.WithRemoteParentSampled(ratio), sdktrace.WithRemoteParentNotSampled(ratio))),
	)
	return tp, tp.Shutdown, nil
}

// TracesURL is the URL spans are posted to for an endpoint (see Config.Endpoint).
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("otlp endpoint %q is not a URL such as http://127.0.0.1:4318", endpoint)
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// SetGlobal makes tp the process's global provider, with W3C trace context as the global
// propagator and export errors passed to report: for programs' main, never library code.
func SetGlobal(tp trace.TracerProvider, report func(error)) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(report))
}

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
