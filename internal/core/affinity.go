package core

import (
	"sync"
	"time"
)

// affinityTTL is how long a session keeps its node after its last request.
const affinityTTL = 30 * time.Minute

// maxSessions bounds the sessions remembered; the oldest are forgotten first.
const maxSessions = 100_000

// affinity remembers which node served a buyer's session last, so the next request of the
// session goes there while it is eligible and the engine's prompt cache keeps working.
type affinity struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]sessionNode
}

type sessionNode struct {
	node string
	seen time.Time
}

func (a *affinity) get(key string) string {
	if key == "" {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	sn, ok := a.m[key]
	if !ok || a.now().Sub(sn.seen) > affinityTTL {
		return ""
	}
	return sn.node
}

func (a *affinity) put(key, node string) {
	if key == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = make(map[string]sessionNode)
	}
	if len(a.m) >= maxSessions {
		a.evict()
	}
	a.m[key] = sessionNode{node: node, seen: a.now()}
}

// evict forgets expired sessions, or half of them when none has expired.
func (a *affinity) evict() {
	now := a.now()
	for k, sn := range a.m {
		if now.Sub(sn.seen) > affinityTTL {
			delete(a.m, k)
		}
	}
	for k := range a.m {
		if len(a.m) < maxSessions/2 {
			break
		}
		delete(a.m, k)
	}
}
