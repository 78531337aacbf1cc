package fleet

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/tracing"
)

// ErrOverflow ends a job whose node sent more deltas than its credit allowed.
var ErrOverflow = errors.New("node exceeded its flow-control window")

// Job is one request's work on one node, seen from the coordinator.
type Job struct {
	ID    string
	Offer *Offer

	sess  *session          // the node's session: nil for a remote job
	peers Peers             // reaches the owner of a remote job's node
	key   ed25519.PublicKey // a remote job's node's key, as its owner published it
	model string            // as the job asked the node for it
	sent  time.Time         // when the job was dispatched
	// preempted says the coordinator cancelled the job to give its slot to a gold request.
	preempted atomic.Bool
	// ready is signalled when a frame is put in the inbox: the reader waits on it.
	ready chan struct{}
	// output hashes every delta received from the node, for the job's receipt. Only the
	// session's reader touches it.
	output receipt.Hasher

	mu sync.Mutex
	// inbox holds the frames from the node not taken yet, from head: deltas then one end. It
	// never blocks the session's reader, and it grows only as far as the buyer lags behind the
	// node (the window bounds it), so an open stream costs no buffer of a full window. One
	// reader takes from it (the relay, or the prober): ready wakes that one.
	inbox   []protocol.Frame
	head    int
	held    int // bytes of the deltas in the inbox, at most maxInboxBytes
	ended   bool
	unacked int // deltas taken by the reader but not yet acknowledged with credit
	// The node's receipt, from its end frame or the receipt frame after it, and what the
	// coordinator saw of the job.
	signed json.RawMessage
	saw    receipt.Expected
	// receiptDone, for an end whose receipt follows (End.ReceiptFollows), is closed once the
	// receipt frame came, or once it will not (the session ended, or AwaitReceipt gave up);
	// nil for any other end. receiptClosed says it is closed.
	receiptDone   chan struct{}
	receiptClosed bool
}

// Dispatch sends a request to the node of an offer whose slot the caller has acquired. The slot
// is released when the job ends, on whatever path. The job frame carries the trace context of
// ctx's span, if any: the agent's span of the job becomes its child.
func (f *Fleet) Dispatch(ctx context.Context, o *Offer, req *protocol.Request) (*Job, error) {
	if o.Node.remote != nil {
		return f.dispatchRemote(ctx, o, req)
	}
	return f.DispatchAs(ctx, o, req, newJobID())
}

// newJobID makes a job's id.
func newJobID() string {
	var b [12]byte
	rand.Read(b[:])
	return "job_" + nodeIDEncoding.EncodeToString(b[:])
}

// ValidJobID says whether id is a job id as newJobID makes them.
func ValidJobID(id string) bool {
	rest, ok := strings.CutPrefix(id, "job_")
	if !ok || len(rest) != nodeIDEncoding.EncodedLen(12) {
		return false
	}
	_, err := nodeIDEncoding.DecodeString(rest)
	return err == nil
}

// DispatchAs is Dispatch of a job of a local offer under an id of its caller's: another
// replica's job, which the node's receipt names as that replica knows it.
func (f *Fleet) DispatchAs(ctx context.Context, o *Offer, req *protocol.Request, id string) (*Job, error) {
	s := o.Node.sess
	if s == nil {
		o.release()
		return nil, fmt.Errorf("node %s: %w", o.Node.ID, errNodeGone)
	}
	j := &Job{
		ID:    id,
		Offer: o,
		sess:  s,
		ready: make(chan struct{}, 1),
		model: req.Model,
		sent:  s.fleet.cfg.Now(),
	}
	s.mu.Lock()
	if s.jobs == nil {
		s.mu.Unlock()
		o.release()
		return nil, fmt.Errorf("node %s: %w", o.Node.ID, errNodeGone)
	}
	s.jobs[j.ID] = j
	s.act.jobStarted(len(s.jobs), s.fleet.cfg.Now())
	s.mu.Unlock()
	if err := s.send(protocol.Frame{Type: protocol.TypeJob, Job: j.ID, Request: req, Trace: tracing.Inject(ctx)}); err != nil {
		// The session ended: close has finished (or will finish) the job.
		return nil, fmt.Errorf("node %s: %w", o.Node.ID, err)
	}
	return j, nil
}

// maxDeltas is the most deltas a job's inbox holds: the node's window, which it may not
// exceed, and room for the last delta and the end, which finish adds beyond it.
const maxDeltas = protocol.Window + 2

// maxInboxBytes bounds the answer a job's inbox holds, whatever a node sends within its
// window: a buyer reading slowly keeps at most this much of the coordinator's memory per job.
// An honest node's window of deltas, about a token each, is a few kilobytes.
const maxInboxBytes = 8 << 20

// deltaBytes is the size of a frame's delta, 0 for other frames.
func deltaBytes(fr *protocol.Frame) int {
	if fr.Delta == nil {
		return 0
	}
	return len(fr.Delta.Text) + len(fr.Delta.Reasoning) + len(fr.Delta.ToolCalls)
}

