// Package fleet keeps the coordinator's live view of the nodes connected to it: their
// WebSocket sessions, their offers and the jobs running on them. It accepts agents'
// connections, registers nodes, dispatches jobs and carries their frames both ways.
//
// Lock order: Fleet.mu, then session.mu, then Job.mu or Offer.mu (leaves: nothing is locked
// while they are held). The surge's lock (price.go) is a leaf too, taken with none held.
//
// It must not import the gateway, relay or ledger.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// Log keys.
const (
	logNode = "node"
	logJob  = "job"
)

// Config configures a Fleet.
type Config struct {
	Store store.Store
	// Authenticate returns the account a provider token belongs to.
	Authenticate func(ctx context.Context, token string) (accountID string, err error)
	// HeartbeatInterval is how often agents send heartbeats; a node silent for three intervals
	// is dropped. Default 5s.
	HeartbeatInterval time.Duration
	// RecordInterval is how often connected nodes are recorded as seen, with their sessions,
	// job counts and telemetry. Default 1m.
	RecordInterval time.Duration
	// Selftest checks a node that asked for a selftest, as a new node is checked, recording
	// nothing; nil: selftests are refused.
	Selftest func(ctx context.Context, n *Node) *protocol.Selftest
	// TrustNewNodes makes a node verified when it first registers (or its hardware changes),
	// without onboarding checks: for a private network of one's own machines, and tests.
	TrustNewNodes bool
	// MaxNodesPerAccount bounds the nodes one provider account has connected at once, so that
	// one provider token cannot flood the fleet (and the prober, and the node records) with
	// nodes of throwaway keys. Default DefaultMaxNodesPerAccount.
	MaxNodesPerAccount int
	// Surge is the operator's surge multiplier of the asks (package pricing); zero: off.
	// SurgeInterval is how often the models' utilization is sampled for it, default
	// DefaultSurgeInterval.
	Surge         pricing.SurgeConfig
	SurgeInterval time.Duration
	Log           *slog.Logger
	Now           func() time.Time // default time.Now
}

// DefaultMaxNodesPerAccount is the default of Config.MaxNodesPerAccount: a lab's racks, not
// a botnet's.
const DefaultMaxNodesPerAccount = 256

// Fleet is the set of connected nodes.
type Fleet struct {
	cfg Config
	log *slog.Logger

	mu       sync.RWMutex
	nodes    map[string]*Node     // by node id
	byModel  map[string][]*Offer  // model → offers of connected nodes
	left     map[string]time.Time // model → when its last node left (LeftAt)
	accounts map[string]int       // provider account → its nodes connected
	closed   bool
	sessions sync.WaitGroup
	tests    map[*session]bool // selftests running: in no map of nodes, closed by Close too
	changed  chan struct{}     // closed and replaced whenever the node set changes
	handoff  atomic.Pointer[func(*Offer) bool]
	peers    Peers // reaches remote nodes (remote.go); nil: none
	joining  bool  // peers set, their nodes not in view yet (Joining)
	surge    surges
}

// New returns an empty fleet.
func New(cfg Config) *Fleet {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RecordInterval <= 0 {
		cfg.RecordInterval = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxNodesPerAccount <= 0 {
		cfg.MaxNodesPerAccount = DefaultMaxNodesPerAccount
	}
	if cfg.SurgeInterval <= 0 {
		cfg.SurgeInterval = DefaultSurgeInterval
	}
	return &Fleet{
		cfg:      cfg,
		log:      cfg.Log,
		nodes:    make(map[string]*Node),
		byModel:  make(map[string][]*Offer),
		accounts: make(map[string]int),
		changed:  make(chan struct{}),
	}
}

// reserve holds a place for a new node among its account's nodes, or refuses it when its
// account has MaxNodesPerAccount nodes connected or connecting already: before the node is
// recorded, so that a refused node leaves nothing. A node reconnecting takes its own place
// (add replaces it). release gives a place not taken by add back; it may be called after add,
// and then does nothing.
func (f *Fleet) reserve(n *Node) (release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.nodes[n.ID]; old != nil && old.remote == nil {
		return func() {}, nil
	}
	if f.accounts[n.AccountID] >= f.cfg.MaxNodesPerAccount {
		return nil, refuse("too many nodes for this provider: %d connected", f.cfg.MaxNodesPerAccount)
	}
	f.accounts[n.AccountID]++
	n.reserved = true
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if n.reserved {
			n.reserved = false
			f.uncount(n.AccountID)
		}
	}, nil
}

