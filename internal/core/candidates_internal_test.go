package core

import (
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
)

// A large index older than candidateTTL is served while one build makes it again aside, so
// that no decision waits for a build that takes tens of milliseconds at 100,000 nodes; one
// whose fleet changed (a node joined) is built again at once, and the decision waits for it.
// A small index is built again at once, as it always was.
func TestIndex_BuiltAgainAside(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	f := fleet.New(fleet.Config{Now: clock})
	put := func(id string) {
		f.PutRemote(fleet.RemoteNode{ID: id, AccountID: "acct-" + id, Owner: "peer", Region: "de",
			Offers: []fleet.RemoteOffer{{Offer: protocol.Offer{Model: "m", MaxConcurrent: 2, InputPrice: 1e6, OutputPrice: 2e6}}}})
	}
	put("a")
	put("b")
	c := &Core{cfg: Config{Fleet: f, Now: clock}}

	first := c.index("m")
	advance(candidateTTL)
	if again := c.index("m"); again == first {
		t.Fatal("a small index older than candidateTTL was served, not built again")
	}

	defer func(n int) { asideAt = n }(asideAt)
	asideAt = 2
	old := c.index("m")
	advance(candidateTTL)
	if got := c.index("m"); got != old {
		t.Fatal("a large index older than candidateTTL was not served while built again")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := c.cands.get("m")
		if s.index != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the index was never built again aside")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range c.cands.build { // and the build aside has ended
		c.cands.build[i].Lock()
		c.cands.build[i].Unlock()
	}

	put("c") // a node joins: the index no longer holds the fleet's nodes
	if got := c.index("m"); got.Len() != 3 {
		t.Errorf("after a node joined, the decision's index has %d candidates, want 3 at once", got.Len())
	}
}

// An index lives candidateTTL, or four times as long as it took to build: at 100,000 nodes
// building every 250 ms would keep most of a core busy.
func TestTTLFor(t *testing.T) {
	for _, c := range []struct{ build, want time.Duration }{
		{0, candidateTTL}, {time.Millisecond, candidateTTL}, {62 * time.Millisecond, candidateTTL},
		{150 * time.Millisecond, 600 * time.Millisecond}, {time.Second, 4 * time.Second},
	} {
		if got := ttlFor(c.build); got != c.want {
			t.Errorf("ttlFor(%v) = %v, want %v", c.build, got, c.want)
		}
	}
}
