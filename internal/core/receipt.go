package core

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/store"
)

// keepReceipts hands the receipts of a request's jobs, those whose end frame has come, to the
// notary, which countersigns them and queues the request's bill with them (nil: nothing to
// settle; then it stores them itself), so that a request's receipts are stored in the
// transaction of its usage row. A job whose end comes
// later (one cancelled after a stall) goes without a receipt. An unbilled request keeps
// nothing: its jobs earn nothing, and no usage of it is recorded.
func (c *Core) keepReceipts(ctx context.Context, r *Request, bill *ledger.Bill) {
	r.ended.Store(true) // a checkpoint still queued says less than this
	r.kept = true
	if r.Unbilled {
		return
	}
	u := r.usage
	traceBill(trace.SpanFromContext(ctx), bill, len(r.ran))
	var jobs []jobReceipt
	for _, j := range r.ran {
		if signed, saw, ok := j.Receipt(); ok {
			jobs = append(jobs, jobReceipt{signed: signed, saw: saw})
		} else if j.ReceiptPending() {
			jobs = append(jobs, jobReceipt{job: j})
		}
	}
	if len(jobs) == 0 {
		// No receipt to wait for: an agent older than receipts, or no job ended.
		if bill != nil {
			c.notary.settle(bill, u)
		}
		return
	}
	c.notary.queue(&notarized{requestID: r.ID, jobs: jobs, bill: bill, usage: u})
}

// jobReceipt is a node's signed receipt of a job, and what the coordinator saw of the job; or
// the job, whose receipt follows its end.
type jobReceipt struct {
	job    *fleet.Job // set while the receipt is to come
	signed json.RawMessage
	saw    receipt.Expected
}

// notarized is one request's receipts, to countersign and store before its bill is settled.
type notarized struct {
	requestID string
	jobs      []jobReceipt
	bill      *ledger.Bill // nil: nothing to settle
	usage     *store.Usage
}

// pending says whether a receipt of the request's jobs is still to come.
func (item *notarized) pending() bool {
	return slices.ContainsFunc(item.jobs, func(j jobReceipt) bool { return j.job != nil })
}

// await waits until ctx is done for the receipts to come that follow their jobs' ends.
func (item *notarized) await(ctx context.Context) {
	for i := range item.jobs {
		j := &item.jobs[i]
		if j.job != nil {
			j.signed, j.saw, _ = j.job.AwaitReceipt(ctx)
			if j.signed == nil {
				j.saw.JobID, j.saw.NodeID = j.job.ID, j.job.Offer.Node.ID // for the log
			}
			j.job = nil
		}
	}
}

// receiptWait bounds how long the notary waits for a receipt that follows its job's end: a
// node signs them in batches within milliseconds; one that holds them back delays only its
// own requests' bills, by this much, and they are kept without its receipts.
const receiptWait = 2 * time.Second

// maxNotaryBatch bounds the requests whose receipts are countersigned under one signature.
const maxNotaryBatch = 256

// notaryLinger is how long a batch waits for more requests to share its signature: under
// load a batch fills while the last one is signed, but one request at a time would otherwise
// cost an ed25519 verification and signature each (c=1: about 5% of the path's CPU). Only
// the bills wait, which go to the ledger's settlement queue after.
const notaryLinger = 5 * time.Millisecond

// notary countersigns jobs' receipts on its own goroutine: the checks and signatures (a
// verification per node batch, a signature per batch of its own) stay off the buyers'
// requests. Then the requests' bills go to the ledger's settlement queue carrying them (store.Settlement.Receipts), so a request's
// receipts are stored in its settlement's transaction, with its usage row.
//
// A receipt whose node signature fails, or whose claim differs from what the coordinator saw
// (receipt.Countersign's checks), is not countersigned nor stored: it is logged as a warning
// with the node and the differences, and the node is flagged in the request's settlement,
// which counts one more over-claim against it (store.Node.Overclaims; reputation, planned,
// will weigh it).
//
// Receipts queued and not yet stored are lost in a crash, with the bills queued after them
// (whose holds the next start recovers): receipts are a record for buyers, not money.
type notary struct {
	signer *receipt.Countersigner
	store  store.Store
	settle func(*ledger.Bill, *store.Usage) // the ledger's SettleLater
	log    *slog.Logger
	now    func() time.Time
	in     chan *notarized

	mu      sync.RWMutex // guards closed against queue racing close
	closed  bool
	waiting sync.WaitGroup // requests waiting for receipts that follow their jobs' ends
	done    chan struct{}
}

func newNotary(key ed25519.PrivateKey, st store.Store, settle func(*ledger.Bill, *store.Usage), log *slog.Logger, now func() time.Time) *notary {
	signer, err := receipt.NewCountersigner(key)
	if err != nil {
		panic(err) // New made or checked the key
	}
	n := &notary{signer: signer, store: st, settle: settle, log: log, now: now,
		in: make(chan *notarized, 4*maxNotaryBatch), done: make(chan struct{})}
	go n.run()
	return n
}