// put adds a frame to the inbox, unless the inbox holds limit frames or maxInboxBytes of
// deltas already (limit < 0: no limit), and wakes the reader.
func (j *Job) put(fr protocol.Frame, limit int) bool {
	n := deltaBytes(&fr)
	j.mu.Lock()
	if limit >= 0 && (len(j.inbox)-j.head >= limit || j.held+n > maxInboxBytes) {
		j.mu.Unlock()
		return false
	}
	j.inbox = append(j.inbox, fr)
	j.held += n
	j.mu.Unlock()
	j.Wake()
	return true
}

// take removes the inbox's first frame, if any.
func (j *Job) take() (protocol.Frame, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.head == len(j.inbox) {
		return protocol.Frame{}, false
	}
	fr := j.inbox[j.head]
	j.held -= deltaBytes(&fr)
	j.inbox[j.head] = protocol.Frame{} // let the delta go
	j.head++
	switch {
	case j.head == len(j.inbox):
		// Empty: an open stream waiting for its node's next piece keeps no inbox at all.
		j.inbox, j.head = nil, 0
	case j.head >= 32 && j.head >= len(j.inbox)/2:
		// A reader that never quite catches up: move what is left to the front, so that the
		// inbox stays as large as the lag, not as the answer.
		n := copy(j.inbox, j.inbox[j.head:])
		clear(j.inbox[n:])
		j.inbox, j.head = j.inbox[:n], 0
	}
	return fr, true
}

// deliver passes a delta to the job's reader without ever blocking the session.
func (j *Job) deliver(fr protocol.Frame) error {
	if !j.put(fr, maxDeltas) {
		if j.sess != nil {
			j.sess.mu.Lock()
			delete(j.sess.jobs, j.ID)
			j.sess.mu.Unlock()
		}
		j.Cancel()
		j.finish(protocol.Frame{Type: protocol.TypeEnd, Job: j.ID, End: &protocol.End{
			Error: &protocol.Error{Message: fmt.Sprintf("node %s: %v", j.Offer.Node.ID, ErrOverflow)},
		}})
	}
	return nil
}

// sawEnd keeps the node's receipt from the job's end frame, received at now, with what the
// coordinator saw of the job: the deltas it received, the end's usage, the job's times; or,
// for an end whose receipt follows in a receipt frame, it makes the job wait for it. The
// session's reader calls it before it delivers the end. It reports whether the receipt
// follows.
func (j *Job) sawEnd(e *protocol.End, now time.Time) (follows bool) {
	follows = e.ReceiptFollows && j.sess != nil // a remote job's owner puts the receipt in its end
	if len(e.Receipt) == 0 && !follows {
		return false // an agent older than receipts
	}
	saw := receipt.Expected{
		JobID: j.ID, NodeID: j.Offer.Node.ID, NodeKey: j.nodeKey(), Model: j.model,
		Usage: e.Usage, Estimated: e.Estimated, FinishReason: e.FinishReason,
		OutputSHA256: j.output.Sum(), OutputBytes: j.output.Len(),
		Sent: j.sent, Ended: now,
	}
	j.mu.Lock()
	j.saw = saw
	if follows {
		j.receiptDone = make(chan struct{})
	} else {
		j.signed = e.Receipt
	}
	j.mu.Unlock()
	e.Receipt, e.ReceiptFollows = nil, false // the relay has no use for them
	return follows
}

// receiptCame keeps the receipt of the job's receipt frame, unless the job waits for none, or
// gave up waiting.
func (j *Job) receiptCame(signed json.RawMessage) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.receiptDone == nil || j.receiptClosed {
		return
	}
	j.signed = signed
	j.receiptClosed = true
	close(j.receiptDone)
}

// noReceipt stops the job waiting for its receipt frame: it will not come.
func (j *Job) noReceipt() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.receiptDone != nil && !j.receiptClosed {
		j.receiptClosed = true
		close(j.receiptDone)
	}
}

// Receipt returns the node's signed receipt of the job (the JSON of a receipt.Signed), as the
// job's end frame or the receipt frame after it carried it, and what the coordinator saw of
// the job, to check it against with receipt.Countersign. ok is false until the receipt has
// come, and when none did or will (an agent older than receipts; the job ended on the
// coordinator's side: the node disconnected or overflowed its credit). It never blocks: the
// end of a job the relay stopped reading (a stall) may still come later; AwaitReceipt waits
// for a receipt that follows its end.
func (j *Job) Receipt() (signed json.RawMessage, saw receipt.Expected, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.signed, j.saw, j.signed != nil
}

// ReceiptPending says the job's end has come and its receipt follows, not yet here.
func (j *Job) ReceiptPending() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.receiptDone != nil && !j.receiptClosed
}

