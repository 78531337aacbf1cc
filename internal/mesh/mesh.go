// Package mesh makes the replicas of a network one fleet, over NATS: each replica publishes the
// nodes it holds to a JetStream key-value bucket, every replica lists every node (a replica's
// view is fresh within about a second), and a request on replica A served by a node on replica
// B takes its slot from B and gets its frames from B, with the flow control, cancellation and
// preemption of a local job (fleet.Peers).
//
// The owner of a node — the replica holding its WebSocket — decides every slot: a stale view
// costs a refusal, never a slot given twice. A dead owner's nodes leave every view within
// staleAfter; its jobs end within a second of its death (keepalives find no responder), and
// the request core fails them over as any node's.
//
// Subjects, for replica R:
//
//	shareai.mesh.R.slot      request: a slot of a node R holds → a token, or a refusal
//	shareai.mesh.R.release   a token no job used
//	shareai.mesh.R.job       request: a job on a token, with the inbox its frames go to
//	shareai.mesh.R.ctl       a job's reader: credit, cancel, preempt; keepalives (request)
//	shareai.mesh.R.frames.J  the frames of job J that R asked for, numbered
package mesh

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
)

// Bucket is the key-value bucket of the fleet's nodes, one key per node ("node.ID").
const Bucket = "shareai_fleet"

// Timings of the shared view and of remote jobs.
const (
	publishEvery  = time.Second      // how often an owner publishes its nodes
	staleAfter    = 3 * time.Second  // a node its owner has not published for this long leaves every view
	bucketTTL     = 30 * time.Second // the bucket's keys' time to live: what a dead owner leaves, gone
	slotHold      = 10 * time.Second // how long an owner keeps a granted slot for its job
	requestWait   = 2 * time.Second  // a slot or job request's answer
	keepaliveEach = time.Second      // a remote job's reader tells the owner it is there
	orphanAfter   = 10 * time.Second // an owner cancels a job whose reader has been silent this long
)

// Config configures a Mesh.
type Config struct {
	Bus     *bus.Bus
	Fleet   *fleet.Fleet
	Replica string // this replica's name, unique in the network
	// Replicas is how many copies of the bucket the NATS cluster keeps: 1 on one server, 3
	// on a cluster of three or more. Default: 3 when the connection knows three servers or
	// more, else 1 (as the rate limits' bucket).
	Replicas int
	Log      *slog.Logger
}

// Mesh is one replica's part of the shared fleet. It implements fleet.Peers.
type Mesh struct {
	cfg  Config
	nc   *nats.Conn
	log  *slog.Logger
	kv   atomic.Pointer[jetstream.KeyValue] // the fleet's bucket, once Run has set it up
	subs []*nats.Subscription

	mu      sync.Mutex
	tokens  map[*fleet.Offer][]string // slots granted by owners, not used yet
	pending map[string]*grant         // slots this replica granted others, by token
	owned   map[string]*owned         // jobs this replica runs for others, by their job id
	asked   map[string]*asked         // jobs this replica asked others for, by job id
	done    chan struct{}
	leaving atomic.Bool // Leave was called: this replica shuts down
}

// Ready reports whether the replica has the whole fleet in view: the nodes the bucket held when
// it started watching, and its own nodes published: its fleet has joined (Fleet.Joining).
// Until then it is not ready for buyers (/readyz), and the requests that reach it all the
// same wait for the view rather than be refused for a model the network serves.
func (m *Mesh) Ready() bool { return !m.cfg.Fleet.Joining() }

// bucket is the fleet's bucket, nil until Run has set it up.
func (m *Mesh) bucket() jetstream.KeyValue {
	if kv := m.kv.Load(); kv != nil {
		return *kv
	}
	return nil
}

// grant is a slot this replica granted another, until its job comes.
type grant struct {
	offer *fleet.Offer
	timer *time.Timer
}

// New returns a replica's mesh; Run starts it. It sets itself as the fleet's peers.
func New(cfg Config) *Mesh {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
		if len(cfg.Bus.Conn.Servers()) >= 3 {
			cfg.Replicas = 3
		}
	}
	m := &Mesh{cfg: cfg, nc: cfg.Bus.Conn, log: cfg.Log, tokens: map[*fleet.Offer][]string{}, pending: map[string]*grant{},
		owned: map[string]*owned{}, asked: map[string]*asked{}, done: make(chan struct{})}
	cfg.Fleet.SetPeers(m)
	return m
}

func (m *Mesh) subject(replica, what string) string { return "shareai.mesh." + replica + "." + what }

