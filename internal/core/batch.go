package core

import (
	"net/http"

	"github.com/shareai/shareai/internal/api"
)

// Batch lines (Request.Batch) are bronze work that fills idle capacity: the batch runner
// (internal/batch) runs each through Serve. A line's first job takes a slot only when no live
// request waits for the model and one is free; otherwise Serve returns ErrNoCapacity at once
// and the runner tries again once the fleet changes. Any live request that waits preempts a
// batch job (queue.go, preempt), and the line continues exactly, waiting after every live
// request (queue.JoinBatch).

// ErrNoCapacity is Serve's error for a batch line's first job when no slot is idle for it: a
// live request waits for the model, or every node that fits is busy. Nothing was held.
var ErrNoCapacity = &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
	Message: "No idle capacity for batch work now: live requests come first."}

// multiplier is the request's price multiplier on nodes' asks, in basis points: the batch
// price for a batch line, else its tier's.
func (c *Core) multiplier(r *Request) int64 {
	if r.Batch {
		return c.cfg.BatchPrice
	}
	return c.cfg.TierPrices.Of(r.tier)
}

// liveWaiting says whether a batch line's first job must give way: a live request waits for
// one of its models.
func (c *Core) liveWaiting(r *Request) bool {
	if !r.Batch || r.jobs > 0 || c.queue.Empty() {
		return false
	}
	for _, m := range r.models {
		if c.queue.Live(c.ResolveModel(m)) > 0 {
			return true
		}
	}
	return false
}

// BatchJobs returns how many batch lines' jobs this core runs now, by model.
func (c *Core) BatchJobs() map[string]int { return c.batch.count() }