// AwaitReceipt waits, until ctx is done, for the receipt of a job whose end said it follows,
// then returns as Receipt does. When ctx ends first, the job stops waiting for it.
func (j *Job) AwaitReceipt(ctx context.Context) (signed json.RawMessage, saw receipt.Expected, ok bool) {
	j.mu.Lock()
	done := j.receiptDone
	j.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			if j.sess != nil {
				j.sess.forgetReceipt(j)
			}
			j.noReceipt()
		}
	}
	return j.Receipt()
}

// finish delivers the job's end once and frees its slot.
func (j *Job) finish(fr protocol.Frame) {
	j.mu.Lock()
	if j.ended {
		j.mu.Unlock()
		return
	}
	j.ended = true
	j.mu.Unlock()
	j.Offer.release()
	j.put(fr, -1)
}

// Next returns the job's next frame: a delta, or its end (always the last). It returns
// ctx.Err() when ctx is done first.
func (j *Job) Next(ctx context.Context) (protocol.Frame, error) {
	for {
		if fr, ok := j.take(); ok {
			j.took(fr)
			return fr, nil
		}
		select {
		case <-j.ready:
		case <-ctx.Done():
			return protocol.Frame{}, ctx.Err()
		}
	}
}

// Ready receives a value when a frame has been put in the inbox since the reader last found
// it empty, or Wake was called: a reader waits on it, then takes the frame with TryNext (which
// may find none, the frame taken already).
func (j *Job) Ready() <-chan struct{} { return j.ready }

// Wake makes Ready receive, as a frame put in the inbox does: a reader's timer wakes it so.
func (j *Job) Wake() {
	select {
	case j.ready <- struct{}{}:
	default: // the reader has a wake-up pending already
	}
}

// TryNext returns the next frame if one is ready.
func (j *Job) TryNext() (protocol.Frame, bool) {
	fr, ok := j.take()
	if ok {
		j.took(fr)
	}
	return fr, ok
}

// took grants the node more credit once half of its window has been consumed.
func (j *Job) took(fr protocol.Frame) {
	if fr.Type != protocol.TypeDelta {
		return
	}
	j.mu.Lock()
	j.unacked++
	grant := 0
	if j.unacked >= protocol.Window/2 && !j.ended {
		grant, j.unacked = j.unacked, 0
	}
	j.mu.Unlock()
	switch {
	case grant == 0:
	case j.sess == nil:
		j.peers.Control(j, Credit, grant)
	default:
		j.sess.send(protocol.Frame{Type: protocol.TypeCredit, Job: j.ID, Credit: grant})
	}
}

// PreemptGrace is how long a preempted job's node has to confirm that it stopped before the
// coordinator ends the job itself and frees its slot: a node that ignores the cancel keeps no
// slot from the gold request.
const PreemptGrace = 2 * time.Second

// Preempt asks the node to stop the job to free its slot for a gold request; its end then
// reads as preempted (Preempted), not as the node's failure. It reports whether the job was
// still running and not preempted already.
func (j *Job) Preempt() bool {
	j.mu.Lock()
	ended := j.ended
	j.mu.Unlock()
	if ended || !j.preempted.CompareAndSwap(false, true) {
		return false
	}
	if j.sess == nil {
		j.peers.Control(j, Preempt, 0) // its owner preempts it, and ends it after the grace
		return true
	}
	j.sess.send(protocol.Frame{Type: protocol.TypeCancel, Job: j.ID})
	time.AfterFunc(PreemptGrace, func() {
		j.sess.mu.Lock()
		if j.sess.jobs[j.ID] != j {
			j.sess.mu.Unlock()
			return // it ended
		}
		delete(j.sess.jobs, j.ID) // what the node sends of it from now on is dropped
		j.sess.act.jobEnded(len(j.sess.jobs), j.sess.fleet.cfg.Now())
		j.sess.mu.Unlock()
		j.finish(protocol.Frame{Type: protocol.TypeEnd, Job: j.ID, End: &protocol.End{FinishReason: protocol.FinishCancelled, Estimated: true}})
	})
	return true
}

// Ended reports whether the job has ended, its slot freed.
func (j *Job) Ended() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ended
}

// Preempted reports whether the job was preempted.
func (j *Job) Preempted() bool { return j.preempted.Load() }

// Cancel asks the node to stop the job. The slot is freed when the node confirms with the
// job's end frame (or disconnects).
func (j *Job) Cancel() {
	j.mu.Lock()
	ended := j.ended
	j.mu.Unlock()
	switch {
	case ended:
	case j.sess == nil:
		j.peers.Control(j, Cancel, 0)
	default:
		j.sess.send(protocol.Frame{Type: protocol.TypeCancel, Job: j.ID})
	}
}

// nodeKey is the key the job's node registered with.
func (j *Job) nodeKey() ed25519.PublicKey {
	if j.sess == nil {
		return j.key
	}
	return j.sess.nodeKey
}
