package sqlstore

import (
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
)

// A lazy hold decided in memory (SQLite). placeLazy's read of the buyer's balance and caps is
// one statement on the readers' pool, 40–50 µs of a request's CPU and its path to the first
// token, and under load the same buyer's holds read the same rows again and again between
// two commits. So placeLazy keeps what it read (lazyFunds) until the next commit of this
// process (DB.commits, counted under db.lazyMu: every change of a balance, a hold, a cap or a
// window's spending is a commit) and decides the next holds on it, less the pending holds as
// ever. Two things it cannot see from there:
//   - A change by another process on the same file (shareai admin credit, shareai admin cap).
//     A hold the kept read refuses is decided again on a fresh read, so money added elsewhere
//     counts at once; a cap lowered elsewhere counts within fundsFor.
//   - Whether the request was held already. heldIDs knows it for the ids this process made
//     (requestid.New, which carries the time) lately: such an id is in the database only if
//     this process held it. Any other id (a batch line's from another run, a test's) is read.

// fundsFor bounds how long a read of a buyer's money is kept, for a cap lowered by another
// process on the same file.
const fundsFor = time.Second

// lazyKey names what placeLazy reads: the buyer's ledger account, the key's and the account's
// cap scopes, and the day's, week's and month's windows.
type lazyKey struct {
	buyer, key, account string
	windows             [3]int64
}

func newLazyKey(h *store.Hold) lazyKey {
	k := lazyKey{buyer: buyerAccount(h.AccountID), key: store.KeyScope(h.KeyID), account: store.AccountScope(h.AccountID)}
	for i, p := range [3]string{store.Daily, store.Weekly, store.Monthly} {
		k.windows[i] = millis(store.WindowStart(p, h.CreatedAt))
	}
	return k
}

// lazyFunds is placeLazy's read: the buyer's balance and held amount, and each cap of the
// key's and the account's with its window's spending and holds, the key's first.
type lazyFunds struct {
	balance, held money.Nanos
	caps          []capFunds
}

type capFunds struct {
	c           store.Cap
	spent, held money.Nanos
}

// maxFunds bounds the reads kept: past it they are dropped, all at once.
const maxFunds = 4096

// fundsCache keeps reads by key, each with the commit count and time it was made at; by
// db.lazyMu.
type fundsCache struct {
	m map[lazyKey]keptFunds
}

type keptFunds struct {
	f       *lazyFunds
	commits uint64
	at      time.Time
}

// get returns the read of k if no commit came since and it is younger than fundsFor, else nil.
func (c *fundsCache) get(k lazyKey, commits uint64, now time.Time) *lazyFunds {
	kf, ok := c.m[k]
	if !ok || kf.commits != commits || now.Sub(kf.at) >= fundsFor || now.Before(kf.at) {
		return nil
	}
	return kf.f
}

func (c *fundsCache) put(k lazyKey, f *lazyFunds, commits uint64, now time.Time) {
	if c.m == nil || len(c.m) >= maxFunds {
		c.m = make(map[lazyKey]keptFunds)
	}
	c.m[k] = keptFunds{f, commits, now}
}

// heldFor is how long heldIDs remembers an id after its time: a request held later than
// that after its id was made (one that waited in a queue) is looked up in the database.
const heldFor = 5 * time.Second

// heldIDs are the ids made by requestid.New, since this process started, of the requests it
// held (lazily or not), for heldFor after their time; by db.lazyMu. An id made by this
// process is held in the database only if this process held it: known answers from memory
// for those it can vouch for.
type heldIDs struct {
	start   int64 // ms: the ids made before may be in the database from an earlier run
	evicted int64 // ms: the latest time of an id forgotten
	m       map[string]struct{}
	order   []heldID // as added; from head on
	head    int
}

type heldID struct {
	id string
	ms int64
}

func newHeldIDs(now time.Time) heldIDs {
	return heldIDs{start: now.UnixMilli(), m: make(map[string]struct{})}
}

// add remembers id, held now, and forgets the ids older than heldFor.
func (h *heldIDs) add(id string, now time.Time) {
	if t, ok := requestid.Minted(id); ok && t.UnixMilli() >= h.start {
		if _, dup := h.m[id]; !dup {
			h.m[id] = struct{}{}
			h.order = append(h.order, heldID{id, t.UnixMilli()})
		}
	}
	cutoff := now.Add(-heldFor).UnixMilli()
	for h.head < len(h.order) && h.order[h.head].ms < cutoff {
		old := h.order[h.head]
		delete(h.m, old.id)
		h.evicted = max(h.evicted, old.ms)
		h.order[h.head] = heldID{}
		h.head++
	}
	if h.head > 1024 && h.head > len(h.order)/2 {
		h.order = append(h.order[:0], h.order[h.head:]...)
		h.head = 0
	}
}

// known reports whether request id was held, and whether that answer is sure: it is for an
// id made by this process after any it forgot.
func (h *heldIDs) known(id string) (held, sure bool) {
	t, ok := requestid.Minted(id)
	if !ok || t.UnixMilli() < h.start || t.UnixMilli() <= h.evicted {
		return false, false
	}
	_, held = h.m[id]
	return held, true
}