func (f *Fleet) uncount(account string) {
	if f.accounts[account]--; f.accounts[account] <= 0 {
		delete(f.accounts, account)
	}
}

// Offers returns the offers of connected nodes for a model, a snapshot the caller may keep.
func (f *Fleet) Offers(model string) []*Offer {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.byModel[model])
}

// Node returns a connected node by id, or nil.
func (f *Fleet) Node(id string) *Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.nodes[id]
}

// Nodes returns the connected nodes, ordered by id.
func (f *Fleet) Nodes() []*Node {
	f.mu.RLock()
	ns := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		ns = append(ns, n)
	}
	f.mu.RUnlock()
	slices.SortFunc(ns, func(a, b *Node) int { return cmp.Compare(a.ID, b.ID) })
	return ns
}

// changedNow tells the watchers of Changed that something they rank by has changed.
func (f *Fleet) changedNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notify()
}

// Changed returns a channel that is closed the next time a node joins or leaves, a model is
// loaded or unloaded on a node, or a price changes other than by an ask schedule's edge (a
// surge multiplier, a schedule set in the console: price.go).
func (f *Fleet) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// ModelInfo summarises one model served on the network: what a buyer compares.
type ModelInfo struct {
	ID            string
	Nodes         int
	ContextLength int
	Since         time.Time // when the longest-connected node serving it connected
	Simulated     bool      // every node serving it is simulated
	// The range of the nodes' asks in effect now (Offer.Price: surge included), in
	// nano-dollars per million tokens; Until is when the first of them may change by its ask
	// schedule (zero: none has one).
	MinInput, MaxInput, MinOutput, MaxOutput int64
	Until                                    time.Time
	Regions                                  []string // sorted; "" when a node did not say
	TTFT                                     time.Duration
	TokensPerSecond                          float64 // medians over the nodes measured
}

// LiveOffers returns the offers for a model that get buyers' traffic (see [Offer.Live]), a
// snapshot the caller may keep.
func (f *Fleet) LiveOffers(model string) []*Offer {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return live(f.byModel[model])
}

func live(offers []*Offer) []*Offer {
	var out []*Offer
	for _, o := range offers {
		if o.Live() {
			out = append(out, o)
		}
	}
	return out
}

// Models lists the models served now, ordered by id: those that some node serves to buyers
// (its offer of the model is live), summarised over those nodes only. A model only unverified
// or quarantined nodes serve is not listed.
func (f *Fleet) Models() []ModelInfo {
	f.mu.RLock()
	snapshot := make(map[string][]*Offer, len(f.byModel))
	for id, offers := range f.byModel {
		if l := live(offers); len(l) > 0 {
			snapshot[id] = l
		}
	}
	f.mu.RUnlock()
	ms := make([]ModelInfo, 0, len(snapshot))
	for id, offers := range snapshot {
		ms = append(ms, summarize(id, offers))
	}
	slices.SortFunc(ms, func(a, b ModelInfo) int { return cmp.Compare(a.ID, b.ID) })
	return ms
}

// Model summarises one model over the nodes that serve it to buyers, or reports false when
// none does.
func (f *Fleet) Model(id string) (ModelInfo, bool) {
	offers := f.LiveOffers(id)
	if len(offers) == 0 {
		return ModelInfo{}, false
	}
	return summarize(id, offers), true
}

