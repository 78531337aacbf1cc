package gateway

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/store"
)

// handleInference serves an inference endpoint (chat or completion) as handle does, and counts
// each request in the metrics with its outcome, whether a node served it or it was refused
// before.
func (g *Gateway) handleInference(endpoint string, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel, release := g.core.Track(r.Context()) // a shutdown's drain covers the request from here
		defer release()
		c, err := g.call(ctx, cancel, w, r, store.KeyBuyer, g.cfg.MaxBodyBytes, fn)
		g.ended(endpoint, c, err)
	})
}

// ended counts and logs an inference request that ended. It is a function of its own so that
// its locals are not in the frame of the handler, which stays on the stack of every stream
// held open.
//
//go:noinline
func (g *Gateway) ended(endpoint string, c *call, err error) {
	m := core.RequestMetrics(endpoint, c.usage, err)
	g.cfg.Metrics.RequestEnded(m)
	g.logRequest(c.ctx, c, m)
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
