package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
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

// startRequest starts the request's server span, a child of the buyer's trace context, and
// returns the request with it. Untraced, c.span is a no-op span and r is unchanged.
func (g *Gateway) startRequest(r *http.Request, c *call) *http.Request {
	if !g.tracing {
		c.span = trace.SpanFromContext(context.Background())
		return r
	}
	route := strings.TrimPrefix(r.Pattern, r.Method+" ")
	ctx, span := g.tracer.Start(tracing.ExtractHTTP(r.Context(), r.Header), r.Method+" "+route,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.HTTPMethod.String(r.Method), tracing.HTTPRoute.String(route), tracing.RequestID.String(c.id)))
	c.span = span
	return r.WithContext(ctx)
}

// endRequest records how the request ended on its span, and ends it.
func endRequest(c *call, err error) {
	span := c.span
	defer span.End()
	if !span.IsRecording() {
		return
	}
	status := http.StatusOK
	if err != nil {
		status = http.StatusInternalServerError
		if ae, ok := errors.AsType[*api.Error](err); ok {
			status = ae.Status
		}
		if status >= 500 {
			tracing.Fail(span, err)
		}
	}
	span.SetAttributes(tracing.HTTPStatus.Int(status))
	if c.key != nil {
		span.SetAttributes(tracing.KeyID.String(c.key.ID))
	}
	u := c.usage
	if u == nil {
		return
	}
	span.SetAttributes(tracing.Stream.Bool(u.Stream))
	if u.Outcome == "" {
		return // refused before a node took it
	}
	span.SetAttributes(tracing.GenAIModel.String(u.Model), tracing.Outcome.String(u.Outcome), tracing.NodeID.String(u.NodeID),
		tracing.GenAIInputTokens.Int(u.PromptTokens), tracing.GenAIOutputTokens.Int(u.CompletionTokens))
	if u.Outcome == store.OutcomeError && err == nil {
		span.SetStatus(codes.Error, tracing.Short(u.Error)) // the answer was cut short
	}
}

// startMatch starts the span of a pick among a model's candidates.
func (g *Gateway) startMatch(ctx context.Context, model string, candidates int) trace.Span {
	if !g.tracing {
		return trace.SpanFromContext(context.Background())
	}
	_, span := g.tracer.Start(ctx, tracing.SpanMatch,
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
func (g *Gateway) startJob(ctx context.Context, o *fleet.Offer, req *protocol.Request, t *try) (context.Context, trace.Span) {
	if !g.tracing {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := g.tracer.Start(ctx, tracing.SpanJob, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.NodeID.String(o.Node.ID), tracing.Region.String(o.Node.Region),
			tracing.GenAIModel.String(req.Model), tracing.Attempt.Int(t.jobs), tracing.Continuation.Bool(req.Continue)))
	if t.failure != nil {
		span.SetAttributes(tracing.Failover.String(tracing.Short(t.failure.Error())))
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