func summarize(id string, offers []*Offer) ModelInfo {
	first := offers[0].Price()
	mi := ModelInfo{ID: id, Nodes: len(offers), Simulated: true,
		MinInput: int64(first.Input), MaxInput: int64(first.Input), MinOutput: int64(first.Output), MaxOutput: int64(first.Output)}
	var ttfts []time.Duration
	var tps []float64
	regions := map[string]bool{}
	for _, o := range offers {
		mi.ContextLength = max(mi.ContextLength, o.ContextLength)
		if mi.Since.IsZero() || o.Node.Connected.Before(mi.Since) {
			mi.Since = o.Node.Connected
		}
		mi.Simulated = mi.Simulated && o.Node.Hardware.Simulated
		p := o.Price()
		in, out := int64(p.Input), int64(p.Output)
		mi.MinInput, mi.MaxInput = min(mi.MinInput, in), max(mi.MaxInput, in)
		mi.MinOutput, mi.MaxOutput = min(mi.MinOutput, out), max(mi.MaxOutput, out)
		if !p.Until.IsZero() && (mi.Until.IsZero() || p.Until.Before(mi.Until)) {
			mi.Until = p.Until
		}
		regions[o.Node.Region] = true
		st := o.Stats()
		if st.TTFT > 0 {
			ttfts = append(ttfts, st.TTFT)
		}
		if st.TokensPerSecond > 0 {
			tps = append(tps, st.TokensPerSecond)
		}
	}
	for r := range regions {
		mi.Regions = append(mi.Regions, r)
	}
	slices.Sort(mi.Regions)
	if len(ttfts) > 0 {
		slices.Sort(ttfts)
		mi.TTFT = ttfts[len(ttfts)/2]
	}
	if len(tps) > 0 {
		slices.Sort(tps)
		mi.TokensPerSecond = tps[len(tps)/2]
	}
	return mi
}

// OpenSlots are a model's slots open for jobs: busy with one, or free.
type OpenSlots struct{ Busy, Free int }

// OpenSlots counts, by model, the slots of this replica's nodes that are open for jobs now
// (connected, not paused, not gone, not a selftest's), busy or free: an offer has
// MaxConcurrent of them. Jobs still draining on a paused node count in neither. Summed over
// replicas, each slot counts once.
func (f *Fleet) OpenSlots() map[string]OpenSlots {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]OpenSlots)
	for _, node := range f.nodes {
		if node.remote != nil || node.Selftest || node.Paused() != "" || node.Gone() {
			continue
		}
		for _, o := range node.Offers {
			r := min(o.Running(), o.MaxConcurrent)
			s := out[o.Model]
			s.Busy += r
			s.Free += o.MaxConcurrent - r
			out[o.Model] = s
		}
	}
	return out
}

// maxLeft bounds the models whose last node's leaving the fleet remembers (LeftAt).
const maxLeft = 4096

// LeftAt returns when the last node serving model left this fleet's view, or zero when one
// serves it now or none did since the fleet started (or since maxLeft models left after it).
func (f *Fleet) LeftAt(model string) time.Time {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.byModel[model]) > 0 {
		return time.Time{}
	}
	return f.left[model]
}

// Running returns how many jobs run on the fleet now.
func (f *Fleet) Running() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, node := range f.nodes {
		if node.remote != nil {
			continue // counted by its owner
		}
		for _, o := range node.Offers {
			n += o.Running()
		}
	}
	return n
}

// add makes a registered node visible, replacing an older session of the same node.
func (f *Fleet) add(n *Node) (replaced *Node, err error) {
	f.initOffers(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errCoordinatorClosing
	}
	replaced = f.nodes[n.ID]
	if replaced != nil && replaced.remote != nil {
		// The node left the replica that held it and connected here: it is this one's now.
		f.dropRemote(replaced)
		replaced = nil
	}
	switch {
	case replaced != nil && n.reserved: // its predecessor came back meanwhile: one place
		f.uncount(n.AccountID)
	case replaced == nil && !n.reserved: // its predecessor left meanwhile: a place of its own
		if f.accounts[n.AccountID] >= f.cfg.MaxNodesPerAccount {
			return nil, refuse("too many nodes for this provider: %d connected", f.cfg.MaxNodesPerAccount)
		}
		f.accounts[n.AccountID]++
	}
	n.reserved = false
	if replaced != nil {
		f.unindex(replaced)
	}
	f.nodes[n.ID] = n
	for _, o := range n.Offers {
		f.byModel[o.Model] = append(f.byModel[o.Model], o)
	}
	f.notify()
	return replaced, nil
}

