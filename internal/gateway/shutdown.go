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

// errBuyerGone answers a request whose buyer went away before a node took it: nobody reads
// it, but the metrics and logs count it as cancelled (499, as proxies log a client that
// closed its request).
var errBuyerGone = &api.Error{Status: 499, Type: api.TypeInvalidRequest, Code: "request_cancelled",
	Message: "The request was cancelled before a node took it."}

// Abort ends every answer still running with a clear error (an error event on a stream, a
// 503 otherwise), each billed for what was delivered, and makes the requests return: the
// coordinator calls it when its drain deadline passes, before it closes connections, so that no
// buyer sees an answer merely cut off.
func (g *Gateway) Abort() { g.stopAll(errShuttingDown) }

// abortable returns r with a context Abort cancels, and counts the request in flight until
// release is called, when it ends.
func (g *Gateway) abortable(r *http.Request) (_ *http.Request, release func()) {
	g.inflight.Add(1)
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(g.stopping, func() { cancel(context.Cause(g.stopping)) })
	return r.WithContext(ctx), func() {
		stop()
		cancel(nil)
		g.inflight.Done()
	}
}

// Wait waits until no inference request is being served, or ctx is done: every request has
// then handed its bill to the ledger. The coordinator calls it before it closes the ledger,
// for requests the HTTP server stopped waiting for.
func (g *Gateway) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// aborted says whether ctx ended because of Abort.
func aborted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errShuttingDown) }

// abort ends an answer Abort stopped mid-job. A stream that started ends with an error event
// and is billed for what reached the buyer, as when a node fails with none to continue it. A
// stream that had not started, or an answer not streamed (whose text the buyer never gets),
// costs nothing and gets a 503: the nodes' work is lost, as the coordinator's fault.
func (g *Gateway) abort(c *call, t *try, st *relay.State, sink relay.Sink, u *store.Usage, work func()) error {
	if st.Started && u.Stream {
		u.TTFT = st.TTFT
		work()
		return g.fail(c, t, sink, u, errShuttingDown)
	}
	u.Outcome, u.Error, u.Duration = store.OutcomeError, errShuttingDown.Message, g.cfg.Now().Sub(c.start)
	g.keepReceipts(c, t, g.cfg.Ledger.Price(c.id, t.bounds, nil), u) // then settles
	return errShuttingDown
}