// queue hands a request's receipts to the notary and returns at once: when some are still to
// come, a goroutine waits for them (receiptWait at most) and hands them on. Once the notary
// has closed, the receipts are dropped (logged) and the bill goes to the ledger at once.
func (n *notary) queue(item *notarized) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	switch {
	case n.closed:
		n.log.Warn("receipts not stored: the coordinator is shutting down", logRequestID, item.requestID, "receipts", len(item.jobs))
		if item.bill != nil {
			n.settle(item.bill, item.usage)
		}
	case item.pending():
		n.waiting.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), receiptWait)
			defer cancel()
			item.await(ctx)
			n.in <- item // close waits for this goroutine before it closes in
		})
	default:
		n.in <- item
	}
}

// close stores what is queued, hands the bills on, and stops. Call it before the ledger's
// Close, and after the fleet's, whose sessions' end stops the waits for receipts.
func (n *notary) close() {
	n.mu.Lock()
	closing := !n.closed
	n.closed = true
	n.mu.Unlock()
	if closing {
		n.waiting.Wait() // no queue adds one now: closed is set
		close(n.in)
	}
	<-n.done
}

func (n *notary) run() {
	defer close(n.done)
	batch := make([]*notarized, 0, maxNotaryBatch)
	linger := time.NewTimer(notaryLinger)
	defer linger.Stop()
	for item := range n.in {
		batch = append(batch[:0], item)
		linger.Reset(notaryLinger)
	gather:
		for len(batch) < maxNotaryBatch {
			select {
			case item, ok := <-n.in:
				if !ok {
					break gather
				}
				batch = append(batch, item)
			case <-linger.C:
				break gather
			}
		}
		n.commit(batch)
	}
}

// commit countersigns a batch of requests' receipts under one signature, then queues the
// requests' bills with them.
func (n *notary) commit(batch []*notarized) {
	type job struct {
		item *notarized
		cs   *receipt.Countersigning
	}
	var jobs []job
	var cs []*receipt.Countersigning
	for _, item := range batch {
		for _, j := range item.jobs {
			if j.signed == nil {
				n.log.Info("no receipt from the node for a job: its end said one would follow", logRequestID, item.requestID,
					logNode, j.saw.NodeID, "job", j.saw.JobID)
				continue
			}
			c := &receipt.Countersigning{Signed: new(receipt.Signed), Saw: j.saw, RequestID: item.requestID}
			if err := c.Signed.UnmarshalJSON(j.signed); err != nil { // not json.Unmarshal: it would scan the receipt once more first
				c.Err = fmt.Errorf("not a signed receipt: %w", err)
			} else {
				cs = append(cs, c)
			}
			jobs = append(jobs, job{item, c})
		}
	}
	if err := n.signer.Countersign(cs, n.now()); err != nil {
		n.log.Error("countersign receipts", "receipts", len(cs), "err", err)
		for _, c := range cs {
			c.Err = err
		}
	}
	rs := map[*notarized][]*store.Receipt{}
	for _, j := range jobs {
		item, c := j.item, j.cs
		if c.Err != nil {
			n.log.Warn("node's receipt refused: not countersigned", logRequestID, item.requestID, logNode, c.Saw.NodeID,
				"job", c.Saw.JobID, "err", c.Err)
			if item.bill != nil && !slices.Contains(item.bill.Settlement.Flagged, c.Saw.NodeID) {
				item.bill.Settlement.Flagged = append(item.bill.Settlement.Flagged, c.Saw.NodeID)
			}
			continue
		}
		b, err := c.Signed.MarshalJSON()
		if err != nil {
			n.log.Error("encode receipt", logRequestID, item.requestID, "job", c.Saw.JobID, "err", err)
			continue
		}
		rs[item] = append(rs[item], &store.Receipt{RequestID: item.requestID, JobID: c.Saw.JobID, NodeID: c.Saw.NodeID, Signed: b, CreatedAt: c.Saw.Sent})
	}
	// A billed request's receipts go in its settlement's transaction, before its usage record;
	// the others' (nothing to settle) in one transaction of their own.
	var alone []*store.Receipt
	for _, item := range batch {
		if item.bill == nil {
			alone = append(alone, rs[item]...)
		}
	}
	if err := n.store.InsertReceipts(context.Background(), alone); err != nil {
		n.log.Error("store receipts", "receipts", len(alone), "err", err)
	}
	for _, item := range batch {
		if item.bill != nil {
			item.bill.Settlement.Receipts = rs[item]
			n.settle(item.bill, item.usage)
		}
	}
}
