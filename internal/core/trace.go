package core

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/tracing"
)

// A traced request makes this tree of spans, all in the buyer's trace when the request carries
// a W3C traceparent header:
//
//	POST /v1/chat/completions     server: model, stream, request and key ids, outcome, tokens
//	├── match                     the pick: candidates, the node chosen or why none
//	├── job                       client: one per attempt on a node (node, region, attempt,
//	│   └── (agent) job …         why the job before failed); its context rides on the job frame
//	├── match
//	└── job                       a retry, or a continuation after a failover
//
// Spans hold ids, counts and outcomes: never a key, a prompt or an answer.

// startMatch starts the span of a pick among a model's candidates.
func (c *Core) startMatch(ctx context.Context, model string, candidates int) trace.Span {
	if !c.tracing {
		return trace.SpanFromContext(context.Background())
	}
	_, span := c.tracer.Start(ctx, tracing.SpanMatch,
		trace.WithAttributes(tracing.GenAIModel.String(model), tracing.Candidates.Int(candidates)))
	return span
}

// endMatch records the node a pick chose, or why none could take the request.
func endMatch(span trace.Span, cand matcher.Candidate, err error) {
	if !span.IsRecording() {
		return // no need to format the reasons of a span nobody records
	}
	if err != nil {
		span.SetAttributes(tracing.Reasons.String(err.Error()))
		span.SetStatus(codes.Error, "no node")
	} else {
		span.SetAttributes(tracing.NodeID.String(cand.NodeID))
	}
	span.End()
}

// startJob starts the span of an attempt on a node; the job frame carries its context.
func (c *Core) startJob(ctx context.Context, o *fleet.Offer, req *protocol.Request, r *Request) (context.Context, trace.Span) {
	if !c.tracing {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := c.tracer.Start(ctx, tracing.SpanJob, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.NodeID.String(o.Node.ID), tracing.Region.String(o.Node.Region),
			tracing.GenAIModel.String(req.Model), tracing.Attempt.Int(r.jobs), tracing.Continuation.Bool(req.Continue)))
	if r.failure != nil {
		span.SetAttributes(tracing.Failover.String(tracing.Short(r.failure.Error())))
	}
	return ctx, span
}

// endJob records how a relayed job ended on its span, and ends it.
func endJob(span trace.Span, job *fleet.Job, res relay.Result) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	outcome := [...]string{relay.OK: "ok", relay.Cancelled: "cancelled", relay.Failed: "failed", relay.Refused: "refused"}[res.Outcome]
	span.SetAttributes(tracing.JobID.String(job.ID), tracing.Outcome.String(outcome), tracing.Delivered.Int(res.Delivered),
		tracing.GenAIInputTokens.Int(res.Usage.PromptTokens), tracing.GenAIOutputTokens.Int(res.Usage.CompletionTokens))
	if res.FinishReason != "" {
		span.SetAttributes(tracing.GenAIFinish.StringSlice([]string{res.FinishReason}))
	}
	if res.Outcome == relay.Failed || res.Outcome == relay.Refused {
		tracing.Fail(span, res.Err)
	}
}

// traceBill records the request's bill, queued for settlement, as an event of its span.
func traceBill(span trace.Span, bill *ledger.Bill, jobs int) {
	if bill == nil || span == nil || !span.IsRecording() { // nil: a call made by a test
		return
	}
	span.AddEvent("bill", trace.WithAttributes(tracing.CostNanos.Int64(int64(bill.Cost())), tracing.Jobs.Int(jobs),
		tracing.GenAIInputTokens.Int(bill.PromptTokens), tracing.GenAIOutputTokens.Int(bill.CompletionTokens)))
}
