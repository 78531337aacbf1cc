package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/tracing"
)

// The buyer's trace: its traceparent makes the coordinator's spans children of the buyer's span.
const (
	buyerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	buyerSpan   = "00f067aa0ba902b7"
	traceparent = "00-" + buyerTrace + "-" + buyerSpan + "-01"
)

// tracedEnv starts a network whose coordinator and agents record their spans in one recorder.
func tracedEnv(t *testing.T, opts ...testenv.Option) (*testenv.Env, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return testenv.New(t, append(opts, func(c *testenv.Config) { c.Coordinator.TracerProvider = tp })...), rec
}

// tracedStream sends a streamed chat with the buyer's traceparent.
func tracedStream(t *testing.T, env *testenv.Env, prompt string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "seed": 5,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	return resp
}

// spans are the spans a recorder has seen end.
type spans []sdktrace.ReadOnlySpan

// waitRequestSpan waits for the request's server span to end (after the answer's last byte)
// and returns every span ended by then.
func waitRequestSpan(env *testenv.Env, rec *tracetest.SpanRecorder) spans {
	var all spans
	env.WaitFor("the request's span to end", func() bool {
		all = rec.Ended()
		return len(all.named("POST /v1/chat/completions")) == 1
	})
	return all
}

func (ss spans) named(name string) spans {
	var out spans
	for _, s := range ss {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func (ss spans) kind(k trace.SpanKind) spans {
	var out spans
	for _, s := range ss {
		if s.SpanKind() == k {
			out = append(out, s)
		}
	}
	return out
}

func (ss spans) childrenOf(parent sdktrace.ReadOnlySpan) spans {
	var out spans
	for _, s := range ss {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A trace spans coordinator and agent: the buyer's traceparent makes the request's span a
// child of the buyer's; the match and the job are under it; the agent's job span is the child
// of the coordinator's, across the WebSocket; the engine's span is under the agent's job. No
// span holds the API key or the prompt.
func TestTrace_SpansCoordinatorAndAgent(t *testing.T) {
	env, rec := tracedEnv(t, testenv.Providers(1))
	const prompt = "Trace this secret-free prompt, please."
	resp := tracedStream(t, env, prompt)
	a := readStream(t, resp, nil)
	resp.Body.Close()
	if !a.done || a.errText != "" {
		t.Fatalf("answer done %v, error %q", a.done, a.errText)
	}
	all := waitRequestSpan(env, rec)
	env.WaitFor("the agent's job span to end", func() bool {
		all = rec.Ended()
		return len(all.named(tracing.SpanJob)) == 2
	})

	for _, s := range all {
		if got := s.SpanContext().TraceID().String(); got != buyerTrace {
			t.Errorf("span %q is in trace %s, want the buyer's %s", s.Name(), got, buyerTrace)
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, env.APIKey) || strings.Contains(v, prompt) || strings.Contains(v, a.text.String()) {
				t.Errorf("span %q attribute %s holds a secret or content: %q", s.Name(), kv.Key, v)
			}
		}
	}

	req := all.named("POST /v1/chat/completions")[0]
	if req.SpanKind() != trace.SpanKindServer || req.Parent().SpanID().String() != buyerSpan || !req.Parent().IsRemote() {
		t.Errorf("request span: kind %v, parent %s (remote %v); want a server span under the buyer's %s",
			req.SpanKind(), req.Parent().SpanID(), req.Parent().IsRemote(), buyerSpan)
	}
	if attr(req, tracing.GenAIModel).AsString() != model || !attr(req, tracing.Stream).AsBool() ||
		attr(req, tracing.Outcome).AsString() != "ok" || attr(req, tracing.HTTPStatus).AsInt64() != 200 ||
		attr(req, tracing.KeyID).AsString() == "" || !strings.HasPrefix(attr(req, tracing.RequestID).AsString(), "req_") ||
		attr(req, tracing.GenAIOutputTokens).AsInt64() <= 0 || attr(req, tracing.GenAIInputTokens).AsInt64() <= 0 {
		t.Errorf("request span attributes %v", req.Attributes())
	}
	if hold := req.Events(); len(hold) < 2 || hold[0].Name != "hold" || hold[len(hold)-1].Name != "bill" {
		t.Errorf("request span events %v, want a hold, then a bill", hold)
	}

	match := all.named(tracing.SpanMatch)
	if len(match) != 1 || match[0].Parent().SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("match spans %v, want one under the request span", match)
	}
	node := env.Agents[0].NodeID()
	if attr(match[0], tracing.NodeID).AsString() != node || attr(match[0], tracing.Candidates).AsInt64() != 1 {
		t.Errorf("match span attributes %v, want node %s of 1 candidate", match[0].Attributes(), node)
	}

	coordJobs := all.named(tracing.SpanJob).kind(trace.SpanKindClient)
	if len(coordJobs) != 1 || coordJobs[0].Parent().SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("coordinator job spans %v, want one under the request span", coordJobs)
	}
	coordJob := coordJobs[0]
	if attr(coordJob, tracing.NodeID).AsString() != node || attr(coordJob, tracing.Attempt).AsInt64() != 1 ||
		attr(coordJob, tracing.Outcome).AsString() != "ok" || !strings.HasPrefix(attr(coordJob, tracing.JobID).AsString(), "job_") {
		t.Errorf("coordinator job span attributes %v", coordJob.Attributes())
	}

	agentJobs := all.named(tracing.SpanJob).kind(trace.SpanKindServer)
	if len(agentJobs) != 1 {
		t.Fatalf("%d agent job spans, want 1", len(agentJobs))
	}
	agentJob := agentJobs[0]
	if agentJob.Parent().SpanID() != coordJob.SpanContext().SpanID() || !agentJob.Parent().IsRemote() {
		t.Errorf("agent job span's parent %s (remote %v), want the coordinator's job span %s, across the WebSocket",
			agentJob.Parent().SpanID(), agentJob.Parent().IsRemote(), coordJob.SpanContext().SpanID())
	}
	if attr(agentJob, tracing.JobID) != attr(coordJob, tracing.JobID) || attr(agentJob, tracing.Engine).AsString() != "sim" ||
		attr(agentJob, tracing.GenAIOutputTokens).AsInt64() <= 0 {
		t.Errorf("agent job span attributes %v", agentJob.Attributes())
	}
	if scope := agentJob.InstrumentationScope().Name; !strings.HasSuffix(scope, "/internal/agent") {
		t.Errorf("agent job span's scope %q", scope)
	}

	engine := all.childrenOf(agentJob)
	if len(engine) != 1 || engine[0].Name() != "chat "+model || attr(engine[0], tracing.GenAIOperation).AsString() != "chat" {
		t.Fatalf("spans under the agent's job %v, want one engine span %q", engine, "chat "+model)
	}
	if len(all) != 5 {
		t.Errorf("%d spans, want 5: request, match, job, agent job, engine", len(all))
	}
}

// A failover request has two job spans under one request span: the node that dropped
// mid-answer, failed, and the one that continued it, which says why.
func TestTrace_FailoverJobsUnderOneRequest(t *testing.T) {
	env, rec := tracedEnv(t, testenv.Providers(2), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	resp := tracedStream(t, env, "Tell a long story about failover.")
	first := resp.Header.Get("X-Shareai-Node")
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.StopAgent(agentIndex(env, first))
		}
	})
	resp.Body.Close()
	if !a.done || a.errText != "" {
		t.Fatalf("answer done %v, error %q", a.done, a.errText)
	}
	all := waitRequestSpan(env, rec)
	req := all.named("POST /v1/chat/completions")[0]

	jobs := all.named(tracing.SpanJob).kind(trace.SpanKindClient)
	if len(jobs) != 2 {
		t.Fatalf("%d coordinator job spans, want 2", len(jobs))
	}
	for _, j := range jobs {
		if j.Parent().SpanID() != req.SpanContext().SpanID() {
			t.Errorf("job span %s is not under the request span", j.SpanContext().SpanID())
		}
	}
	if jobs[0].StartTime().After(jobs[1].StartTime()) {
		jobs[0], jobs[1] = jobs[1], jobs[0]
	}
	dropped, continued := jobs[0], jobs[1]
	if attr(dropped, tracing.NodeID).AsString() != first || attr(dropped, tracing.Outcome).AsString() != "failed" ||
		dropped.Status().Code.String() != "Error" || attr(dropped, tracing.Attempt).AsInt64() != 1 {
		t.Errorf("dropped job span: attributes %v, status %v", dropped.Attributes(), dropped.Status())
	}
	if attr(continued, tracing.NodeID).AsString() == first || attr(continued, tracing.Attempt).AsInt64() != 2 ||
		!attr(continued, tracing.Continuation).AsBool() || !strings.Contains(attr(continued, tracing.Failover).AsString(), "mid-answer") ||
		attr(continued, tracing.Outcome).AsString() != "ok" {
		t.Errorf("continuing job span attributes %v", continued.Attributes())
	}
	if n := len(all.named(tracing.SpanMatch).childrenOf(req)); n != 2 {
		t.Errorf("%d match spans under the request, want 2", n)
	}
	env.WaitFor("the continuing agent's job span", func() bool {
		return len(spans(rec.Ended()).childrenOf(continued)) == 1
	})
	agentJob := spans(rec.Ended()).childrenOf(continued)[0]
	if agentJob.SpanKind() != trace.SpanKindServer || !attr(agentJob, tracing.Continuation).AsBool() {
		t.Errorf("continuing agent's job span: kind %v, attributes %v", agentJob.SpanKind(), agentJob.Attributes())
	}
}

// Untraced (the default), the coordinator reads no traceparent and sends no trace context to
// its agents: a traced agent's job starts a trace of its own.
func TestTrace_OffByDefault(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.EachAgent = func(i int, c *agent.Config) { c.TracerProvider = tp } })
	resp := tracedStream(t, env, "Hello")
	readStream(t, resp, nil)
	resp.Body.Close()
	env.WaitFor("the agent's job span", func() bool { return len(spans(rec.Ended()).named(tracing.SpanJob)) == 1 })
	job := spans(rec.Ended()).named(tracing.SpanJob)[0]
	if job.Parent().IsValid() || job.SpanContext().TraceID().String() == buyerTrace {
		t.Errorf("agent job span has parent %v in trace %s; want a root span of a new trace", job.Parent(), job.SpanContext().TraceID())
	}
}
