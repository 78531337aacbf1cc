package mesh

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
	"github.com/shareai/shareai/internal/tracing"
)

// The owner's side: the slots and jobs of this replica's nodes that other replicas ask for.

// onSlot grants a slot of a node this replica holds, at once, or refuses it.
func (m *Mesh) onSlot(msg *nats.Msg) {
	var r slotRequest
	reply := slotReply{}
	if json.Unmarshal(msg.Data, &r) == nil {
		if o := m.localOffer(r.Node, r.Model); o != nil {
			if t, err := tier.Parse(r.Tier); err == nil && o.AcquireFor(t) {
				reply.Token = token()
				g := &grant{offer: o}
				m.mu.Lock()
				m.pending[reply.Token] = g
				m.mu.Unlock()
				tok := reply.Token
				g.timer = time.AfterFunc(slotHold, func() { m.expire(tok) })
			}
		}
	}
	b, _ := json.Marshal(reply)
	msg.Respond(b)
}

// localOffer is the offer of model on a node this replica holds, or nil.
func (m *Mesh) localOffer(node, model string) *fleet.Offer {
	n := m.cfg.Fleet.Node(node)
	if n == nil || n.Owner() != "" || n.Gone() {
		return nil
	}
	for _, o := range n.Offers {
		if o.Model == model {
			return o
		}
	}
	return nil
}

// claim takes a granted slot by its token, or nil when it expired or was never granted.
func (m *Mesh) claim(tok string) *fleet.Offer {
	m.mu.Lock()
	g := m.pending[tok]
	delete(m.pending, tok)
	m.mu.Unlock()
	if g == nil {
		return nil
	}
	g.timer.Stop()
	return g.offer
}

// expire frees a granted slot no job came for.
func (m *Mesh) expire(tok string) {
	if o := m.claim(tok); o != nil {
		o.Release()
	}
}

func (m *Mesh) onRelease(msg *nats.Msg) {
	var r releaseMessage
	if json.Unmarshal(msg.Data, &r) == nil {
		m.expire(r.Token)
	}
}

// owned is a job this replica runs on one of its nodes for another replica, and relays.
type owned struct {
	job    *fleet.Job
	inbox  string
	cancel context.CancelFunc

	mu        sync.Mutex
	allowance int           // deltas the asking replica's reader may take still
	more      chan struct{} // signalled when allowance grows
	heard     time.Time     // when the asking replica last said something of the job
}

// onJob runs a job on a granted slot and relays its frames to the asking replica's inbox.
func (m *Mesh) onJob(msg *nats.Msg) {
	var r jobRequest
	fail := func(why string) {
		b, _ := json.Marshal(jobReply{Error: why})
		msg.Respond(b)
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Request == nil || !fleet.ValidJobID(r.Job) ||
		r.Inbox != m.subject(r.From, "frames."+r.Job) {
		fail("bad job request")
		return
	}
	o := m.claim(r.Token)
	if o == nil {
		fail("no slot: it expired, or was never granted")
		return
	}
	ctx, cancel := context.WithCancel(tracing.Extract(context.Background(), r.Trace))
	job, err := m.cfg.Fleet.DispatchAs(ctx, o, r.Request, r.Job) // the node's receipt names the job as the asking replica knows it
	if err != nil {
		cancel()
		fail(err.Error())
		return
	}
	w := &owned{job: job, inbox: r.Inbox, cancel: cancel, allowance: protocol.Window, more: make(chan struct{}, 1), heard: time.Now()}
	m.mu.Lock()
	m.owned[r.Job] = w
	m.mu.Unlock()
	b, _ := json.Marshal(jobReply{})
	msg.Respond(b)
	go m.pump(ctx, r.Job, w)
}

// receiptWait bounds how long a job's end waits for its receipt, when the node signs it in a
// batch after the end.
const receiptWait = time.Second

// pump relays a job's frames to its asking replica, no more deltas ahead of its reader than
// the reader's credit: the node's window, passed on.
func (m *Mesh) pump(ctx context.Context, id string, w *owned) {
	defer func() {
		m.mu.Lock()
		delete(m.owned, id)
		m.mu.Unlock()
		w.cancel()
	}()
	orphan := time.NewTicker(orphanAfter / 2)
	defer orphan.Stop()
	for seq := 0; ; seq++ {
		for w.wait() {
			select {
			case <-w.more:
			case <-orphan.C:
				w.checkOrphan(m)
			case <-m.done:
				w.job.Cancel()
				return
			}
		}
		fr, err := w.job.Next(ctx)
		if err != nil {
			return
		}
		if fr.Type == protocol.TypeEnd && fr.End != nil {
			// The node's receipt, for the asking replica to countersign: a batched one comes
			// within milliseconds of the end.
			rctx, cancel := context.WithTimeout(ctx, receiptWait)
			if signed, _, ok := w.job.AwaitReceipt(rctx); ok {
				fr.End.Receipt = signed
			}
			cancel()
		}
		leaving := fr.Type == protocol.TypeEnd && fr.End != nil && fr.End.Error != nil && m.leaving.Load()
		b, _ := json.Marshal(frameMessage{Seq: seq, Frame: fr, Leaving: leaving})
		if err := m.nc.Publish(w.inbox, b); err != nil {
			w.job.Cancel() // the bus is down: the asking replica fails it over
		}
		if fr.Type == protocol.TypeEnd {
			return
		}
		w.mu.Lock()
		w.allowance--
		w.mu.Unlock()
		select {
		case <-orphan.C:
			w.checkOrphan(m)
		default:
		}
	}
}

// wait says whether the pump must wait for credit.
func (w *owned) wait() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.allowance <= 0
}

// checkOrphan cancels a job whose asking replica has been silent for orphanAfter: it died.
func (w *owned) checkOrphan(m *Mesh) {
	w.mu.Lock()
	silent := time.Since(w.heard) > orphanAfter
	w.mu.Unlock()
	if silent {
		m.log.Warn("mesh: the replica that asked for a job is silent; cancelling it", "job", w.job.ID)
		w.job.Cancel()
		w.mu.Lock()
		w.allowance = protocol.Window + 2 // let its end through
		w.mu.Unlock()
		select {
		case w.more <- struct{}{}:
		default:
		}
	}
}

// onControl takes what an asking replica's reader did of a job this replica runs for it.
func (m *Mesh) onControl(msg *nats.Msg) {
	var c controlMessage
	if json.Unmarshal(msg.Data, &c) != nil {
		return
	}
	m.mu.Lock()
	w := m.owned[c.Job]
	m.mu.Unlock()
	if msg.Reply != "" {
		// A keepalive: the answer says whether the job still runs here.
		b, _ := json.Marshal(jobReply{Error: map[bool]string{true: "", false: "no such job"}[w != nil]})
		msg.Respond(b)
	}
	if w == nil {
		return
	}
	w.mu.Lock()
	w.heard = time.Now()
	if fleet.Control(c.Kind) == fleet.Credit && c.N > 0 && c.N <= protocol.Window {
		w.allowance += c.N
	}
	w.mu.Unlock()
	switch fleet.Control(c.Kind) {
	case fleet.Credit:
		select {
		case w.more <- struct{}{}:
		default:
		}
	case fleet.Cancel:
		w.job.Cancel()
	case fleet.Preempt:
		w.job.Preempt()
	}
}