// Run serves this replica's nodes to the others and keeps the view of theirs until ctx is
// done. When the bus cannot set up the fleet's bucket or its watch (a NATS request timed out:
// JetStream answers slowly under load, or is electing a leader), it tries again, backing off
// to setupRetryMax, rather than leave the replica blind to the others for good; it is not
// ready (Ready) meanwhile. It returns an error only when it cannot subscribe to its own
// subjects.
func (m *Mesh) Run(ctx context.Context) error {
	for what, h := range map[string]nats.MsgHandler{"slot": m.onSlot, "release": m.onRelease, "job": m.onJob, "ctl": m.onControl} {
		sub, err := m.nc.Subscribe(m.subject(m.cfg.Replica, what), h)
		if err != nil {
			return fmt.Errorf("mesh: subscribe: %w", err)
		}
		m.subs = append(m.subs, sub)
	}
	if err := m.nc.Flush(); err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	wait := setupRetryMin
	for {
		err := m.watch(ctx)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		m.log.Warn("mesh: cannot watch the fleet's bucket; trying again: until then this replica neither shares its nodes nor sees the others'",
			"err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, setupRetryMax)
	}
}

// How long Run waits before it sets up the bucket's watch again, doubling from the first.
const (
	setupRetryMin = 100 * time.Millisecond
	setupRetryMax = 5 * time.Second
)

// watch sets up the fleet's bucket and its watch, then publishes this replica's nodes and
// keeps the view of the others' until ctx is done (nil), or the setup fails.
func (m *Mesh) watch(ctx context.Context) error {
	kv, err := m.cfg.Bus.KeyValue(ctx, Bucket, bucketTTL, m.cfg.Replicas)
	if err != nil {
		return err
	}
	m.kv.Store(&kv)
	watch, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("mesh: watch %s: %w", Bucket, err)
	}
	defer watch.Stop()
	tick := time.NewTicker(publishEvery)
	defer tick.Stop()
	published := map[string]bool{}
	m.publish(ctx, published)
	for {
		select {
		case <-ctx.Done():
			m.stop(published)
			return nil
		case e := <-watch.Updates():
			if e == nil {
				m.cfg.Fleet.Joined() // the initial values are in: Ready
			}
			m.onEntry(e)
		case <-m.cfg.Fleet.Changed():
			if !m.leaving.Load() {
				m.publish(ctx, published)
			}
		case <-tick.C:
			if !m.leaving.Load() {
				m.publish(ctx, published)
			}
			m.cfg.Fleet.DropStale(time.Now().Add(-staleAfter))
		}
	}
}

// Leave withdraws this replica's nodes from every view at once, when it starts to shut down:
// the jobs it runs for others end as its nodes' connections close, and the others take those
// nodes for gone (not failed) and wait for them to connect to another replica, where they
// continue the answers.
func (m *Mesh) Leave() {
	if m.leaving.Swap(true) || m.bucket() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range m.cfg.Fleet.Local() {
		m.withdraw(ctx, n.ID)
	}
}

// stop withdraws this replica's nodes from the view, as a replica that shuts down cleanly
// does (a dead one's leave within staleAfter), and ends its subscriptions.
func (m *Mesh) stop(published map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for id := range published {
		m.withdraw(ctx, id)
	}
	for _, s := range m.subs {
		s.Unsubscribe()
	}
	close(m.done)
}

// token makes a random token.
func token() string {
	var b [15]byte
	rand.Read(b[:])
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
}

// errOwnerGone ends a remote job whose node's owner no longer answers.
var errOwnerGone = errors.New("its replica does not answer")

// Acquire asks the owner of a remote offer for a slot (fleet.Peers).
func (m *Mesh) Acquire(o *fleet.Offer, t tier.Tier) bool {
	b, _ := json.Marshal(slotRequest{Node: o.Node.ID, Model: o.Model, Tier: t.String()})
	msg, err := m.nc.Request(m.subject(o.Node.Owner(), "slot"), b, requestWait)
	if err != nil {
		return false
	}
	var r slotReply
	if json.Unmarshal(msg.Data, &r) != nil || r.Token == "" {
		return false
	}
	m.mu.Lock()
	m.tokens[o] = append(m.tokens[o], r.Token)
	m.mu.Unlock()
	return true
}

// popToken returns a slot token granted for o, or "".
func (m *Mesh) popToken(o *fleet.Offer) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.tokens[o]
	if len(ts) == 0 {
		return ""
	}
	t := ts[0]
	if len(ts) == 1 {
		delete(m.tokens, o)
	} else {
		m.tokens[o] = ts[1:]
	}
	return t
}

// Release gives an unused slot back to its owner (fleet.Peers).
func (m *Mesh) Release(o *fleet.Offer) {
	if t := m.popToken(o); t != "" {
		b, _ := json.Marshal(releaseMessage{Token: t})
		m.nc.Publish(m.subject(o.Node.Owner(), "release"), b)
	}
}

// Control tells the owner of a remote job what its reader did (fleet.Peers).
func (m *Mesh) Control(j *fleet.Job, c fleet.Control, n int) {
	b, _ := json.Marshal(controlMessage{Job: j.ID, Kind: string(c), N: n})
	m.nc.Publish(m.subject(j.Offer.Node.Owner(), "ctl"), b)
}

// Messages between replicas.
type (
	slotRequest struct {
		Node  string `json:"node"`
		Model string `json:"model"`
		Tier  string `json:"tier"`
	}
	slotReply struct {
		Token string `json:"token,omitempty"` // "": refused
	}
	releaseMessage struct {
		Token string `json:"token"`
	}
	jobRequest struct {
		Token   string            `json:"token"`
		From    string            `json:"from"`  // the asking replica
		Job     string            `json:"job"`   // the job's id, as the asking replica knows it
		Inbox   string            `json:"inbox"` // where its frames go
		Request *protocol.Request `json:"request"`
		Trace   map[string]string `json:"trace,omitempty"`
	}
	jobReply struct {
		Error string `json:"error,omitempty"`
	}
	controlMessage struct {
		Job  string `json:"job"`
		Kind string `json:"kind"` // fleet.Credit, Cancel, Preempt, or "alive"
		N    int    `json:"n,omitempty"`
	}
	frameMessage struct {
		Seq   int            `json:"seq"`
		Frame protocol.Frame `json:"frame"`
		// Leaving says the job ended because its owner shuts down: the node is not at fault,
		// and will connect to another replica.
		Leaving bool `json:"leaving,omitempty"`
	}
)
