package simulate

import (
	"math/rand/v2"
	"time"

	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/tier"
)

// nodeInfo is what does not change of a node in a run: every partition that holds one of its
// offers sees the same.
type nodeInfo struct {
	index    int32
	id       string
	provider string
	region   string // a country code, as the matcher reads it
	class    *class
	spread   int64  // its asks' factor on the class's, in basis points
	seed     uint64 // of its drops
}

// node is a node's state in one partition. Its windows and drops are drawn from its own seed,
// so every partition that holds one of its offers sees it online at the same times.
type node struct {
	*nodeInfo
	offers []*offer
	open   bool   // inside an availability window
	down   bool   // dropped, until it reconnects
	gen    uint32 // of its drop and drain events: changed when it goes offline or closes
	rng    *rand.Rand
	since  time.Duration // when it last came online (online counts from here)
	closed time.Duration // when its window last closed
}

// online reports whether the node takes jobs now: inside its windows and connected.
func (n *node) online() bool { return n.open && !n.down }

// offer is one model a node serves, with its slots: the simulated counterpart of the fleet's
// offer, and the matcher's Slot for it.
type offer struct {
	node    *node
	model   *model
	ci      int // its candidate in model.cands
	running int
	jobs    []*job // running now
	in, out money.Price
	asks    *pricing.Asks
	hint    *matcher.FreeHint // the model's index's (Watch)

	// Measured.
	busy   time.Duration // slot-time of its jobs
	tokens int64         // output tokens generated
	jobsN  int64
}

var _ matcher.Watched = (*offer)(nil)

// Running is the slots in use: the matcher's Slot.
func (o *offer) Running() int { return o.running }

// AcquireFor takes a slot for a job of tier t, as the fleet's offer does: none while the node
// takes no jobs (outside its windows, or dropped), none past the slots the tier may fill.
func (o *offer) AcquireFor(t tier.Tier) bool {
	if !o.node.online() || o.running >= o.slots(t) {
		return false
	}
	o.acquire()
	return true
}

func (o *offer) slots(t tier.Tier) int {
	k := o.node.class
	return tier.Slots(k.slots, k.gold, k.NoBronze, t)
}

// acquire takes a slot, counting it in the model's load.
func (o *offer) acquire() {
	o.running++
	o.model.cands[o.ci].Running = o.running
	if o.node.online() {
		o.model.onlineRunning++
	}
}

// free frees a slot.
func (o *offer) free() {
	o.running--
	o.model.cands[o.ci].Running = o.running
	if o.node.online() {
		o.model.onlineRunning--
	}
	o.hint.Freed()
}

// Watch keeps the hint of the model's index, told of every slot freed, as the fleet's offer
// does (matcher.Watched).
func (o *offer) Watch(h *matcher.FreeHint) bool {
	o.hint = h
	return true
}

// price is what the offer asks at t, surge included, as fleet.Offer.Price reads it: the ask
// schedule's window at t (or the flat ask), times the node's spread, times the model's surge.
func (o *offer) price(t time.Time) (in, out money.Price, window string, surge int64, until time.Time) {
	ask := o.asks.At(t, o.in, o.out)
	surge = o.model.surge
	in, out = ask.Input, ask.Output
	if s := o.node.spread; s != 10000 {
		in, out = tier.Scale(in, s), tier.Scale(out, s)
	}
	return tier.Scale(in, surge), tier.Scale(out, surge), ask.Window, surge, ask.Until
}

// candidate is the offer as the matcher sees it at t (fleet.Offer.Candidate's fields), its
// slot the offer. A node outside its windows is paused; one whose connection dropped is not
// marked, as the fleet's snapshot does not know yet: its slot refuses jobs until it is back.
func (o *offer) candidate(t time.Time) matcher.Candidate {
	n, k := o.node, o.node.class
	c := matcher.Candidate{
		NodeID: n.id, ProviderID: n.provider, Region: n.region,
		Running: o.running, MaxConcurrent: k.slots, GoldSlots: k.gold,
		NoBronze: k.NoBronze, NoBatch: k.NoBatch, Reliability: k.Reliability, Quantization: k.Quantization,
		RTT: k.RTT, TTFT: k.TTFT, TokensPerSecond: k.TokensPerSecond, Warm: true, Continues: k.continues,
		Paused: !n.open, Level: k.level, Slot: o,
	}
	c.InputPrice, c.OutputPrice, c.AskWindow, c.Surge, c.PriceUntil = o.price(t)
	return c
}

// freed is the candidate of an offer one of whose slots is being freed, as a waiter would see
// it once the slot is free (the core's freed).
func (o *offer) freed(t time.Time) matcher.Candidate {
	c := o.candidate(t)
	c.Running--
	return c
}

