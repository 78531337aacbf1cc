// Package otlp sets up a program's OpenTelemetry tracer provider: the SDK with a batch span
// processor, a parent-based ratio sampler, and the OTLP/HTTP (protobuf) exporter. Only the
// programs' main packages (cmd/shareai) import it; library code takes a trace.TracerProvider
// and carries trace context with package tracing, which links neither the SDK nor an exporter.
//
// Tracing is off unless an endpoint is configured: Setup then returns a no-op provider, which
// starts no goroutine and sends nothing.
//
// It must not import anything in internal/ but tracing.
package otlp

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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
