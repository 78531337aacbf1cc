package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
)

// Dynamic prices (docs/architecture.md, "Dynamic pricing"): an offer asks by its ask schedule
// (the provider file's, or the one its owner set for the node in the console, which wins), and
// the operator's surge multiplies that ask by a model's smoothed utilization. Offer.Price is
// the one place the price in effect is read: the matcher's candidates, /v1/models and the
// console all show it.

// Price is what an offer asks at some time: the ask in effect times the model's surge, per
// million tokens, before the tier multiplier and the fee.
type Price struct {
	Input, Output money.Price
	Window        string    // the ask schedule's window in effect; "": the flat ask
	Surge         int64     // the surge multiplier in basis points; 10000: ×1
	Until         time.Time // when the schedule's ask may change next; zero: never
}

// AskAt returns the offer's ask in effect at t, before surge: the prices of its schedule's
// window open at t, or else its flat ask.
func (o *Offer) AskAt(t time.Time) pricing.Ask {
	return o.schedule().At(t, money.Price(o.InputPrice), money.Price(o.OutputPrice))
}

// schedule is the compiled ask schedule the offer prices by. An offer the fleet did not
// register (a what-if ranking, a test) prices by its own.
func (o *Offer) schedule() *pricing.Asks {
	if a := o.asks.Load(); a != nil || o.fleet != nil {
		return a
	}
	a, _ := pricing.Compile(o.Offer.AskSchedule)
	return a
}

// Price returns what the offer asks now, on its fleet's clock, surge included.
func (o *Offer) Price() Price {
	now, surge := time.Now(), int64(10000)
	if f := o.fleet; f != nil {
		now, surge = f.cfg.Now(), f.surgeOf(o.Model)
	}
	ask := o.AskAt(now)
	return Price{Input: tier.Scale(ask.Input, surge), Output: tier.Scale(ask.Output, surge), Window: ask.Window, Surge: surge, Until: ask.Until}
}

// AskSchedule returns the ask schedule the offer prices by: the node's from the console, or
// else the offer's own; nil: the flat ask always.
func (o *Offer) AskSchedule() *protocol.AskSchedule { return o.schedule().Schedule() }

// Published returns the offer as another replica is to see it: with the ask schedule it prices
// by, so that every replica prices it alike.
func (o *Offer) Published() protocol.Offer {
	p := o.Offer
	p.AskSchedule = o.AskSchedule()
	return p
}

// initAsks compiles the offers' own ask schedules, checked at registration, unless the node
// has one set in the console (store), which replaces them. A stored schedule that cannot be
// read (it was checked when set) leaves the offers' own, with a warning.
func (f *Fleet) initAsks(ctx context.Context, n *Node) {
	for _, o := range n.Offers {
		o.fleet = f
		own, _ := pricing.Compile(o.Offer.AskSchedule) // checked by checkOffers
		o.own = own
		o.asks.Store(own)
	}
	raw, err := f.cfg.Store.NodeAskSchedule(ctx, n.ID)
	if err != nil {
		f.log.Warn("read the node's ask schedule: pricing by the offers' own", logNode, n.ID, "err", err)
		return
	}
	if raw == "" {
		return
	}
	s, err := DecodeAskSchedule(raw)
	if err == nil {
		err = n.setAsks(s)
	}
	if err != nil {
		f.log.Warn("the node's ask schedule: pricing by the offers' own", logNode, n.ID, "err", err)
	}
}

// DecodeAskSchedule reads an ask schedule as the store keeps it (JSON), checking it.
func DecodeAskSchedule(raw string) (*protocol.AskSchedule, error) {
	var s protocol.AskSchedule
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("ask schedule: %w", err)
	}
	if _, err := pricing.Compile(&s); err != nil {
		return nil, fmt.Errorf("ask schedule: %w", err)
	}
	return &s, nil
}

// setAsks makes every offer of the node price by s; nil: by their own schedules again.
func (n *Node) setAsks(s *protocol.AskSchedule) error {
	asks, err := pricing.Compile(s)
	if err != nil {
		return err
	}
	for _, o := range n.Offers {
		if s == nil {
			o.asks.Store(o.own)
		} else {
			o.asks.Store(asks)
		}
	}
	return nil
}

