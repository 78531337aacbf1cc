package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/tracing"
	"github.com/shareai/shareai/internal/tracing/otlp"
)

// startTracing sets up the program's tracer provider (a no-op one unless --otlp-endpoint is
// set), also as the process's global one, and returns it with the function that flushes the
// spans still queued, to defer.
func startTracing(cfg config.Trace, service string, log *slog.Logger) (trace.TracerProvider, func(), error) {
	tp, shutdown, err := otlp.Setup(context.Background(), otlp.Config{
		Endpoint: cfg.Endpoint, ServiceName: service, ServiceVersion: version, SampleRatio: cfg.Sample,
	})
	if err != nil {
		return nil, nil, err
	}
	if !tracing.Enabled(tp) {
		return tp, func() {}, nil
	}
	otlp.SetGlobal(tp, func(err error) { log.Warn("tracing", "err", err) })
	u, _ := otlp.TracesURL(cfg.Endpoint)
	log.Info("sending traces", "otlp", config.MaskURL(u), "sample", cfg.Sample)
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}, nil
}
