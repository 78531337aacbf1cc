package core

import (
	"context"
	"errors"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
)

// ErrShuttingDown ends the answers still running when the coordinator's drain deadline passes
// (Abort).
var ErrShuttingDown = &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: "coordinator_restarting",
	Message: "The coordinator is restarting and could not finish this answer before its drain deadline; only what was delivered is billed. Retry the request."}

// ErrBuyerGone answers a request whose buyer went away before a node took it: nobody reads
// it, but the metrics and logs count it as cancelled (499, as proxies log a client that
// closed its request).
var ErrBuyerGone = &api.Error{Status: 499, Type: api.TypeInvalidRequest, Code: "request_cancelled",
	Message: "The request was cancelled before a node took it."}

// ErrUnfunded is what a Request's Fund returns when it cannot top the account up: the request
// then runs unbilled.
var ErrUnfunded = errors.New("the account cannot be funded")

// aborted says whether ctx ended because of Abort.
func aborted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrShuttingDown) }

// abort ends an answer Abort stopped mid-job. A stream that started ends with an error event
// and is billed for what reached the buyer, as when a node fails with none to continue it. A
// stream that had not started, or an answer not streamed (whose text the buyer never gets),
// costs nothing and gets a 503: the nodes' work is lost, as the coordinator's fault.
func (c *Core) abort(ctx context.Context, r *Request, st *relay.State, sink relay.Sink, work func()) error {
	u := r.usage
	if st.Started && u.Stream {
		u.TTFT = st.TTFT
		work()
		return c.fail(ctx, r, sink, ErrShuttingDown)
	}
	u.Outcome, u.Error, u.Duration = store.OutcomeError, ErrShuttingDown.Message, c.cfg.Now().Sub(r.Start)
	c.keepReceipts(ctx, r, c.price(r, nil)) // then settles
	return ErrShuttingDown
}