// model is one model's market in a partition: its offers, their matcher index, its surge.
type model struct {
	index  int
	name   string
	offers []*offer
	// cands are the offers' candidates, their slot counts and pauses kept live: what Match
	// ranks (the core ranks a snapshot at most 250 ms old). The index is built from them.
	cands  []matcher.Candidate
	ix     *matcher.Index
	stale  bool          // the index must be built again before the next decision
	until  time.Duration // when the first ask changes by its schedule; 0: never
	surge  int64         // basis points
	surger *pricing.Surge

	onlineSlots, onlineRunning int // of the nodes that take jobs now: surge's utilization

	bronze, batchJobs jobList // running, newest last: what gold, and any live request, may preempt
	runs              []*batchRun
	polling, trying   bool // the batch runner: a look scheduled, and looking now
}

// index returns the model's matcher index, built again when the offers changed (a window
// opened or closed, a price moved) as the core builds its per-model index again when the
// fleet changes or an ask's PriceUntil passes.
func (p *part) index(m *model) *matcher.Index {
	if m.ix != nil && !m.stale && (m.until == 0 || p.now < m.until) {
		return m.ix
	}
	t := p.clock()
	m.until = 0
	for i, o := range m.offers {
		m.cands[i] = o.candidate(t)
		if u := m.cands[i].PriceUntil; !u.IsZero() {
			if d := u.Sub(p.w.start); m.until == 0 || d < m.until {
				m.until = d
			}
		}
	}
	m.ix = matcher.NewIndex(m.cands)
	m.ix.Track() // as the core's: it skips the full nodes
	m.stale = false
	p.st.rebuilds++
	return m.ix
}

// goOnline marks the node online: in its window and connected. Its slots are offered to the
// waiting requests at once (the core's waiters look again when the fleet changes), then to the
// batches.
func (p *part) goOnline(n *node) {
	n.since = p.now
	for _, o := range n.offers {
		o.model.onlineSlots += n.class.slots
		o.model.onlineRunning += o.running
	}
	p.scheduleDrop(n)
	for _, o := range n.offers {
		p.handFree(o)
		p.tryBatches(o.model)
	}
}

// goOffline marks the node offline; its online time is counted.
func (p *part) goOffline(n *node) {
	p.st.online(n, n.since, p.now)
	for _, o := range n.offers {
		o.model.onlineSlots -= n.class.slots
		o.model.onlineRunning -= o.running
	}
	n.gen++ // its pending drop is void
}

// scheduleDrop draws the node's next drop while it is online: drops come at DropsPerDay on
// average per day online.
func (p *part) scheduleDrop(n *node) {
	rate := n.class.DropsPerDay
	if rate <= 0 {
		return
	}
	wait := time.Duration(n.rng.ExpFloat64() / rate * float64(24*time.Hour))
	p.at(p.now+wait, event{kind: evDrop, ref: n, gen: n.gen})
}

// window flips the node's availability at one of its window's edges and schedules the next.
func (p *part) window(n *node) {
	t := p.clock()
	open := n.class.windows.Open(t)
	if open != n.open {
		wasOnline := n.online()
		n.open = open
		for _, o := range n.offers {
			o.model.cands[o.ci].Paused = !open
			o.model.stale = true // the core's snapshot is built again when a node pauses or resumes
		}
		switch {
		case wasOnline && !n.online():
			p.goOffline(n)
		case !wasOnline && n.online():
			p.goOnline(n)
		}
		if !open {
			// Jobs running go on for the drain, then are handed back (the agent's drain).
			n.closed = p.now
			p.at(p.now+n.class.Drain, event{kind: evDrained, ref: n, gen: n.gen})
		}
	}
	p.nextWindow(n)
}

// nextWindow schedules the node's next window edge, if any before the end.
func (p *part) nextWindow(n *node) {
	next := n.class.windows.Next(p.clock())
	if next.IsZero() {
		return
	}
	if d := next.Sub(p.w.start); d < p.w.end {
		p.at(d, event{kind: evWindow, ref: n})
	}
}

// drop drops the node's connection: its jobs fail, and it is back after Reconnect.
func (p *part) drop(n *node) {
	if !n.online() {
		return
	}
	p.st.drops++
	n.down = true
	p.goOffline(n)
	for _, o := range n.offers {
		for len(o.jobs) > 0 {
			p.cut(o.jobs[len(o.jobs)-1], cutDropped)
		}
	}
	p.at(p.now+n.class.Reconnect, event{kind: evReconnect, ref: n})
}

// reconnect brings a dropped node back.
func (p *part) reconnect(n *node) {
	n.down = false
	if n.online() {
		p.goOnline(n)
	}
}

// drained hands back the jobs still running on a node whose window closed a drain ago.
func (p *part) drained(n *node) {
	if n.open {
		return
	}
	var late []*job
	for _, o := range n.offers {
		for _, j := range o.jobs {
			if j.start <= n.closed {
				late = append(late, j)
			}
		}
	}
	for _, j := range late {
		p.cut(j, cutDrained)
	}
}

// handFree offers each free slot of o to the waiting requests, first in line first.
func (p *part) handFree(o *offer) {
	for !p.q.Empty() && o.node.online() && o.running < o.slots(tier.Gold) {
		c := o.candidate(p.clock())
		p.handed = nil
		if !p.q.Hand(o.model.name, o, &c) {
			return
		}
		o.acquire()
		p.handedOver(p.handed, o)
	}
}
