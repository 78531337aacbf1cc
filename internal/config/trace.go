package config

import (
	"flag"
	"fmt"
	"strconv"
)

// Trace is the OpenTelemetry tracing configuration shared by every program: off unless an
// OTLP endpoint is set.
type Trace struct {
	// Endpoint is the OTLP/HTTP collector's base URL (http://127.0.0.1:4318) or its traces
	// URL (…/v1/traces); empty: no traces.
	Endpoint string
	// Sample is the share of requests traced (0 to 1), unless the caller's trace context
	// decides.
	Sample float64
}

// Flags registers the tracing flags.
func (t *Trace) Flags(fs *flag.FlagSet) {
	fs.StringVar(&t.Endpoint, "otlp-endpoint", "", "send OpenTelemetry traces over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (Jaeger, an OpenTelemetry Collector); empty: no traces. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT apply when neither this nor SHAREAI_OTLP_ENDPOINT is set")
	fs.Float64Var(&t.Sample, "trace-sample", 1, "share of requests traced, from 0 to 1, by trace id; a request whose caller sent a W3C traceparent joins the caller's trace, but this ratio, not the caller, decides whether it is recorded")
}

// Validate checks the settings.
func (t *Trace) Validate() error {
	if t.Sample < 0 || t.Sample > 1 {
		return &FieldError{"trace-sample", "must be between 0 and 1, got " + strconv.FormatFloat(t.Sample, 'g', -1, 64)}
	}
	if t.Endpoint == "" {
		return nil
	}
	if !isHTTPURL(t.Endpoint) {
		return &FieldError{"otlp-endpoint", fmt.Sprintf("%q is not a URL such as http://127.0.0.1:4318", MaskURL(t.Endpoint))}
	}
	return nil
}

// otelEnv are OpenTelemetry's standard variables for the traces endpoint, in the order they
// are looked at: they set --otlp-endpoint when SHAREAI_OTLP_ENDPOINT does not, and the
// command line overrides them.
var otelEnv = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// bindOTel sets --otlp-endpoint, if fs has it, from OpenTelemetry's standard variables; Bind
// then lets SHAREAI_OTLP_ENDPOINT override them.
func bindOTel(fs *flag.FlagSet, getenv func(string) string) error {
	f := fs.Lookup("otlp-endpoint")
	if f == nil {
		return nil
	}
	for _, name := range otelEnv {
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
			showDefault(f, v)
			return nil
		}
	}
	return nil
}
