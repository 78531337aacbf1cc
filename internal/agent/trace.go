package agent

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tracing"
)

// A traced job makes two spans on the node, in the coordinator's trace when the job frame
// carries its context:
//
//	job                  server, child of the coordinator's job span: model, engine, tokens
//	└── chat MODEL       the engine's run (GenAI conventions); the openai and ollama engines
//	                     send its traceparent to their upstream server
//
// Spans hold ids, counts and outcomes: never a prompt or an answer.

// traceContext returns ctx with the coordinator's trace context of a job, when the agent
// traces; else ctx, so an agent that does not trace passes nothing on to its engine.
func (a *Agent) traceContext(ctx context.Context, carrier map[string]string) context.Context {
	if !a.tracing {
		return ctx
	}
	return tracing.Extract(ctx, carrier)
}

// startJob starts the span of a job's run.
func (a *Agent) startJob(ctx context.Context, id string, req *protocol.Request) (context.Context, trace.Span) {
	if !a.tracing {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return a.tracer.Start(ctx, tracing.SpanJob, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.JobID.String(id), tracing.GenAIModel.String(req.Model),
			tracing.Engine.String(a.cfg.Engine.Name()), tracing.Continuation.Bool(req.Continue)))
}

// endJob records the job's end on its span, and ends it.
func endJob(span trace.Span, e *protocol.End) {
	defer span.End()
	if !span.IsRecording() || e == nil {
		return
	}
	span.SetAttributes(tracing.GenAIInputTokens.Int(e.Usage.PromptTokens), tracing.GenAIOutputTokens.Int(e.Usage.CompletionTokens))
	if e.FinishReason != "" {
		span.SetAttributes(tracing.GenAIFinish.StringSlice([]string{e.FinishReason}))
	}
	if e.Error != nil {
		tracing.Fail(span, e.Error)
	}
}

// startEngine starts the span of the engine's run of a job.
func (a *Agent) startEngine(ctx context.Context, req *protocol.Request) (context.Context, trace.Span) {
	if !a.tracing {
		return ctx, trace.SpanFromContext(context.Background())
	}
	op := "chat"
	if req.Kind == protocol.KindCompletion {
		op = "text_completion"
	}
	return a.tracer.Start(ctx, tracing.EngineSpan(op, req.Model), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.GenAIOperation.String(op), tracing.GenAIModel.String(req.Model), tracing.Engine.String(a.cfg.Engine.Name())))
}

// endEngine records the engine's result on its span, and ends it.
func endEngine(span trace.Span, res engine.Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		tracing.Fail(span, err)
		return
	}
	span.SetAttributes(tracing.GenAIInputTokens.Int(res.Usage.PromptTokens), tracing.GenAIOutputTokens.Int(res.Usage.CompletionTokens),
		tracing.GenAIFinish.StringSlice([]string{res.FinishReason}))
}
