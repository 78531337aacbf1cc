package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/store"
)

// The shared limiter counts API keys' rate limits for all the replicas of a network together,
// in the JetStream key-value bucket limitsBucket: one entry per limited key, written with
// optimistic concurrency (Update with the revision last read, Create for a new key, again
// from a fresh read on a wrong last sequence), so two replicas never both take the last unit
// of a limit.
//
// An entry holds the key's requests admitted and tokens billed in the last slots slots of
// slotWidth, newest first, and each replica's lease: its requests and reserved tokens in
// flight, with an expiry that the replica renews every leaseRenew while it has any. A
// request counts from its admission until its slot leaves the window: 60 to 65 s, never
// less, so no 60 s ever holds more than the limit; a crashed replica's requests in flight
// stop counting when its lease expires (leaseTTL).
const (
	limitsBucket = "shareai_limits"
	slotWidth    = 5 * time.Second
	slots        = int(rateWindow/slotWidth) + 1 // the window and the slot it began in
	// bucketTTL is how long an entry that no one writes lives: by then its slots have left the
	// window and its leases have expired.
	bucketTTL  = 2 * rateWindow
	leaseTTL   = 30 * time.Second
	leaseRenew = 10 * time.Second
	// kvTimeout bounds each call to the bucket: past it, a limited key's request is refused
	// with a 503 (fail closed). A JetStream write under load takes a few hundred milliseconds.
	kvTimeout = time.Second
	// bucketTimeout bounds finding (or making) the bucket, which a cluster may take seconds to
	// answer while it elects its leader; a failure is tried again at most once a second.
	bucketTimeout = 2 * time.Second
	casTries      = 32
)

// codeLimiterUnavailable is the code of the 503 of a limited key's request when its limits
// cannot be counted.
const codeLimiterUnavailable = "rate_limiter_unavailable"

// sharedLimiter counts the limits of the keys that have any in NATS (limits.go's limiter hands
// it those; keys without limits never reach it). Each key's entry is written by one request
// of this replica at a time (sharedKey.mu), so the compare-and-swap races only other
// replicas, and the entry last read is kept with its revision: a replica alone on a key
// admits in one round trip.
//
// Lock order: sharedLimiter.mu and a sharedKey's mu are never held together.
type sharedLimiter struct {
	bus  *bus.Bus
	now  func() time.Time
	log  *slog.Logger
	self string // this limiter's lease name: random, so a restarted replica has a new one
	stop chan struct{}

	mu      sync.Mutex // guards the fields below
	kv      jetstream.KeyValue
	err     error     // the last failure to find the bucket
	errTime time.Time // when, in real time

	keys      sync.Map // key id → *sharedKey
	lastSweep atomic.Int64
}

func newSharedLimiter(b *bus.Bus, now func() time.Time, log *slog.Logger) *sharedLimiter {
	var id [8]byte
	rand.Read(id[:])
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &sharedLimiter{bus: b, now: now, log: log, self: hex.EncodeToString(id[:]), stop: make(chan struct{})}
}

// close stops renewing leases: what this limiter has in flight stops counting within leaseTTL.
func (s *sharedLimiter) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
}

// sharedKey is this replica's view of one key's entry.
type sharedKey struct {
	mu       sync.Mutex
	gone     bool   // dropped from the map
	name     string // the entry's key in the bucket
	st       sharedState
	rev      uint64 // st's revision; 0: not read (or not there)
	fresh    bool   // st is the entry as last read or written (else read it)
	n        int    // this replica's requests of the key in flight (counted for Concurrent)
	reserved int    // and their reserved tokens
	renewing bool   // a goroutine renews the lease
	last     time.Time
}

// sharedState is a key's entry in the bucket.
type sharedState struct {
	Slot   int64            `json:"s"` // the newest slot's index: unix time / slotWidth
	Reqs   [slots]int       `json:"r"` // Reqs[i]: requests admitted in slot Slot-i
	Tokens [slots]int       `json:"t"` // Tokens[i]: tokens billed to the requests that ended in it
	Leases map[string]lease `json:"l,omitempty"`
}

// lease is one replica's requests of the key in flight.
type lease struct {
	N        int   `json:"n,omitempty"`
	Reserved int   `json:"r,omitempty"`
	Expires  int64 `json:"e"` // unix milliseconds
}

func slotOf(t time.Time) int64 { return t.UnixNano() / int64(slotWidth) }

