package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

func TestTrace_Validate(t *testing.T) {
	tests := []struct {
		name  string
		trace Trace
		field string // "" when valid
	}{
		{"off", Trace{Sample: 1}, ""},
		{"collector", Trace{Endpoint: "http://127.0.0.1:4318", Sample: 0.25}, ""},
		{"traces URL", Trace{Endpoint: "https://otel.example/v1/traces", Sample: 0}, ""},
		{"not a URL", Trace{Endpoint: "127.0.0.1:4318", Sample: 1}, "otlp-endpoint"},
		{"grpc scheme", Trace{Endpoint: "grpc://collector:4317", Sample: 1}, "otlp-endpoint"},
		{"sample above 1", Trace{Sample: 1.5}, "trace-sample"},
		{"negative sample", Trace{Sample: -0.1}, "trace-sample"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.trace.Validate()
			fe, _ := errors.AsType[*FieldError](err)
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (fe == nil || fe.Field != tt.field):
				t.Errorf("Validate() = %v, want an error about --%s", err, tt.field)
			}
		})
	}
}

// --otlp-endpoint comes from the command line, else SHAREAI_OTLP_ENDPOINT, else
// OpenTelemetry's own variables; tracing is off when none is set.
func TestBind_OTLPEndpoint(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"off by default", nil, nil, ""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}, nil, "http://otel:4318"},
		{"the traces endpoint first", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/v1/traces"}, nil, "http://traces:4318/v1/traces"},
		{"SHAREAI_OTLP_ENDPOINT over OTEL_", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
			"SHAREAI_OTLP_ENDPOINT": "http://shareai:4318"}, nil, "http://shareai:4318"},
		{"the flag over all", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "SHAREAI_OTLP_ENDPOINT": "http://shareai:4318"},
			[]string{"--otlp-endpoint", "http://flag:4318"}, "http://flag:4318"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Coordinator
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			c.Flags(fs)
			if err := Bind(fs, func(k string) string { return tt.env[k] }); err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if c.Trace.Endpoint != tt.want || c.Trace.Sample != 1 {
				t.Errorf("endpoint %q, sample %g; want %q, 1", c.Trace.Endpoint, c.Trace.Sample, tt.want)
			}
		})
	}
}

func TestProvider_LoadFile_Trace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte("token: spt-x\ntrace:\n  otlp_endpoint: http://127.0.0.1:4318\n  sample: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var p Provider
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	p.Flags(fs)
	if err := p.LoadFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if p.Trace.Endpoint != "http://127.0.0.1:4318" || p.Trace.Sample != 0.5 {
		t.Errorf("trace %+v; want the file's endpoint and sample", p.Trace)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	if got := ProviderFileKey("otlp-endpoint"); got != "trace.otlp_endpoint" {
		t.Errorf("ProviderFileKey(otlp-endpoint) = %q", got)
	}
}
