package core

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/fleet"
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
	// served is when each model last had a node serving it, for a while: a model whose
	// nodes all dropped a moment ago is waited for, not unknown.
	served map[string]time.Time
	// build serializes the builds of each model's index, by a hash of its name: a fixed
	// set, so that unknown names add nothing.
	build [16]sync.Mutex
}

// servedFor is how long a model whose nodes all left counts as served: requests for it wait
// in the queue for a node to come back, rather than get 404.
const servedFor = time.Minute

type candidateSnapshot struct {
	index   *matcher.Index // shared by concurrent decisions: read-only
	at      time.Time
	ttl     time.Duration   // candidateTTL, or longer for an index slow to build (ttlFor)
	until   time.Time       // when the first candidate's ask changes by its schedule; zero: never
	changed <-chan struct{} // closed when a node joins or leaves, or a price changes otherwise
}

// fresh reports whether the snapshot may still be used at now: younger than its ttl,
// and current.
func (s candidateSnapshot) fresh(now time.Time) bool {
	return now.Sub(s.at) < s.ttl && s.current(now)
}

// ttlFor is how long an index that took build to build lives: candidateTTL, or buildShare
// times its build, so that building a model's indexes again takes at most 1/buildShare of a
// core (at 100,000 nodes a build takes 100-200 ms). Its slot counts are live all along
// (tracked); what ages is the measurements it ranks by, which change over seconds.
func ttlFor(build time.Duration) time.Duration { return max(candidateTTL, buildShare*build) }

// buildShare: see ttlFor.
const buildShare = 4

// current reports whether the snapshot's nodes and asks are still the fleet's at now: no
// node joined or left, and no ask changed since, so that a decision ranks, filters on
// max_price and pays the ask in effect now.
func (s candidateSnapshot) current(now time.Time) bool {
	return (s.until.IsZero() || now.Before(s.until)) && !closed(s.changed)
}

// priceUntil is the first time one of cands' asks changes by its schedule; zero: never.
func priceUntil(cands []matcher.Candidate) time.Time {
	var first time.Time
	for _, c := range cands {
		if u := c.PriceUntil; !u.IsZero() && (first.IsZero() || u.Before(first)) {
			first = u
		}
	}
	return first
}

// index returns the index of a model's candidates, as recent as its ttl. One decision
// at a time builds a model's index again; the others that find it stale wait for that one
// instead of each building their own. A large index (asideAt candidates or more: at 100,000
// nodes a build takes a hundred milliseconds or more) that is only older than its ttl, its fleet
// and asks unchanged, is built again aside while decisions go on with it: its slot counts
// are a little older, which costs at most a try on a busy node, where waiting would stall
// every decision for the model. The index is tracked (matcher.Index.Track): the fleet's
// offers tell it when they free a slot.
func (c *Core) index(model string) *matcher.Index {
	s, ok := c.cands.get(model)
	if ok && s.fresh(c.cfg.Now()) {
		return s.index
	}
	b := &c.cands.build[maphash.String(buildSeed, model)%uint64(len(c.cands.build))]
	if ok && s.index.Len() >= asideAt && s.current(c.cfg.Now()) {
		if b.TryLock() {
			go func() {
				defer b.Unlock()
				if s, ok := c.cands.get(model); !ok || !s.fresh(c.cfg.Now()) {
					c.buildIndex(model)
				}
			}()
		}
		return s.index
	}
	b.Lock()
	defer b.Unlock()
	if s, ok := c.cands.get(model); ok && s.fresh(c.cfg.Now()) {
		return s.index // built while this decision waited
	}
	return c.buildIndex(model)
}

// asideAt is how many candidates an index has for index to build it again aside once it is
// older than its ttl (a variable for the tests).
var asideAt = 10_000

// buildIndex builds a model's index and keeps it; the caller holds the model's build lock.
func (c *Core) buildIndex(model string) *matcher.Index {
	now := c.cfg.Now()
	start := time.Now()              // the build's cost, whatever clock decisions keep
	changed := c.cfg.Fleet.Changed() // before the snapshot: a change after it invalidates it
	cands := fleet.Candidates(c.cfg.Fleet.Offers(model))
	s := candidateSnapshot{index: matcher.NewIndex(cands), at: now, until: priceUntil(cands), changed: changed}
	s.index.Track()
	s.ttl = ttlFor(time.Since(start))
	c.cands.mu.Lock()
	if c.cands.m == nil {
		c.cands.m = make(map[string]candidateSnapshot)
	}
	if s.index.Len() == 0 {
		delete(c.cands.m, model) // unknown names must not fill the map
	} else {
		c.cands.m[model] = s
		c.cands.servedNow(model, now)
	}
	c.cands.mu.Unlock()
	return s.index
}

// buildSeed spreads models over candidates.build.
var buildSeed = maphash.MakeSeed()

// get returns the model's snapshot, if there is one.
func (c *candidates) get(model string) (candidateSnapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[model]
	return s, ok
}

// servedNow records that a node serves model (c.mu held), forgetting the models none has
// served for servedFor once the map has grown: it holds only models nodes offered.
func (c *candidates) servedNow(model string, now time.Time) {
	if c.served == nil {
		c.served = make(map[string]time.Time)
	}
	if _, ok := c.served[model]; !ok && len(c.served) >= 2*len(c.m)+64 {
		for m, at := range c.served {
			if now.Sub(at) > servedFor {
				delete(c.served, m)
			}
		}
	}
	c.served[model] = now
}

// servedRecently reports whether some node may serve model: one did within servedFor, as
// this core's decisions saw it or as the fleet saw its last node leave (a replica that just
// started saw the nodes its peers held, and none of its own decisions yet), or the fleet is
// still joining its peers, whose nodes are not in view yet (a replica a moment after its
// start, which a load balancer may send requests before its readiness check says so).
func (c *Core) servedRecently(model string) bool {
	if c.cfg.Fleet.Joining() {
		return true
	}
	now := c.cfg.Now()
	if left := c.cfg.Fleet.LeftAt(model); !left.IsZero() && now.Sub(left) <= servedFor {
		return true
	}
	c.cands.mu.Lock()
	defer c.cands.mu.Unlock()
	at, ok := c.cands.served[model]
	return ok && now.Sub(at) <= servedFor
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
