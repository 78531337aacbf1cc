package gateway

import (
	"sync"
	"time"

	"github.com/shareai/shareai/internal/matcher"
)

// candidateTTL is how old the slot counts and measurements a decision ranks by may be. Taking
// a slot is always live, so a stale count only costs a try on a node that turns out busy.
const candidateTTL = 250 * time.Millisecond

// candidates keeps each model's matcher index for a short while, so that a decision does not
// copy the fleet: it allocates nothing that grows with the number of nodes, and with the
// default preferences it walks only from the best nodes down.
type candidates struct {
	mu sync.Mutex
	m  map[string]candidateSnapshot
}

type candidateSnapshot struct {
	index   *matcher.Index // shared by concurrent decisions: read-only
	at      time.Time
	changed <-chan struct{} // closed when a node joins or leaves
}

// index returns the index of a model's candidates.
func (g *Gateway) index(model string) *matcher.Index {
	now := g.cfg.Now()
	g.cands.mu.Lock()
	s, ok := g.cands.m[model]
	g.cands.mu.Unlock()
	if ok && now.Sub(s.at) < candidateTTL && !closed(s.changed) {
		return s.index
	}
	changed := g.cfg.Fleet.Changed() // before the snapshot: a change after it invalidates it
	s = candidateSnapshot{index: matcher.NewIndex(matcher.FromOffers(g.cfg.Fleet.Offers(model))), at: now, changed: changed}
	g.cands.mu.Lock()
	if g.cands.m == nil {
		g.cands.m = make(map[string]candidateSnapshot)
	}
	if s.index.Len() == 0 {
		delete(g.cands.m, model) // unknown names must not fill the map
	} else {
		g.cands.m[model] = s
	}
	g.cands.mu.Unlock()
	return s.index
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
