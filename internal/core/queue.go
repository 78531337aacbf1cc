package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/tier"
)

// The admission queue: when every node that fits a request is busy (or paused for now), the
// request waits for a slot instead of failing, up to the queue's deadline and never past its
// buyer's disconnect. A slot about to be freed is handed to the first waiter in line that it
// fits (fleet.SetHandoff → queue.Hand): gold first, then continuations of answers already
// started, then by arrival. A gold request that waits may preempt a bronze job: the bronze
// answer pauses and continues exactly once a slot frees.

// recheckEvery is how often a waiting request looks for a free node itself, besides being
// handed a slot and the fleet's changes: for capacity that appears without a slot being freed
// (a node's gold slots, a node unpaused).
const recheckEvery = time.Second

// handoff offers a slot about to be freed to the queue (fleet.SetHandoff), unless its node
// is gone: the slots of a node whose connection ended free as its jobs fail. The waiters judge
// it by its candidate, read once.
func (c *Core) handoff(o *fleet.Offer) bool {
	if c.queue.Empty() || o.Node.Gone() {
		return false
	}
	cand := freed(o)
	return c.queue.Hand(o.Model, o, &cand)
}

// freed is the candidate of an offer one of whose slots is being freed, as a waiter would see
// it once the slot is free.
func freed(o *fleet.Offer) matcher.Candidate {
	c := o.Candidate()
	c.Running--
	return c
}

// waitable says whether waiting may get the request a node of model: some node that fits it
// is only busy, paused for now, or not verified yet; or every node serving it left a moment
// ago (dropped connections come back within seconds).
func (c *Core) waitable(model string, err error) bool {
	np, ok := errors.AsType[*matcher.NoProvider](err)
	if !ok {
		return false
	}
	if np.Serving == 0 {
		return c.servedRecently(model)
	}
	return np.Reasons[matcher.ReasonBusy]+np.Reasons[matcher.ReasonPaused]+np.Reasons[matcher.ReasonUnverified] > 0
}

// fits returns whether a slot about to be freed, by its candidate (freed), may go to a request:
// the request would pick the node were the slot free, and the node's cost fits its hold.
func (c *Core) fits(mreq matcher.Request, req *protocol.Request, r *Request) func(*matcher.Candidate) bool {
	fit := matcher.NewFit(mreq)
	return func(cand *matcher.Candidate) bool {
		return fit.Admits(cand) && (r.held == 0 || c.maxCost(*cand, req, r) <= r.held)
	}
}

// wait queues the request for a slot of model, for which pick found every node that fits it
// busy, and returns the candidate whose slot it got. pick looks for a free node again.
func (c *Core) wait(ctx context.Context, r *Request, model string, mreq matcher.Request, req *protocol.Request, pick func() (matcher.Candidate, error)) (matcher.Candidate, error) {
	start := c.cfg.Now()
	var (
		tk  *queue.Ticket[*fleet.Offer, *matcher.Candidate]
		err error
	)
	if r.Batch {
		tk, err = c.queue.JoinBatch(model, r.queueKey(), c.fits(mreq, req, r), start)
	} else {
		tk, err = c.queue.Join(model, r.queueKey(), r.tier, r.continuing, c.fits(mreq, req, r), start)
	}
	if err != nil {
		c.cfg.Metrics.QueueWaited(r.tier.String(), "full", 0)
		return matcher.Candidate{}, queueFull(err)
	}
	c.cfg.Metrics.Queued(r.tier.String(), 1)
	result := "served"
	defer func() {
		waited := c.cfg.Now().Sub(start)
		r.queued += waited
		c.cfg.Metrics.Queued(r.tier.String(), -1)
		c.cfg.Metrics.QueueWaited(r.tier.String(), result, waited.Seconds())
	}()
	deadline := time.NewTimer(c.queue.Config().Timeout)
	defer deadline.Stop()
	if r.Batch {
		deadline.Stop() // a batch line waits as long as its batch may run (ctx)
	}
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
	var preempted *fleet.Job // the batch or bronze job this request stopped, until it ends
	for {
		changed := c.cfg.Fleet.Changed()
		// Look again once in line: a slot freed before the ticket joined is free now.
		cand, err := pick()
		if err == nil {
			if o, ok := tk.Leave(); ok {
				o.Release() // handed one meanwhile: keep the one picked, free the other
			}
			return cand, nil
		}
		if !c.waitable(model, err) {
			if o, ok := tk.Leave(); ok {
				return o.Candidate(), nil
			}
			result = "failed"
			return matcher.Candidate{}, err
		}
		if !r.Batch && (preempted == nil || preempted.Ended()) {
			preempted = c.preempt(model, tk, r.tier == tier.Gold)
		}
		select {
		case o := <-tk.Ready():
			return o.Candidate(), nil
		case <-changed:
		case <-recheck.C:
		case <-deadline.C:
			if o, ok := tk.Leave(); ok {
				return o.Candidate(), nil
			}
			result = "timeout"
			if c.cfg.Fleet.Joining() {
				err = fmt.Errorf("%w; this coordinator does not have the other replicas' nodes in view yet", err)
			}
			return matcher.Candidate{}, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable, RetryAfter: 2,
				Message: fmt.Sprintf("No node could take this request within %s in the queue (%v). Retry shortly.", c.queue.Config().Timeout, err)}
		case <-ctx.Done():
			if o, ok := tk.Leave(); ok {
				o.Release()
			}
			result = "gone"
			if aborted(ctx) {
				return matcher.Candidate{}, ErrShuttingDown
			}
			return matcher.Candidate{}, ErrBuyerGone
		}
	}
}

