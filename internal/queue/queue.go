// Package queue is where a request waits for a free slot when every node that fits it is
// busy. There is one line per model, ordered by tier (gold first), then continuations of
// answers already started before new requests of their tier, then by arrival; batch lines'
// continuations (JoinBatch) come after every live request. A slot about
// to be freed is handed to the first waiter in line that it fits, so a request that waits
// longer, or of a higher tier, is never overtaken by a later one the same slot fits.
//
// The queue knows nothing of nodes: a slot is any comparable value S, and a waiter says which
// slots fit it by a probe P of the slot, which the caller of Hand prepares once for all the
// waiters it asks.
package queue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/tier"
)

// Full is the error of Join when a bound is reached.
type Full struct {
	Model string
	Key   bool // the key's bound (Config.PerKey), not the model's
	Limit int
}

func (e *Full) Error() string {
	if e.Key {
		return fmt.Sprintf("this API key has %d requests waiting for a free node already", e.Limit)
	}
	return fmt.Sprintf("%d requests are waiting for a free node serving %s already", e.Limit, e.Model)
}

// ErrClosed is the error of Join once the queue is closed.
var ErrClosed = errors.New("queue closed")

// Queue holds the waiting requests of every model.
type Queue[S comparable, P any] struct {
	cfg Config

	mu     sync.Mutex
	lines  map[string][]*Ticket[S, P] // model → waiters, first served first
	keys   map[string]int             // API key → its waiters
	seq    uint64
	closed bool
	n      atomic.Int64 // waiters, read without the lock by Empty
}

// New returns an empty queue.
func New[S comparable, P any](cfg Config) *Queue[S, P] {
	return &Queue[S, P]{cfg: cfg.withDefaults(), lines: map[string][]*Ticket[S, P]{}, keys: map[string]int{}}
}

// Config returns the queue's configuration, with its defaults.
func (q *Queue[S, P]) Config() Config { return q.cfg }

// Ticket is one request's place in a model's line.
type Ticket[S comparable, P any] struct {
	Model, Key   string
	Tier         tier.Tier
	Continuation bool
	Batch        bool // a batch line's continuation: after every live request
	Joined       time.Time

	q      *Queue[S, P]
	seq    uint64
	fits   func(P) bool
	handed chan S // the slot handed over, once
	in     bool   // in its line (q.mu)
}

// Join puts a request in the line of model. fits says whether a slot, by its probe, may go to
// it; it is called under the queue's lock, from the goroutine freeing a slot, and must be quick
// and take no lock that a slot's release may hold. The ticket must be given up with Leave.
func (q *Queue[S, P]) Join(model, key string, t tier.Tier, continuation bool, fits func(P) bool, now time.Time) (*Ticket[S, P], error) {
	return q.join(model, key, t, continuation, false, fits, now)
}

// JoinBatch is Join for a batch line's continuation (a bronze one): it waits after every live
// request, gold, silver or bronze.
func (q *Queue[S, P]) JoinBatch(model, key string, fits func(P) bool, now time.Time) (*Ticket[S, P], error) {
	return q.join(model, key, tier.Bronze, true, true, fits, now)
}

func (q *Queue[S, P]) join(model, key string, t tier.Tier, continuation, batch bool, fits func(P) bool, now time.Time) (*Ticket[S, P], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	line := q.lines[model]
	if len(line) >= q.cfg.Length {
		return nil, &Full{Model: model, Limit: q.cfg.Length}
	}
	if q.keys[key] >= q.cfg.PerKey {
		return nil, &Full{Model: model, Key: true, Limit: q.cfg.PerKey}
	}
	q.seq++
	tk := &Ticket[S, P]{Model: model, Key: key, Tier: t, Continuation: continuation, Batch: batch, Joined: now,
		q: q, seq: q.seq, fits: fits, handed: make(chan S, 1), in: true}
	i, _ := slices.BinarySearchFunc(line, tk, func(a, b *Ticket[S, P]) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	q.lines[model] = slices.Insert(line, i, tk)
	q.keys[key]++
	q.n.Add(1)
	return tk, nil
}

// before says whether a is served before b.
func (a *Ticket[S, P]) before(b *Ticket[S, P]) bool {
	switch {
	case a.Batch != b.Batch:
		return b.Batch
	case a.Tier.Rank() != b.Tier.Rank():
		return a.Tier.Rank() < b.Tier.Rank()
	case a.Continuation != b.Continuation:
		return a.Continuation
	}
	return a.seq < b.seq
}

// Hand offers a slot of model about to be freed, probed as p, to the waiters, first in line
// first, and gives it to the first it fits: it returns whether one took it (the slot is then
// that waiter's, and Ready delivers it).
func (q *Queue[S, P]) Hand(model string, s S, p P) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[model]
	for i, tk := range line {
		if tk.fits(p) {
			q.remove(model, i)
			tk.handed <- s // never blocks: a ticket is handed one slot, once
			return true
		}
	}
	return false
}

// remove takes the i-th waiter out of model's line (q.mu held).
func (q *Queue[S, P]) remove(model string, i int) {
	line := q.lines[model]
	tk := line[i]
	tk.in = false
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(q.lines, model)
	} else {
		q.lines[model] = line
	}
	if q.keys[tk.Key]--; q.keys[tk.Key] <= 0 {
		delete(q.keys, tk.Key)
	}
	q.n.Add(-1)
}

// Fits reports whether a slot probed as p would fit the ticket.
func (tk *Ticket[S, P]) Fits(p P) bool { return tk.fits(p) }

// Ready delivers the slot handed to the ticket.
func (tk *Ticket[S, P]) Ready() <-chan S { return tk.handed }

// Leave takes the ticket out of its line. When a slot was handed to it meanwhile, it returns
// it with true: the caller uses it or frees it.
func (tk *Ticket[S, P]) Leave() (S, bool) {
	q := tk.q
	q.mu.Lock()
	if tk.in {
		q.remove(tk.Model, slices.Index(q.lines[tk.Model], tk))
	}
	q.mu.Unlock()
	select {
	case s := <-tk.handed:
		return s, true
	default:
		var zero S
		return zero, false
	}
}

// Ahead returns how many waiters of model are before tk in line, or -1 once it left.
func (tk *Ticket[S, P]) Ahead() int {
	q := tk.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !tk.in {
		return -1
	}
	return slices.Index(q.lines[tk.Model], tk)
}

// Waiting returns how many requests wait, by tier.
func (q *Queue[S, P]) Waiting() map[tier.Tier]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := map[tier.Tier]int{}
	for _, line := range q.lines {
		for _, tk := range line {
			n[tk.Tier]++
		}
	}
	return n
}

// Empty reports whether no request waits, without taking the queue's lock: the cheap test a
// slot's release makes before Hand.
func (q *Queue[S, P]) Empty() bool { return q.n.Load() == 0 }

// Len returns how many requests wait for model.
func (q *Queue[S, P]) Len(model string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines[model])
}

// Live returns how many live requests (not batch lines) wait for model.
func (q *Queue[S, P]) Live(model string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, tk := range q.lines[model] {
		if tk.Batch {
			break // batch lines wait last
		}
		n++
	}
	return n
}

// Close refuses new waiters; those waiting stay until they leave.
func (q *Queue[S, P]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}
