package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/store"
)

// handleInference serves an inference endpoint (chat or completion) as handle does, and counts
// each request in the metrics with its outcome, whether a node served it or it was refused
// before.
func (g *Gateway) handleInference(endpoint string, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := g.call(w, r, store.KeyBuyer, fn)
		m := requestMetrics(endpoint, c, err)
		g.cfg.Metrics.RequestEnded(m)
		g.logRequest(r.Context(), c, m)
	})
}

// logRequest logs an inference request's end: at debug level, or at warning level when the
// network failed it. The key shows by its prefix only; the request id comes from ctx.
func (g *Gateway) logRequest(ctx context.Context, c *call, m metrics.Request) {
	level := slog.LevelDebug
	if m.Outcome == store.OutcomeError {
		level = slog.LevelWarn
	}
	if !g.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("endpoint", m.Endpoint), slog.String("outcome", m.Outcome)}
	if c.key != nil {
		attrs = append(attrs, slog.String(logKey, c.key.Prefix), slog.String(logAccount, c.key.AccountID))
	}
	if u := c.usage; u != nil && m.Served {
		attrs = append(attrs, slog.String("model", u.Model), slog.String(logNode, u.NodeID),
			slog.Int("prompt_tokens", u.PromptTokens), slog.Int("completion_tokens", u.CompletionTokens),
			slog.Duration("ttft", u.TTFT), slog.Duration("duration", u.Duration))
	}
	g.log.LogAttrs(ctx, level, "request", attrs...)
}

// requestMetrics is what the metrics record of an ended request.
func requestMetrics(endpoint string, c *call, err error) metrics.Request {
	m := metrics.Request{Endpoint: endpoint, Outcome: refusedOutcome(err)}
	u := c.usage
	if u == nil || u.Outcome == "" || u.NodeID == "" {
		return m // no node took it: the model may be anything the buyer typed, so it is no label
	}
	m.Model, m.Outcome, m.Served = u.Model, u.Outcome, true
	m.Duration, m.TTFT = u.Duration.Seconds(), u.TTFT.Seconds()
	m.PromptTokens, m.Complete = u.PromptTokens, u.CompletionTokens
	return m
}

// refusedOutcome names why a request no node served was refused.
func refusedOutcome(err error) string {
	ae, ok := errors.AsType[*api.Error](err)
	switch {
	case err == nil:
		return store.OutcomeOK
	case !ok:
		return store.OutcomeError
	case ae.Code == api.CodeNoProviderAvailable:
		return "no_provider"
	case ae.Status == http.StatusUnauthorized:
		return "unauthorized"
	case ae.Status == http.StatusPaymentRequired:
		return "payment_required"
	case ae.Status == http.StatusNotFound:
		return "not_found"
	case ae.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case ae == core.ErrBuyerGone:
		return store.OutcomeCancelled
	case ae.Status < 500:
		return "invalid"
	}
	return store.OutcomeError
}