func queueFull(err error) error {
	return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable, RetryAfter: 2,
		Message: fmt.Sprintf("Every node that fits this request is busy and the queue is full: %v. Retry shortly.", err)}
}

// bronzeJobs are the bronze jobs running, by model, newest last: what gold may preempt.
type bronzeJobs struct {
	mu sync.Mutex
	m  map[string][]*fleet.Job
}

// running records a bronze job until the func it returns is called.
func (b *bronzeJobs) running(j *fleet.Job) (done func()) {
	model := j.Offer.Model
	b.mu.Lock()
	if b.m == nil {
		b.m = make(map[string][]*fleet.Job)
	}
	b.m[model] = append(b.m[model], j)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if js := slices.DeleteFunc(b.m[model], func(x *fleet.Job) bool { return x == j }); len(js) > 0 {
			b.m[model] = js
		} else {
			delete(b.m, model)
		}
	}
}

// count returns how many jobs b holds, by model.
func (b *bronzeJobs) count() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := make(map[string]int, len(b.m))
	for model, js := range b.m {
		n[model] = len(js)
	}
	return n
}

// preempt stops the newest batch job of model on a node whose freed slot the waiting live
// request would take, or for a gold request (gold) the newest bronze one, and returns it; nil
// when there is none. Only jobs of nodes that continue answers are preempted: the answer must
// be able to go on where it stopped.
func (c *Core) preempt(model string, tk *queue.Ticket[*fleet.Offer, *matcher.Candidate], gold bool) *fleet.Job {
	if j := c.batch.preempt(c, model, tk); j != nil || !gold {
		return j
	}
	return c.bronze.preempt(c, model, tk)
}

// preempt stops the newest job of model among b's on a node whose freed slot tk would take.
func (b *bronzeJobs) preempt(c *Core, model string, tk *queue.Ticket[*fleet.Offer, *matcher.Candidate]) *fleet.Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	js := b.m[model]
	for i := len(js) - 1; i >= 0; i-- {
		j := js[i]
		if !j.Offer.Continues || j.Preempted() {
			continue
		}
		if cand := freed(j.Offer); tk.Fits(&cand) && j.Preempt() {
			c.cfg.Metrics.Preempted()
			c.log.Info("preempted a job for a waiting request", logNode, j.Offer.Node.ID, "job", j.ID, "batch", b == &c.batch)
			return j
		}
	}
	return nil
}

// queueKey is whom the queue's per-key bound counts the request against: its key, or its
// account when it has none.
func (r *Request) queueKey() string {
	if r.Batch {
		return "batch:" + r.Account // batch lines do not fill their key's live bound
	}
	if r.Key != nil {
		return r.Key.ID
	}
	return "account:" + r.Account
}
