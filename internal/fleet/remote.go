package fleet

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
)

// Nodes another replica of the network holds: their owner publishes them (package mesh),
// this fleet lists them with its own, ranks them alike, and reaches them through Peers. The
// owner decides every slot, so a stale view never books one twice: it only costs a refusal.

// Peers reaches the nodes other replicas hold.
type Peers interface {
	// Acquire asks the owner of a remote offer for a slot for a job of tier t, at once.
	Acquire(o *Offer, t tier.Tier) bool
	// Release gives back a slot Acquire took that no job used.
	Release(o *Offer)
	// Dispatch sends a job to the owner, on a slot Acquire took; its frames come back
	// through Job.Feed, in order.
	Dispatch(ctx context.Context, j *Job, req *protocol.Request) error
	// Control tells the owner of a remote job what its reader did: Credit (n more deltas it
	// may send), Cancel, or Preempt.
	Control(j *Job, c Control, n int)
}

// Control is what a remote job's reader tells the job's owner.
type Control string

// Controls of a remote job.
const (
	Credit  Control = "credit"
	Cancel  Control = "cancel"
	Preempt Control = "preempt"
)

// SetPeers sets how the fleet reaches remote nodes; nil (the default): it has none. A fleet
// given peers is joining them (Joining) until Joined.
func (f *Fleet) SetPeers(p Peers) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = p
	f.joining = p != nil
}

// Joined says that the fleet has in view the nodes its peers held when it joined them, and
// tells the watchers of Changed: a request that waited for the view looks again.
func (f *Fleet) Joined() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.joining {
		f.joining = false
		f.notify()
	}
}

// Joining reports whether the fleet's view lacks its peers' nodes: a replica that has just
// started, before the others' nodes are in view. A model none of its nodes serves meanwhile
// may be one theirs do.
func (f *Fleet) Joining() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.joining
}

// RemoteNode is a node another replica holds, as its owner publishes it.
type RemoteNode struct {
	ID, AccountID, Name, Region, Owner string
	Key                                ed25519.PublicKey
	Level                              string
	Score                              float64
	RTT                                time.Duration // owner to node
	Paused                             string
	Connected                          time.Time
	Windows, Timezone                  string
	Hardware                           protocol.Hardware
	Offers                             []RemoteOffer
}

// RemoteOffer is a remote node's offer: what it serves, its own level, its slots in use and
// what the owner measured of it.
type RemoteOffer struct {
	protocol.Offer
	Level   string
	Running int
	Cold    bool
	Stats   Stats
}

// remote is what a node another replica holds has of its own.
type remote struct {
	peers Peers
	owner string
	key   ed25519.PublicKey
	seen  time.Time // when its owner last published it (Fleet.mu)
	gone  chan struct{}
}

// Owner is the replica that holds the node's connection: "" for one of this replica's.
func (n *Node) Owner() string {
	if n.remote == nil {
		return ""
	}
	return n.remote.owner
}

// Local returns the nodes this replica holds, ordered by id.
func (f *Fleet) Local() []*Node {
	return slices.DeleteFunc(f.Nodes(), func(n *Node) bool { return n.remote != nil })
}

// PutRemote lists a remote node, or updates it: a node whose offers (or owner) changed is
// listed anew, its old entry gone.
func (f *Fleet) PutRemote(r RemoteNode) {
	now := f.cfg.Now()
	f.mu.Lock()
	old := f.nodes[r.ID]
	if old != nil && old.remote == nil {
		f.mu.Unlock()
		return // the node is connected here now: this replica's view wins
	}
	if old != nil && old.remote.owner == r.Owner && sameOffers(old, r.Offers) {
		old.remote.seen = now
		f.mu.Unlock()
		old.update(r)
		return
	}
	n := &Node{ID: r.ID, AccountID: r.AccountID, Name: r.Name, Region: r.Region, Connected: r.Connected,
		Windows: r.Windows, Timezone: r.Timezone, Hardware: r.Hardware,
		remote: &remote{peers: f.peers, owner: r.Owner, key: r.Key, seen: now, gone: make(chan struct{})}}
	for _, ro := range r.Offers {
		o := &Offer{Offer: ro.Offer, Node: n, fleet: f}
		o.own, _ = pricing.Compile(ro.AskSchedule) // as its owner prices it
		o.asks.Store(o.own)
		n.Offers = append(n.Offers, o)
	}
	n.update(r)
	if old != nil {
		f.dropRemote(old)
	}
	f.nodes[n.ID] = n
	for _, o := range n.Offers {
		f.byModel[o.Model] = append(f.byModel[o.Model], o)
	}
	f.notify()
	f.mu.Unlock()
}

