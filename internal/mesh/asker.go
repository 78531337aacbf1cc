package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tracing"
)

// The asking side: a job on a node another replica holds.

// asked is a job this replica asked another for.
type asked struct {
	job  *fleet.Job
	sub  *nats.Subscription
	next int // the frame number expected next
}

// Dispatch sends a job to the owner of its node, on the slot Acquire took, and feeds the
// job the frames the owner relays (fleet.Peers).
func (m *Mesh) Dispatch(ctx context.Context, j *fleet.Job, req *protocol.Request) error {
	owner := j.Offer.Node.Owner()
	tok := m.popToken(j.Offer)
	if tok == "" {
		return errors.New("no slot granted")
	}
	a := &asked{job: j}
	inbox := m.subject(m.cfg.Replica, "frames."+j.ID)
	sub, err := m.nc.Subscribe(inbox, func(msg *nats.Msg) { m.onFrame(a, msg) })
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	a.sub = sub
	m.mu.Lock()
	m.asked[j.ID] = a
	m.mu.Unlock()
	b, _ := json.Marshal(jobRequest{Token: tok, From: m.cfg.Replica, Job: j.ID, Inbox: inbox, Request: req, Trace: tracing.Inject(ctx)})
	msg, err := m.nc.Request(m.subject(owner, "job"), b, requestWait)
	var r jobReply
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		err = errOwnerGone
	case err == nil && json.Unmarshal(msg.Data, &r) != nil:
		err = errors.New("bad answer from the node's replica")
	case err == nil && r.Error != "":
		err = errors.New(r.Error)
	}
	if err != nil {
		m.forget(a)
		return err
	}
	go m.keepalive(a, owner)
	return nil
}

// onFrame feeds a job a frame its owner relayed, in order: a gap ends the job.
func (m *Mesh) onFrame(a *asked, msg *nats.Msg) {
	var fm frameMessage
	if err := json.Unmarshal(msg.Data, &fm); err != nil || fm.Seq != a.next {
		a.job.Fail(fmt.Errorf("frames from its replica lost or out of order (%d, expected %d)", fm.Seq, a.next))
		m.Control(a.job, fleet.Cancel, 0)
		m.forget(a)
		return
	}
	a.next++
	fm.Frame.Job = a.job.ID
	if fm.Leaving {
		// Its owner shuts down: the node is gone from it, not failed, and comes back on
		// another replica, where the answer may continue.
		n := a.job.Offer.Node
		m.cfg.Fleet.DropRemote(n.ID, n.Owner())
	}
	a.job.Feed(fm.Frame)
	if fm.Frame.Type == protocol.TypeEnd {
		m.forget(a)
	}
}

// forget ends a job's subscription.
func (m *Mesh) forget(a *asked) {
	m.mu.Lock()
	delete(m.asked, a.job.ID)
	m.mu.Unlock()
	a.sub.Unsubscribe()
}

// keepalive tells the owner the job's reader is here, every keepaliveEach until the job ends,
// and ends the job when the owner no longer answers: it died, or lost the job.
func (m *Mesh) keepalive(a *asked, owner string) {
	t := time.NewTicker(keepaliveEach)
	defer t.Stop()
	b, _ := json.Marshal(controlMessage{Job: a.job.ID, Kind: "alive"})
	missed := 0
	for range t.C {
		if a.job.Ended() {
			return
		}
		msg, err := m.nc.Request(m.subject(owner, "ctl"), b, keepaliveEach)
		var r jobReply
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			missed = 3 // no replica listens: it is gone
		case err != nil:
			missed++
		case json.Unmarshal(msg.Data, &r) == nil && r.Error != "":
			missed = 3 // it ran the job and forgot it
		default:
			missed = 0
		}
		if missed >= 3 {
			if !a.job.Ended() {
				a.job.Fail(errOwnerGone)
			}
			m.forget(a)
			return
		}
	}
}