// leaves is when what slot i counts leaves the window.
func (st *sharedState) leaves(i int) time.Time {
	return time.Unix(0, (st.Slot-int64(i)+int64(slots))*int64(slotWidth))
}

// advance moves the slots to now's, and forgets expired leases. A replica whose clock is
// behind the entry's counts its requests in the newest slot.
func (st *sharedState) advance(now time.Time) {
	if shift := slotOf(now) - st.Slot; shift > 0 {
		if shift >= int64(slots) {
			st.Reqs, st.Tokens = [slots]int{}, [slots]int{}
		} else {
			n := int(shift)
			copy(st.Reqs[n:], st.Reqs[:slots-n])
			copy(st.Tokens[n:], st.Tokens[:slots-n])
			clear(st.Reqs[:n])
			clear(st.Tokens[:n])
		}
		st.Slot = slotOf(now)
	}
	ms := now.UnixMilli()
	for r, l := range st.Leases {
		if l.Expires <= ms {
			delete(st.Leases, r)
		}
	}
}

// counts are the requests in the window, the tokens billed in it, and the requests and tokens
// in flight.
func (st *sharedState) counts() (reqs, billed, inflight, reserved int) {
	for i := range slots {
		reqs += st.Reqs[i]
		billed += st.Tokens[i]
	}
	for _, l := range st.Leases {
		inflight += l.N
		reserved += l.Reserved
	}
	return
}

// freed is how long until need units of c (oldest last) leave the window; ok is false when
// those in the window are too few.
func (st *sharedState) freed(c *[slots]int, now time.Time, need int) (time.Duration, bool) {
	sum := 0
	for i := slots - 1; i >= 0; i-- {
		if sum += c[i]; c[i] > 0 && sum >= need {
			return st.leaves(i).Sub(now), true
		}
	}
	return 0, false
}

// reset is how long until all of c has left the window.
func (st *sharedState) reset(c *[slots]int, now time.Time) time.Duration {
	for i := range slots {
		if c[i] > 0 {
			return st.leaves(i).Sub(now)
		}
	}
	return 0
}

func (st sharedState) clone() sharedState {
	l := make(map[string]lease, len(st.Leases)+1)
	for k, v := range st.Leases {
		l[k] = v
	}
	st.Leases = l
	return st
}

// admit is limiter.admit for a key with limits lim.
func (s *sharedLimiter) admit(h http.Header, k *store.Key, lim store.RateLimits, tokens int) (*ticket, error) {
	if lim.TokensPerMinute > 0 && tokens > lim.TokensPerMinute {
		st := state{lim: lim, never: true, requestsLeft: lim.RequestsPerMinute, tokensLeft: lim.TokensPerMinute}
		st.write(h)
		return nil, tooLarge(k, lim, tokens)
	}
	now := s.now()
	s.maybeSweep(now)
	sk := s.key(k.ID)
	defer sk.mu.Unlock()
	t := &ticket{sk: sk, s: s, id: k.ID}
	var hs state
	err := s.update(sk, now, func(st *sharedState) (bool, error) {
		reqs, billed, inflight, reserved := st.counts()
		hs = state{lim: lim}
		var refusal *api.Error
		switch {
		case lim.RequestsPerMinute > 0 && reqs >= lim.RequestsPerMinute:
			hs.retryAfter, _ = st.freed(&st.Reqs, now, reqs-lim.RequestsPerMinute+1)
			refusal = limitError(api.TypeRequests, "requests per min (RPM)", k, lim.RequestsPerMinute, reqs, 1, hs.retryAfter)
		case lim.TokensPerMinute > 0 && billed+reserved+tokens > lim.TokensPerMinute:
			wait, ok := st.freed(&st.Tokens, now, billed+reserved+tokens-lim.TokensPerMinute)
			if !ok {
				wait = time.Second // the tokens in flight stand in the way: when they end is not known
			}
			hs.retryAfter = wait
			refusal = limitError(api.TypeTokens, "tokens per min (TPM)", k, lim.TokensPerMinute, billed+reserved, tokens, hs.retryAfter)
		case lim.Concurrent > 0 && inflight >= lim.Concurrent:
			hs.retryAfter = time.Second
			refusal = &api.Error{Status: http.StatusTooManyRequests, Type: api.TypeRequests, Code: api.CodeRateLimitExceeded, RetryAfter: 1,
				Message: fmt.Sprintf("Rate limit reached for concurrent requests on key %s…: Limit %d, Used %d, Requested 1. Please try again once one of them ends.",
					k.Prefix, lim.Concurrent, inflight)}
		}
		if refusal == nil {
			if lim.RequestsPerMinute > 0 {
				st.Reqs[0]++
				reqs++
			}
			if lim.TokensPerMinute > 0 {
				sk.reserved += tokens
				reserved += tokens
				t.tokens, t.tpm = tokens, true
			}
			if lim.Concurrent > 0 {
				sk.n++
				t.slot = true
			}
		}
		hs.requestsLeft = max(lim.RequestsPerMinute-reqs, 0)
		hs.requestsReset = st.reset(&st.Reqs, now)
		hs.tokensLeft = max(lim.TokensPerMinute-billed-reserved, 0)
		if reserved > 0 {
			hs.tokensReset = rateWindow
		} else {
			hs.tokensReset = st.reset(&st.Tokens, now)
		}
		if refusal != nil {
			return false, refusal
		}
		return true, nil
	})
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
			hs.write(h)
			return nil, err
		}
		return nil, unavailable(k, err)
	}
	hs.write(h)
	s.renew(sk)
	return t, nil
}