// update takes in what a remote node's owner published of it.
func (n *Node) update(r RemoteNode) {
	level := r.Level
	n.level.Store(&level)
	n.SetScore(r.Score)
	n.rtt.Store(int64(r.RTT))
	n.state.Store(&nodeState{paused: r.Paused})
	for i, o := range n.Offers {
		ro := r.Offers[i]
		own := ro.Level
		o.level.Store(&own)
		o.cold.Store(ro.Cold)
		o.mu.Lock()
		o.running, o.stats = ro.Running, ro.Stats
		o.mu.Unlock()
	}
}

func sameOffers(n *Node, offers []RemoteOffer) bool {
	if len(n.Offers) != len(offers) {
		return false
	}
	for i, o := range n.Offers {
		if !sameOffer(o.Offer, offers[i].Offer) {
			return false
		}
	}
	return true
}

// DropRemote forgets a remote node of owner, if it is listed so: its owner no longer holds it.
func (f *Fleet) DropRemote(id, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil && n.remote != nil && n.remote.owner == owner {
		f.dropRemote(n)
		f.notify()
	}
}

// DropStale forgets the remote nodes whose owner has not published them since before: their
// owner died, or lost them.
func (f *Fleet) DropStale(before time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dropped := false
	for _, n := range f.nodes {
		if n.remote != nil && n.remote.seen.Before(before) {
			f.dropRemote(n)
			dropped = true
		}
	}
	if dropped {
		f.notify()
	}
}

// dropRemote removes a remote node (f.mu held): it is gone, and its jobs fail over.
func (f *Fleet) dropRemote(n *Node) {
	delete(f.nodes, n.ID)
	f.unindex(n)
	close(n.remote.gone)
}

// acquireRemote takes a slot of a remote offer: counted here at once (the owner's count
// comes with its next publication), granted by the owner.
func (o *Offer) acquireRemote(t tier.Tier) bool {
	o.mu.Lock()
	if o.running >= o.Slots(t) {
		o.mu.Unlock()
		return false
	}
	o.running++
	o.mu.Unlock()
	p := o.Node.remote.peers
	if p != nil && p.Acquire(o, t) {
		return true
	}
	o.mu.Lock()
	o.running--
	o.mu.Unlock()
	return false
}

// dispatchRemote sends a job to a remote offer's owner.
func (f *Fleet) dispatchRemote(ctx context.Context, o *Offer, req *protocol.Request) (*Job, error) {
	p := o.Node.remote.peers
	j := &Job{ID: newJobID(), Offer: o, peers: p,
		ready: make(chan struct{}, 1), model: req.Model, sent: f.cfg.Now(), key: o.Node.remote.key}
	if p == nil {
		o.release()
		return nil, fmt.Errorf("node %s: %w", o.Node.ID, errNodeGone)
	}
	if err := p.Dispatch(ctx, j, req); err != nil {
		o.release()
		return nil, fmt.Errorf("node %s, on replica %s: %w", o.Node.ID, o.Node.remote.owner, err)
	}
	return j, nil
}

// Feed passes a frame its owner relayed to a remote job, in order: a delta, or the end.
func (j *Job) Feed(fr protocol.Frame) {
	now := time.Now()
	switch {
	case fr.Type == protocol.TypeDelta && fr.Delta != nil:
		j.output.Add(*fr.Delta) // only the feeder touches it
		j.deliver(fr)
	case fr.Type == protocol.TypeEnd && fr.End != nil:
		if fr.Delta != nil {
			j.output.Add(*fr.Delta)
			j.put(protocol.Frame{Type: protocol.TypeDelta, Job: j.ID, Delta: fr.Delta}, -1)
			fr.Delta = nil
		}
		j.sawEnd(fr.End, now)
		j.finish(fr)
	}
}

// Fail ends a remote job whose owner can no longer be reached.
func (j *Job) Fail(err error) {
	j.finish(protocol.Frame{Type: protocol.TypeEnd, Job: j.ID, End: &protocol.End{
		Error: &protocol.Error{Message: fmt.Sprintf("node %s: %v", j.Offer.Node.ID, err)}}})
}

// Key is the public key the node registered with.
func (n *Node) Key() ed25519.PublicKey {
	switch {
	case n.remote != nil:
		return n.remote.key
	case n.sess != nil:
		return n.sess.nodeKey
	}
	return nil
}