// SetAskSchedule makes a connected node's offers price by s at once, the node's owner having
// set it in the console (and the caller stored it); nil goes back to the offers' own. It
// reports whether this replica holds the node; another one takes it from the store when the
// node connects to it. The rankings see the new prices at once.
func (f *Fleet) SetAskSchedule(nodeID string, s *protocol.AskSchedule) (bool, error) {
	n := f.Node(nodeID)
	if n == nil || n.remote != nil {
		return false, nil
	}
	if err := n.setAsks(s); err != nil {
		return true, err
	}
	f.changedNow()
	return true, nil
}

// sameOffer reports whether two offers are the same, their ask schedules compared by value.
func sameOffer(a, b protocol.Offer) bool {
	as, bs := a.AskSchedule, b.AskSchedule
	a.AskSchedule, b.AskSchedule = nil, nil
	if a != b || (as == nil) != (bs == nil) {
		return false
	}
	return as == nil || as.Timezone == bs.Timezone && slices.Equal(as.Windows, bs.Windows)
}

// The surge's state: each model's smoothed utilization and multiplier (the sampler's, under
// surgeMu, a leaf lock), and the multipliers the offers read, published as a whole.
type surges struct {
	mu     sync.Mutex
	models map[string]*pricing.Surge
	last   time.Time
	now    atomic.Pointer[map[string]int64] // model → multiplier in basis points
}

// DefaultSurgeInterval is how often the fleet samples the models' utilization for surge.
const DefaultSurgeInterval = 15 * time.Second

// surgeOf returns the model's surge multiplier in basis points: 10000 (×1) when surge is off.
func (f *Fleet) surgeOf(model string) int64 {
	if m := f.surge.now.Load(); m != nil {
		if bp, ok := (*m)[model]; ok {
			return bp
		}
	}
	return f.cfg.Surge.Start() // before the model's first sample
}

// Surge returns the model's surge multiplier in basis points (10000: ×1).
func (f *Fleet) Surge(model string) int64 { return f.surgeOf(model) }

// SampleSurge samples every model's utilization, slots running ÷ slots of its nodes that take
// jobs now (live, not paused), into its surge, and publishes the multipliers; when one
// changes, the rankings see it at once. A model whose nodes take no jobs now keeps its
// multiplier. The fleet's Run calls it every SurgeInterval when surge is on.
func (f *Fleet) SampleSurge() {
	if !f.cfg.Surge.Enabled {
		return
	}
	type load struct{ running, slots int }
	loads := map[string]load{}
	f.mu.RLock()
	for model, offers := range f.byModel {
		var l load
		for _, o := range offers {
			if !o.Live() || o.Node == nil || o.Node.Paused() != "" || o.Node.Gone() {
				continue
			}
			l.running += o.Running()
			l.slots += o.MaxConcurrent
		}
		loads[model] = l
	}
	f.mu.RUnlock()

	s := &f.surge
	s.mu.Lock()
	now := f.cfg.Now()
	dt := now.Sub(s.last)
	if s.last.IsZero() {
		dt = 0
	}
	s.last = now
	if s.models == nil {
		s.models = map[string]*pricing.Surge{}
	}
	out := make(map[string]int64, len(loads))
	for model, l := range loads {
		sg := s.models[model]
		if sg == nil {
			sg = pricing.NewSurge(f.cfg.Surge)
			s.models[model] = sg
		}
		if l.slots > 0 {
			sg.Observe(float64(l.running)/float64(l.slots), dt)
		}
		out[model] = sg.Multiplier()
	}
	maps.DeleteFunc(s.models, func(model string, _ *pricing.Surge) bool { _, ok := loads[model]; return !ok })
	old := s.now.Swap(&out)
	s.mu.Unlock()
	if old == nil || !maps.Equal(*old, out) {
		f.changedNow()
	}
}

// surgeLoop samples surge every interval until ctx is done.
func (f *Fleet) surgeLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.SampleSurge()
		}
	}
}
