package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
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

// startRequest starts the request's server span, a child of the buyer's trace context, in
// c.ctx, and returns the request with it. Untraced, c.span is a no-op span and r is unchanged.
func (g *Gateway) startRequest(r *http.Request, c *call) *http.Request {
	if !g.tracing {
		c.span = trace.SpanFromContext(context.Background())
		return r
	}
	route := strings.TrimPrefix(r.Pattern, r.Method+" ")
	ctx, span := g.tracer.Start(tracing.ExtractHTTP(c.ctx, r.Header), r.Method+" "+route,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.HTTPMethod.String(r.Method), tracing.HTTPRoute.String(route), tracing.RequestID.String(c.id)))
	c.span, c.ctx = span, ctx
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