// done is ticket.done for a ticket of the shared limiter. When the bucket cannot be written,
// the request's slot and tokens still count until this replica's lease is next written or
// expires, and the tokens billed are not counted.
func (s *sharedLimiter) done(t *ticket, billed int) {
	sk := t.sk
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if t.slot {
		sk.n--
	}
	if t.tpm {
		sk.reserved -= t.tokens
	}
	if !t.slot && (!t.tpm || (t.tokens == 0 && billed <= 0)) {
		return // nothing in the entry changes
	}
	err := s.update(sk, s.now(), func(st *sharedState) (bool, error) {
		if t.tpm && billed > 0 {
			st.Tokens[0] += billed
		}
		return true, nil
	})
	if err != nil {
		s.log.Warn("rate limits: could not give back a request's slot and tokens", "key", t.id, "err", err)
	}
}

// key returns the key's entry, locked.
func (s *sharedLimiter) key(id string) *sharedKey {
	for {
		v, ok := s.keys.Load(id)
		if !ok {
			v, _ = s.keys.LoadOrStore(id, &sharedKey{name: kvKey(id)})
		}
		sk := v.(*sharedKey)
		sk.mu.Lock()
		if !sk.gone {
			sk.last = s.now()
			return sk
		}
		sk.mu.Unlock()
	}
}

// update applies change to the key's entry and writes it with this replica's lease, under
// sk.mu. change says whether to write; an error of change (a refusal) is returned as it is
// when change saw the entry just read, else the entry is read and change called again.
// Any failure of the bucket is returned wrapped; nothing was written then.
func (s *sharedLimiter) update(sk *sharedKey, now time.Time, change func(st *sharedState) (bool, error)) error {
	kv, err := s.bucket()
	if err != nil {
		return err
	}
	n, reserved := sk.n, sk.reserved // change may move them: each try starts from here
	fail := func(err error) error {
		sk.n, sk.reserved = n, reserved
		return err
	}
	for try := range casTries {
		sk.n, sk.reserved = n, reserved
		readNow := !sk.fresh
		if readNow {
			if err := s.read(kv, sk); err != nil {
				return fail(err)
			}
		}
		st := sk.st.clone()
		st.advance(now)
		write, err := change(&st)
		switch {
		case err != nil && !readNow:
			sk.fresh = false // refused on what this replica last saw: read what is there
			continue
		case err != nil:
			return fail(err)
		case !write:
			return nil
		}
		if sk.n > 0 || sk.reserved > 0 {
			st.Leases[s.self] = lease{N: sk.n, Reserved: sk.reserved, Expires: now.Add(leaseTTL).UnixMilli()}
		} else {
			delete(st.Leases, s.self)
		}
		b, err := json.Marshal(st)
		if err != nil {
			return fail(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		var rev uint64
		err = untilResponders(ctx, func() (err error) {
			if sk.rev == 0 {
				rev, err = kv.Create(ctx, sk.name, b)
			} else {
				rev, err = kv.Update(ctx, sk.name, b, sk.rev)
			}
			return err
		})
		cancel()
		switch {
		case err == nil:
			sk.st, sk.rev, sk.fresh = st, rev, true
			return nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists):
			// Another replica wrote first. Wait a moment, at random and longer each time, before
			// reading again: the replicas racing on the key then stop meeting in step, and a
			// read (a direct get, which any of the stream's servers may answer) finds the
			// followers caught up with the write that won.
			sk.fresh = false
			time.Sleep(mrand.N(time.Duration(1<<min(try, 5)) * time.Millisecond))
		default:
			sk.fresh = false
			return fail(fmt.Errorf("write rate limits of %s: %w", sk.name, err))
		}
	}
	return fail(fmt.Errorf("write rate limits of %s: %d conflicts in a row", sk.name, casTries))
}

// untilResponders calls op until it finds the bucket's stream answering, or ctx is done: a
// stream answers no one for a moment while its servers elect a leader (a cluster that just
// started, or lost one).
func untilResponders(ctx context.Context, op func() error) error {
	err := op()
	for wait := 5 * time.Millisecond; errors.Is(err, nats.ErrNoResponders); wait *= 2 {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
			err = op()
		}
	}
	return err
}

