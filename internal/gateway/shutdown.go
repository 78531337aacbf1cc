package gateway

import "context"

// Abort ends every answer still running with a clear error (an error event on a stream, a
// 503 otherwise), each billed for what was delivered, and makes the requests return: the
// coordinator calls it when its drain deadline passes, before it closes connections, so that no
// buyer sees an answer merely cut off (core.Abort).
func (g *Gateway) Abort() { g.core.Abort() }

// Wait waits until no request is being served, or ctx is done: every request has then handed
// its bill to the ledger (core.Wait). The coordinator calls it before it closes the ledger,
// for requests the HTTP server stopped waiting for.
func (g *Gateway) Wait(ctx context.Context) error { return g.core.Wait(ctx) }