// remove forgets a node if it is still the one registered under its id.
func (f *Fleet) remove(n *Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodes[n.ID] != n {
		return
	}
	delete(f.nodes, n.ID)
	f.uncount(n.AccountID)
	f.unindex(n)
	f.notify()
}

func (f *Fleet) unindex(n *Node) {
	for _, o := range n.Offers {
		offers := slices.DeleteFunc(slices.Clone(f.byModel[o.Model]), func(x *Offer) bool { return x == o })
		if len(offers) == 0 {
			delete(f.byModel, o.Model)
			if f.left == nil || len(f.left) >= maxLeft {
				f.left = make(map[string]time.Time) // names nodes made up must not fill it
			}
			f.left[o.Model] = f.cfg.Now() // its last node left: it may be back in a moment
		} else {
			f.byModel[o.Model] = offers
		}
	}
}

func (f *Fleet) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Close disconnects every node and waits for their sessions to end. Agents reconnect to
// whichever coordinator answers next.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	nodes := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		if n.remote == nil {
			nodes = append(nodes, n)
		}
	}
	for s := range f.tests {
		nodes = append(nodes, s.node)
	}
	f.mu.Unlock()
	for _, n := range nodes {
		n.sess.close(errCoordinatorClosing)
	}
	f.sessions.Wait()
}

// touchLoop records connected nodes as seen, with what their sessions recorded, every
// interval until ctx is done; and once a day it forgets old telemetry.
func (f *Fleet) touchLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.flushAll(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("record nodes' activity", "err", err)
		}
		if now := f.cfg.Now(); now.Sub(pruned) > 24*time.Hour {
			pruned = now
			if _, err := f.cfg.Store.PruneTelemetry(ctx, now.Add(-telemetryRetention)); err != nil && ctx.Err() == nil {
				f.log.Warn("prune telemetry", "err", err)
			}
		}
	}
}

// flushAll stores what every connected node's session has recorded, in one transaction of each
// kind. Counts and readings that could not be stored are kept for the next time.
func (f *Fleet) flushAll(ctx context.Context) error {
	type taken struct {
		s       *session
		days    []store.NodeDay
		samples []store.TelemetrySample
	}
	var (
		ids      []string
		sessions []*store.NodeSession
		days     []store.NodeDay
		samples  []store.TelemetrySample
		all      []taken
		now      = f.cfg.Now()
	)
	for _, n := range f.Local() {
		s := n.sess
		s.mu.Lock()
		rec, d, t := s.act.take(now, false)
		s.mu.Unlock()
		ids = append(ids, n.ID)
		sessions = append(sessions, &rec)
		days = append(days, d...)
		samples = append(samples, t...)
		all = append(all, taken{s, d, t})
	}
	if len(ids) == 0 {
		return nil
	}
	st := f.cfg.Store
	errDays, errSamples := st.AddNodeDays(ctx, days), st.InsertTelemetry(ctx, samples)
	for _, t := range all {
		var d []store.NodeDay
		var ss []store.TelemetrySample
		if errDays != nil {
			d = t.days
		}
		if errSamples != nil {
			ss = t.samples
		}
		if d != nil || ss != nil {
			t.s.mu.Lock()
			t.s.act.putBack(d, ss)
			t.s.mu.Unlock()
		}
	}
	return errors.Join(st.TouchNodes(ctx, ids, now), st.UpdateNodeSessions(ctx, sessions), errDays, errSamples)
}

// Run does the fleet's background work until ctx is done.
func (f *Fleet) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if f.cfg.Surge.Enabled {
		wg.Go(func() { f.surgeLoop(ctx, f.cfg.SurgeInterval) })
	}
	f.touchLoop(ctx, f.cfg.RecordInterval)
	wg.Wait()
}

