package otlp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/shareai/shareai/internal/tracing"
	"github.com/shareai/shareai/internal/tracing/otlp"
)

// The OTLP exporter really sends: spans reach a collector's POST /v1/traces as protobuf, with
// the program's service name and version, once the provider is shut down (flushed).
func TestSetup_ExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			t.Errorf("collector got %s %s, want POST /v1/traces", r.Method, r.URL.Path)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			t.Errorf("Content-Type %q, want application/x-protobuf", ct)
		}
		if h := r.Header.Get("X-Collector-Key"); h != "k1" {
			t.Errorf("X-Collector-Key %q, want the configured header", h)
		}
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("collector could not decode the export: %v", err)
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer srv.Close()

	tp, shutdown, err := otlp.Setup(t.Context(), otlp.Config{Endpoint: srv.URL, ServiceName: "shareai-test",
		ServiceVersion: "v9", SampleRatio: 1, Headers: map[string]string{"X-Collector-Key": "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Enabled(tp) {
		t.Fatal("a provider with an endpoint is not enabled")
	}
	_, span := tracing.Tracer(tp, "test").Start(t.Context(), "unit of work")
	traceID := span.SpanContext().TraceID()
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	var req *coltracepb.ExportTraceServiceRequest
	select {
	case req = <-got:
	default:
		t.Fatal("shutdown returned and the collector got nothing")
	}
	if len(req.ResourceSpans) != 1 {
		t.Fatalf("%d resource spans, want 1", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.GetAttributes() {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "shareai-test" || res["service.version"] != "v9" {
		t.Errorf("resource %v, want service.name shareai-test and service.version v9", res)
	}
	var names []string
	for _, ss := range rs.ScopeSpans {
		for _, s := range ss.Spans {
			names = append(names, s.Name)
			if trace.TraceID(s.TraceId) != traceID {
				t.Errorf("span %q has trace id %x, want %s", s.Name, s.TraceId, traceID)
			}
		}
	}
	if len(names) != 1 || names[0] != "unit of work" {
		t.Errorf("spans exported %q, want [unit of work]", names)
	}
}

// Off by default: without an endpoint, Setup gives a no-op provider, whose spans record
// nothing, start no goroutine and carry no context on.
func TestSetup_OffWithoutEndpoint(t *testing.T) {
	before := runtime.NumGoroutine()
	tp, shutdown, err := otlp.Setup(t.Context(), otlp.Config{ServiceName: "shareai-test", SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled(tp) || tracing.Enabled(nil) {
		t.Error("tracing enabled without an endpoint")
	}
	ctx, span := tracing.Tracer(tp, "test").Start(t.Context(), "nothing")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("a span of the no-op provider records, or has a context")
	}
	if c := tracing.Inject(ctx); c != nil {
		t.Errorf("Inject = %v without a span context, want nil", c)
	}
	h := http.Header{}
	tracing.InjectHTTP(ctx, h)
	if len(h) != 0 {
		t.Errorf("headers %v set without a span context", h)
	}
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after a no-op setup, %d before", after, before)
	}
}

func TestSetup_RefusesBadConfig(t *testing.T) {
	for _, cfg := range []otlp.Config{
		{Endpoint: "127.0.0.1:4318", SampleRatio: 1},
		{Endpoint: "http://127.0.0.1:4318", SampleRatio: 2},
	} {
		if _, _, err := otlp.Setup(t.Context(), cfg); err == nil {
			t.Errorf("Setup(%+v) = nil error", cfg)
		}
	}
}

func TestTracesURL(t *testing.T) {
	tests := []struct{ endpoint, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"},
		{"http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"},
		{"https://otel.example/otlp", "https://otel.example/otlp/v1/traces"},
		{"https://otel.example/v1/traces", "https://otel.example/v1/traces"},
	}
	for _, tt := range tests {
		if got, err := otlp.TracesURL(tt.endpoint); err != nil || got != tt.want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q", tt.endpoint, got, err, tt.want)
		}
	}
}

// A buyer's traceparent joins the buyer's trace but does not decide what is sampled: the
// operator's ratio does, so that no buyer can make the operator trace every request.
func TestSetup_RemoteParentDoesNotForceSampling(t *testing.T) {
	tp, shutdown, err := otlp.Setup(t.Context(), otlp.Config{Endpoint: "http://127.0.0.1:1", ServiceName: "shareai-test", SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	sampled := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sampled)
	_, span := tp.Tracer("test").Start(ctx, "request")
	defer span.End()
	if span.IsRecording() {
		t.Error("a sampled remote parent made a ratio-0 coordinator record its span")
	}
	if span.SpanContext().TraceID() != sampled.TraceID() {
		t.Error("the span left the buyer's trace")
	}
}
