package gateway

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/store"
)

// The receipt endpoints:
//
//	GET /v1/generation/receipts?id=ID   the receipts of one of the caller's requests:
//	                                    {"receipts": [signed receipt, ...]}, one per job
//	GET /v1/receipts/key                the key the coordinator countersigns with (no key needed):
//	                                    {"key": "<base64>", "algorithm": "ed25519"}
//
// 'shareai receipt verify' reads the first's answer as it is, and pins the second's key.
func (g *Gateway) registerReceipts(mux *http.ServeMux) {
	mux.Handle("GET /v1/generation/receipts", g.handle(g.receipts))
	mux.HandleFunc("GET /v1/receipts/key", g.receiptKey)
}

// Receipts is GET /v1/generation/receipts's answer.
type Receipts struct {
	// Receipts are receipt.Signed, as stored: in the order of the request's jobs.
	Receipts []json.RawMessage `json:"receipts"`
}

func (g *Gateway) receipts(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		return api.BadRequest("id", api.CodeInvalidValue, "Missing id: GET /v1/generation/receipts?id=ID, with the id of a completion (chatcmpl-…, cmpl-…) or the X-Request-Id of a request (req_…).")
	}
	u, err := g.usageOf(r, c, id)
	if err != nil {
		return err
	}
	rs, err := g.cfg.Store.Receipts(r.Context(), u.RequestID)
	if err != nil {
		return fmt.Errorf("receipts of %s: %w", u.RequestID, err)
	}
	out := Receipts{Receipts: make([]json.RawMessage, 0, len(rs))}
	for _, rc := range rs {
		out.Receipts = append(out.Receipts, rc.Signed)
	}
	return writeJSON(w, out)
}

// ReceiptKey is GET /v1/receipts/key's answer.
type ReceiptKey struct {
	Key       string `json:"key"` // standard base64, padded
	Algorithm string `json:"algorithm"`
}

func (g *Gateway) receiptKey(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, ReceiptKey{Key: base64.StdEncoding.EncodeToString(g.notary.key.Public().(ed25519.PublicKey)), Algorithm: "ed25519"})
}

// keepReceipts hands the receipts of a request's jobs, those whose end frame has come, to the
// notary, which countersigns and stores them, then queues the request's bill (nil: nothing to
// settle), so that a request's receipts are stored before its usage row. A job whose end comes
// later (one cancelled after a stall) goes without a receipt.
func (g *Gateway) keepReceipts(c *call, t *try, bill *ledger.Bill, u *store.Usage) {
	t.ended.Store(true) // a checkpoint still queued says less than this
	traceBill(c.span, bill, len(t.ran))
	var jobs []jobReceipt
	for _, j := range t.ran {
		if signed, saw, ok := j.Receipt(); ok {
			jobs = append(jobs, jobReceipt{signed, saw})
		}
	}
	if len(jobs) == 0 {
		// No receipt to wait for: an agent older than receipts, or no job ended.
		if bill != nil {
			g.notary.settle(bill, u)
		}
		return
	}
	g.notary.queue(&notarized{requestID: c.id, jobs: jobs, bill: bill, usage: u})
}

// jobReceipt is a node's signed receipt of a job, and what the coordinator saw of the job.
type jobReceipt struct {
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

// maxNotaryBatch bounds the requests whose receipts are stored in one transaction.
const maxNotaryBatch = 256

// notary countersigns jobs' receipts and stores them, on its own goroutine: the checks and
// signatures (two ed25519 operations a job) and the database write stay off the buyers'
// requests. Under load many requests' receipts share one transaction; then the requests' bills
// go to the ledger's settlement queue, so a request's receipts are stored before its usage row.
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
	key    ed25519.PrivateKey
	store  store.Store
	settle func(*ledger.Bill, *store.Usage) // the ledger's SettleLater
	log    *slog.Logger
	now    func() time.Time
	in     chan *notarized

	mu     sync.RWMutex // guards closed against queue racing close
	closed bool
	done   chan struct{}
}

func newNotary(key ed25519.PrivateKey, st store.Store, settle func(*ledger.Bill, *store.Usage), log *slog.Logger, now func() time.Time) *notary {
	n := &notary{key: key, store: st, settle: settle, log: log, now: now,
		in: make(chan *notarized, 4*maxNotaryBatch), done: make(chan struct{})}
	go n.run()
	return n
}

// queue hands a request's receipts to the notary and returns at once. Once the notary has
// closed, the receipts are dropped (logged) and the bill goes to the ledger at once.
func (n *notary) queue(item *notarized) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.log.Warn("receipts not stored: the coordinator is shutting down", logRequestID, item.requestID, "receipts", len(item.jobs))
		if item.bill != nil {
			n.settle(item.bill, item.usage)
		}
		return
	}
	n.in <- item
}

// close stores what is queued, hands the bills on, and stops. Call it before the ledger's Close.
func (n *notary) close() {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.in)
	}
	n.mu.Unlock()
	<-n.done
}

func (n *notary) run() {
	defer close(n.done)
	batch := make([]*notarized, 0, maxNotaryBatch)
	for item := range n.in {
		batch = append(batch[:0], item)
	drain:
		for len(batch) < maxNotaryBatch {
			select {
			case item, ok := <-n.in:
				if !ok {
					break drain
				}
				batch = append(batch, item)
			default:
				break drain
			}
		}
		n.commit(batch)
	}
}

// commit countersigns and stores a batch of requests' receipts in one transaction, then queues
// their bills.
func (n *notary) commit(batch []*notarized) {
	var rs []*store.Receipt
	for _, item := range batch {
		for _, j := range item.jobs {
			rec, err := n.countersign(item.requestID, j)
			if err != nil {
				n.log.Warn("node's receipt refused: not countersigned", logRequestID, item.requestID, logNode, j.saw.NodeID,
					"job", j.saw.JobID, "err", err)
				if item.bill != nil && !slices.Contains(item.bill.Settlement.Flagged, j.saw.NodeID) {
					item.bill.Settlement.Flagged = append(item.bill.Settlement.Flagged, j.saw.NodeID)
				}
				continue
			}
			rs = append(rs, rec)
		}
	}
	if err := n.store.InsertReceipts(context.Background(), rs); err != nil {
		n.log.Error("store receipts", "receipts", len(rs), "err", err)
	}
	for _, item := range batch {
		if item.bill != nil {
			n.settle(item.bill, item.usage)
		}
	}
}

// countersign checks a node's receipt against what the coordinator saw and countersigns it for
// the request.
func (n *notary) countersign(requestID string, j jobReceipt) (*store.Receipt, error) {
	var s receipt.Signed
	if err := json.Unmarshal(j.signed, &s); err != nil {
		return nil, fmt.Errorf("not a signed receipt: %w", err)
	}
	if err := receipt.Countersign(n.key, &s, j.saw, requestID, n.now()); err != nil {
		return nil, err
	}
	b, err := json.Marshal(&s)
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	return &store.Receipt{RequestID: requestID, JobID: j.saw.JobID, NodeID: j.saw.NodeID, Signed: b, CreatedAt: j.saw.Sent}, nil
}