// Node is a connected node.
type Node struct {
	ID        string
	AccountID string
	Name      string
	Region    string
	Engine    string
	Agent     string
	Hardware  protocol.Hardware
	Offers    []*Offer
	Connected time.Time
	// Windows and Timezone are the node's declared weekly availability; empty: always.
	Windows, Timezone string
	// Selftest is true for a node that connected only to be checked: it is in no ranking.
	Selftest bool

	sess     *session
	remote   *remote      // of a node another replica holds (remote.go); nil for this one's
	reserved bool         // it holds a place among its account's nodes, not in the fleet yet (Fleet.mu)
	rtt      atomic.Int64 // nanoseconds, moving average
	state    atomic.Pointer[nodeState]
	level    atomic.Pointer[string] // store.Level*
	score    atomic.Uint64          // math.Float64bits of the reputation score; 0: none yet
}

// Gone reports whether the node's session has ended, though the node may still be listed for
// a moment: its slots are taken by none.
func (n *Node) Gone() bool {
	if n.remote != nil {
		select {
		case <-n.remote.gone:
			return true
		default:
			return false
		}
	}
	if n.sess == nil {
		return false
	}
	select {
	case <-n.sess.done:
		return true
	default:
		return false
	}
}

// Score returns the node's reputation score in [0, 1], or 0 before it is computed.
func (n *Node) Score() float64 { return math.Float64frombits(n.score.Load()) }

// SetScore records the node's reputation score.
func (n *Node) SetScore(s float64) { n.score.Store(math.Float64bits(s)) }

// Level returns the node's trust level (store.LevelNew …).
func (n *Node) Level() string {
	if l := n.level.Load(); l != nil {
		return *l
	}
	return store.LevelNew
}

// WithLevel sets the level of a node that is in no fleet yet (a what-if ranking, a test) and
// returns it.
func (n *Node) WithLevel(level string) *Node {
	n.level.Store(&level)
	return n
}

// SetLevel changes the node's trust level as the coordinator knows it now; the caller records
// it in the store. The rankings see it at once.
func (f *Fleet) SetLevel(n *Node, level string) {
	if n.Level() == level {
		return
	}
	n.level.Store(&level)
	f.changedNow()
}

// initOffers gives each of a registering node's offers its own level as the store has it
// (every model a node serves is verified on its own, docs/reputation.md); a model with no
// level stored is new, or verified when the fleet trusts new nodes. When the levels cannot be
// read, they are all new: the prober checks them again.
func (f *Fleet) initOffers(n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored := map[string]string{}
	levels, err := f.cfg.Store.OfferLevels(ctx, n.ID)
	if err != nil {
		f.log.Warn("read the levels of a node's models: checking them again", logNode, n.ID, "err", err)
	}
	for _, l := range levels {
		stored[l.Model] = l.Level
	}
	for _, o := range n.Offers {
		level, ok := stored[o.Model]
		if !ok {
			level = store.LevelNew
			if f.cfg.TrustNewNodes && err == nil {
				level = store.LevelVerified
			}
		}
		o.level.Store(&level)
	}
	f.initAsks(ctx, n)
}

// Offer is one model a connected node serves, with its free slots.
type Offer struct {
	protocol.Offer
	Node *Node

	mu      sync.Mutex
	running int
	stats   Stats
	cold    atomic.Bool // the node said the model is not loaded
	// level is the model's own level on the node (store.LevelNew, LevelVerified or
	// LevelQuarantined); nil for an offer the fleet did not register (a what-if ranking, a
	// test), which follows its node.
	level atomic.Pointer[string]
	// fleet prices the offer (its clock and surge); nil for an offer in no fleet. own is its
	// own ask schedule, compiled; asks the one it prices by: own, or its node's from the
	// console. Nil: the flat ask.
	fleet *Fleet
	own   *pricing.Asks
	asks  atomic.Pointer[pricing.Asks]
	// hint is the tracking index's, told of each slot freed (Watch).
	hint atomic.Pointer[matcher.FreeHint]
}

// OwnLevel returns the model's own level on its node: store.LevelNew until the model passes
// its onboarding checks there, then store.LevelVerified, or store.LevelQuarantined once it
// fails too many. An offer the fleet did not register has the node's level.
func (o *Offer) OwnLevel() string {
	if l := o.level.Load(); l != nil {
		return *l
	}
	if o.Node == nil {
		return store.LevelVerified
	}
	return o.Node.Level()
}

