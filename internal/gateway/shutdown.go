package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
)

// errShuttingDown ends the answers still running when the coordinator's drain deadline passes.
var errShuttingDown = &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: "coordinator_restarting",
	Message: "The coordinator is restarting and could not finish this answer before its drain deadline; only what was delivered is billed. Retry the request."}

// Abort ends every answer still running with a clear error (an error event on a stream, a
// 503 otherwise), each billed for what was delivered, and makes the requests return: the
// coordinator calls it when its drain deadline passes, before it closes connections, so that no
// buyer sees an answer merely cut off.
func (g *Gateway) Abort() { g.stopAll(errShuttingDown) }

// abortable returns r with a context Abort cancels; call release when the request ends.
func (g *Gateway) abortable(r *http.Request) (_ *http.Request, release func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(g.stopping, func() { cancel(context.Cause(g.stopping)) })
	return r.WithContext(ctx), func() {
		stop()
		cancel(nil)
	}
}

// aborted says whether ctx ended because of Abort.
func aborted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errShuttingDown) }

// abort ends an answer Abort stopped mid-job: one that started ends with an error event (or
// error body) and is billed for what was delivered, as when a node fails with none to continue;
// one that had not started costs nothing and gets a 503.
func (g *Gateway) abort(c *call, t *try, st *relay.State, sink relay.Sink, u *store.Usage, work func()) error {
	if st.Started {
		u.TTFT = st.TTFT
		work()
		return g.fail(c, t, sink, u, errShuttingDown)
	}
	u.Outcome, u.Error, u.Duration = store.OutcomeError, errShuttingDown.Message, g.cfg.Now().Sub(c.start)
	g.keepReceipts(c, t, g.cfg.Ledger.Price(c.id, t.bounds, t.parts), u) // then settles
	return errShuttingDown
}