// read reads the key's entry into sk.
func (s *sharedLimiter) read(kv jetstream.KeyValue, sk *sharedKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	var e jetstream.KeyValueEntry
	err := untilResponders(ctx, func() (err error) {
		e, err = kv.Get(ctx, sk.name)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		sk.st, sk.rev = sharedState{}, 0
	case err != nil:
		return fmt.Errorf("read rate limits of %s: %w", sk.name, err)
	default:
		var st sharedState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return fmt.Errorf("read rate limits of %s: %w", sk.name, err)
		}
		sk.st, sk.rev = st, e.Revision()
	}
	sk.fresh = true
	return nil
}

// bucket returns the limits' bucket, found or made on first use.
func (s *sharedLimiter) bucket() (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	if s.err != nil && time.Since(s.errTime) < time.Second {
		return nil, s.err
	}
	replicas := 1
	if len(s.bus.Conn.Servers()) >= 3 {
		replicas = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout)
	defer cancel()
	kv, err := s.bus.KeyValue(ctx, limitsBucket, bucketTTL, replicas)
	if err != nil {
		s.err, s.errTime = err, time.Now()
		return nil, err
	}
	s.kv, s.err = kv, nil
	return kv, nil
}

// renew starts renewing this replica's lease on the key while it has requests in flight,
// under sk.mu.
func (s *sharedLimiter) renew(sk *sharedKey) {
	if sk.renewing || (sk.n == 0 && sk.reserved == 0) {
		return
	}
	sk.renewing = true
	go func() {
		tick := time.NewTicker(leaseRenew)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			sk.mu.Lock()
			if sk.n == 0 && sk.reserved == 0 {
				sk.renewing = false
				sk.mu.Unlock()
				return
			}
			if err := s.update(sk, s.now(), func(*sharedState) (bool, error) { return true, nil }); err != nil {
				s.log.Warn("rate limits: could not renew a lease", "key", sk.name, "err", err)
			}
			sk.mu.Unlock()
		}
	}()
}

// maybeSweep drops, at most once a window, the entries of keys unused for two windows with
// nothing in flight: only what was read of the bucket goes, never a count.
func (s *sharedLimiter) maybeSweep(now time.Time) {
	last := s.lastSweep.Load()
	if now.UnixNano()-last < int64(rateWindow) || !s.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.keys.Range(func(id, v any) bool {
		sk := v.(*sharedKey)
		sk.mu.Lock()
		if !sk.gone && sk.n == 0 && sk.reserved == 0 && !sk.renewing && now.Sub(sk.last) > 2*rateWindow {
			sk.gone = true
			s.keys.CompareAndDelete(id, sk)
		}
		sk.mu.Unlock()
		return true
	})
}

// kvKey is a key id as a key of the bucket: as it is when its characters are allowed there,
// else in hex.
func kvKey(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "x." + hex.EncodeToString([]byte(id))
		}
	}
	return "k." + id
}

// unavailable is the 503 of a limited key's request when its limits cannot be counted: it
// fails closed.
func unavailable(k *store.Key, err error) *api.Error {
	return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: codeLimiterUnavailable, RetryAfter: 1, Cause: err,
		Message: fmt.Sprintf("The rate limiter is unavailable: requests of key %s…, which has rate limits, cannot be admitted until it is back. Please try again shortly.", k.Prefix)}
}