// Level returns the offer's level as buyers' traffic sees it: the node's level, unless the
// node is verified or trusted and the model is not verified on it (new or quarantined: then
// that). An offer without a node is verified.
func (o *Offer) Level() string {
	node := store.LevelVerified
	if o.Node != nil {
		node = o.Node.Level()
	}
	if node != store.LevelVerified && node != store.LevelTrusted {
		return node
	}
	if own := o.OwnLevel(); own == store.LevelNew || own == store.LevelQuarantined {
		return own
	}
	return node
}

// Live reports whether the offer gets buyers' traffic: its node and its model on the node are
// verified (or the node trusted).
func (o *Offer) Live() bool {
	l := o.Level()
	return l == store.LevelVerified || l == store.LevelTrusted
}

// WithLevel sets the model's own level on an offer that is in no fleet yet (a test) and
// returns it.
func (o *Offer) WithLevel(level string) *Offer {
	o.level.Store(&level)
	return o
}

// SetOfferLevel changes the model's own level on its node as the coordinator knows it now; the
// caller records it in the store. The rankings see it at once.
func (f *Fleet) SetOfferLevel(o *Offer, level string) {
	if l := o.level.Load(); l != nil && *l == level {
		return
	}
	o.level.Store(&level)
	f.changedNow()
}

// Warm reports whether the model is loaded on the node (or the node cannot tell).
func (o *Offer) Warm() bool { return !o.cold.Load() }

// Running returns how many jobs of this offer run now.
func (o *Offer) Running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running
}

// Acquire takes a slot for a silver job if one is free and the node takes jobs.
func (o *Offer) Acquire() bool { return o.AcquireFor(tier.Silver) }

// AcquireFor takes a slot for a job of tier t if one is free for it (see Slots) and the node
// takes jobs.
func (o *Offer) AcquireFor(t tier.Tier) bool {
	if o.Node != nil && (o.Node.Paused() != "" || o.Node.Gone()) {
		return false
	}
	if o.Node != nil && o.Node.remote != nil {
		return o.acquireRemote(t)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running >= o.Slots(t) {
		return false
	}
	o.running++
	return true
}

// Slots is how many of the offer's slots jobs of tier t may fill: all for gold, all but the
// gold ones for silver, and for bronze the same, or none when the node refuses bronze.
func (o *Offer) Slots(t tier.Tier) int { return Slots(&o.Offer, t) }

// Slots is how many of an offer's slots jobs of tier t may fill.
func Slots(o *protocol.Offer, t tier.Tier) int {
	return tier.Slots(o.MaxConcurrent, o.GoldSlots, o.NoBronze, t)
}

// Release frees a slot taken with Acquire that no job used.
func (o *Offer) Release() {
	if o.Node != nil && o.Node.remote != nil && o.Node.remote.peers != nil {
		o.Node.remote.peers.Release(o) // the owner's slot
	}
	o.release()
}

// release frees a slot, unless the fleet's Handoff gives it to a request waiting for one.
func (o *Offer) release() {
	if o.Node != nil && o.Node.sess != nil {
		if h := o.Node.sess.fleet.handoff.Load(); h != nil && (*h)(o) {
			return // the slot is the waiting request's now
		}
	}
	o.mu.Lock()
	o.running--
	o.mu.Unlock()
	o.hint.Load().Freed() // after the count: the index reads it again after clearing its bit
}

// Watch keeps the hint of the index that tracks the offer (matcher.Watched), told of every
// slot freed. A node another replica holds cannot: its count changes there.
func (o *Offer) Watch(h *matcher.FreeHint) bool {
	if o.Node != nil && o.Node.remote != nil {
		return false
	}
	o.hint.Store(h)
	return true
}

// SetHandoff sets the function a slot about to be freed is offered to first: when it returns
// true, the slot stays taken, by whoever h gave it to. h runs with no lock of the fleet held;
// it must not take a slot of o itself.
func (f *Fleet) SetHandoff(h func(o *Offer) bool) { f.handoff.Store(&h) }
