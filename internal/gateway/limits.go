package gateway

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// rateWindow is the span that requests and tokens per minute count over: a sliding window,
// exact to the admission (requests) or the end (tokens) of each request.
const rateWindow = time.Minute

// limiter enforces API keys' rate limits in this process: requests per minute, tokens per
// minute and requests in flight. Each key with a limit has an entry (keyUsage) in a sync.Map;
// a request's admission is one critical section under that entry's mutex, so keys never wait
// for one another and a key's limits are exact however many of its requests arrive at once.
// Entries of keys gone idle are dropped once their window has passed (sweep), so memory stays
// bounded by the keys active in the last minute or two.
//
// Lock order: an entry's mutex is the only lock; the map is lock-free to readers.
type limiter struct {
	defaults  store.RateLimits // for keys that set none of their own; 0: unlimited
	now       func() time.Time
	keys      sync.Map // key id → *keyUsage
	lastSweep atomic.Int64
	sweeping  atomic.Bool
	// shared, when set, counts the limits across the network's replicas, in NATS
	// (limits_shared.go), instead of in keys.
	shared *sharedLimiter
}

// keyUsage is what one key has used in the window.
type keyUsage struct {
	mu       sync.Mutex
	gone     bool   // dropped from the map: a new entry counts from here on
	reqs     times  // the admission times in the window, at most RequestsPerMinute
	ended    []used // the tokens billed to the requests that ended in the window, oldest first
	used     int    // their sum
	reserved int    // the tokens reserved by the requests in flight
	inflight int    // requests in flight
}

type used struct {
	at     time.Time
	tokens int
}

// ticket is an admitted request's claim on its key's limits: done gives it back. A nil ticket
// (a key without limits) does nothing.
type ticket struct {
	l      *limiter
	id     string
	u      *keyUsage
	tokens int  // reserved, when the key has a token limit
	tpm    bool // tokens are counted
	slot   bool // counted in flight
	// Of the shared limiter's tickets:
	s  *sharedLimiter
	sk *sharedKey
}

// rateLimits are a key's limits in effect: its own, else the defaults; 0 is unlimited.
func (l *limiter) rateLimits(k *store.Key) store.RateLimits {
	pick := func(own, def int) int {
		switch {
		case own > 0:
			return own
		case own < 0:
			return 0 // the key is unlimited, whatever the default
		}
		return max(def, 0)
	}
	return store.RateLimits{
		RequestsPerMinute: pick(k.Limits.RequestsPerMinute, l.defaults.RequestsPerMinute),
		TokensPerMinute:   pick(k.Limits.TokensPerMinute, l.defaults.TokensPerMinute),
		Concurrent:        pick(k.Limits.Concurrent, l.defaults.Concurrent),
	}
}

// admit admits a request of key k that may use up to tokens tokens, or refuses it with a 429.
// Either way it sets OpenAI's x-ratelimit-* headers of the key's request and token limits in
// h. The caller calls done on the ticket when the request has ended, on every path.
func (l *limiter) admit(h http.Header, k *store.Key, tokens int) (*ticket, error) {
	lim := l.rateLimits(k)
	if lim == (store.RateLimits{}) {
		return nil, nil
	}
	if l.shared != nil {
		return l.shared.admit(h, k, lim, tokens)
	}
	now := l.now()
	l.maybeSweep(now)
	for {
		v, ok := l.keys.Load(k.ID)
		if !ok {
			v, _ = l.keys.LoadOrStore(k.ID, &keyUsage{})
		}
		u := v.(*keyUsage)
		u.mu.Lock()
		if u.gone {
			u.mu.Unlock()
			continue // swept between the load and the lock
		}
		t, st, err := u.admit(now, lim, k, tokens)
		if err != nil && u.idle() { // a refused newcomer leaves nothing behind
			u.gone = true
			l.keys.CompareAndDelete(k.ID, u)
		}
		u.mu.Unlock()
		st.write(h)
		if err != nil {
			return nil, err
		}
		t.l, t.id = l, k.ID
		return t, nil
	}
}

// state is what the x-ratelimit-* headers say.
type state struct {
	lim                        store.RateLimits
	requestsLeft, tokensLeft   int
	requestsReset, tokensReset time.Duration
	retryAfter                 time.Duration // of a refusal; 0 for an admission
	never                      bool          // the request can never fit the limits
}

// admit is limiter.admit under u.mu.
func (u *keyUsage) admit(now time.Time, lim store.RateLimits, k *store.Key, tokens int) (*ticket, state, error) {
	u.prune(now)
	u.reqs.keep(lim.RequestsPerMinute) // if the key's limit was lowered
	st := state{lim: lim}
	var err error
	switch {
	case lim.TokensPerMinute > 0 && tokens > lim.TokensPerMinute:
		// As OpenAI: a 429 that says no wait will help.
		st.never = true
		err = tooLarge(k, lim, tokens)
	case lim.RequestsPerMinute > 0 && u.reqs.len() >= lim.RequestsPerMinute:
		st.retryAfter = u.reqs.oldest().Add(rateWindow).Sub(now)
		err = limitError(api.TypeRequests, "requests per min (RPM)", k, lim.RequestsPerMinute, u.reqs.len(), 1, st.retryAfter)
	case lim.TokensPerMinute > 0 && u.used+u.reserved+tokens > lim.TokensPerMinute:
		st.retryAfter = u.tokensFree(now, u.used+u.reserved+tokens-lim.TokensPerMinute)
		err = limitError(api.TypeTokens, "tokens per min (TPM)", k, lim.TokensPerMinute, u.used+u.reserved, tokens, st.retryAfter)
	case lim.Concurrent > 0 && u.inflight >= lim.Concurrent:
		// When one of them ends is not known: a second is a fair guess.
		st.retryAfter = time.Second
		err = &api.Error{Status: http.StatusTooManyRequests, Type: api.TypeRequests, Code: api.CodeRateLimitExceeded, RetryAfter: 1,
			Message: fmt.Sprintf("Rate limit reached for concurrent requests on key %s…: Limit %d, Used %d, Requested 1. Please try again once one of them ends.",
				k.Prefix, lim.Concurrent, u.inflight)}
	}
	t := &ticket{u: u}
	if err == nil {
		if lim.RequestsPerMinute > 0 {
			u.reqs.push(now)
		}
		if lim.TokensPerMinute > 0 {
			u.reserved += tokens
			t.tokens, t.tpm = tokens, true
		}
		if lim.Concurrent > 0 {
			u.inflight++
			t.slot = true
		}
	}
	st.requestsLeft = max(lim.RequestsPerMinute-u.reqs.len(), 0)
	if u.reqs.len() > 0 {
		st.requestsReset = u.reqs.newest().Add(rateWindow).Sub(now)
	}
	st.tokensLeft = max(lim.TokensPerMinute-u.used-u.reserved, 0)
	switch {
	case u.reserved > 0:
		st.tokensReset = rateWindow // the tokens in flight count for a minute after they end
	case len(u.ended) > 0:
		st.tokensReset = u.ended[len(u.ended)-1].at.Add(rateWindow).Sub(now)
	}
	return t, st, err
}

// tooLarge is the refusal of a request whose tokens can never fit the key's tokens per minute.
func tooLarge(k *store.Key, lim store.RateLimits, tokens int) *api.Error {
	// As OpenAI: a 429 that says no wait will help.
	return &api.Error{Status: http.StatusTooManyRequests, Type: api.TypeTokens, Code: api.CodeRateLimitExceeded, RetryAfter: -1,
		Message: fmt.Sprintf("Request too large on tokens per min (TPM) on key %s…: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully: lower max_tokens, or shorten the prompt.",
			k.Prefix, lim.TokensPerMinute, tokens)}
}

// limitError is a refusal in OpenAI's words.
func limitError(typ, what string, k *store.Key, limit, used, requested int, wait time.Duration) *api.Error {
	return &api.Error{Status: http.StatusTooManyRequests, Type: typ, Code: api.CodeRateLimitExceeded, RetryAfter: seconds(wait),
		Message: fmt.Sprintf("Rate limit reached for %s on key %s…: Limit %d, Used %d, Requested %d. Please try again in %s.",
			what, k.Prefix, limit, used, requested, millisUp(wait))}
}

// tokensFree is how long until need tokens of those billed leave the window; a second when
// the tokens reserved in flight stand in the way, since when they end is not known.
func (u *keyUsage) tokensFree(now time.Time, need int) time.Duration {
	freed := 0
	for _, e := range u.ended {
		if freed += e.tokens; freed >= need {
			return e.at.Add(rateWindow).Sub(now)
		}
	}
	return time.Second
}

// prune forgets what has left the window.
func (u *keyUsage) prune(now time.Time) {
	cut := now.Add(-rateWindow)
	for u.reqs.len() > 0 && !u.reqs.oldest().After(cut) {
		u.reqs.pop()
	}
	i := 0
	for i < len(u.ended) && !u.ended[i].at.After(cut) {
		u.used -= u.ended[i].tokens
		i++
	}
	if u.ended = u.ended[i:]; len(u.ended) == 0 {
		u.ended = nil // let the array go
	}
}

// idle says the entry counts nothing: dropping it changes no limit.
func (u *keyUsage) idle() bool {
	return u.inflight == 0 && u.reserved == 0 && u.reqs.len() == 0 && len(u.ended) == 0
}

// done gives back what the request held: its slot, and its reserved tokens, replaced by the
// tokens billed, which count for a minute from now.
func (t *ticket) done(billed int) {
	if t == nil {
		return
	}
	if t.s != nil {
		t.s.done(t, billed)
		return
	}
	u := t.u
	u.mu.Lock()
	defer u.mu.Unlock()
	if t.slot {
		u.inflight--
	}
	if t.tpm {
		u.reserved -= t.tokens
		if billed > 0 {
			u.ended = append(u.ended, used{at: t.l.now(), tokens: billed})
			u.used += billed
		}
	}
	if u.idle() {
		u.gone = true
		t.l.keys.CompareAndDelete(t.id, u)
	}
}

// maybeSweep drops, at most once a window, the entries of keys that count nothing any more.
func (l *limiter) maybeSweep(now time.Time) {
	last := l.lastSweep.Load()
	if now.UnixNano()-last < int64(rateWindow) || !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer l.sweeping.Store(false)
	l.lastSweep.Store(now.UnixNano())
	l.sweep(now)
}

// sweep drops the entries that count nothing at now.
func (l *limiter) sweep(now time.Time) {
	l.keys.Range(func(id, v any) bool {
		u := v.(*keyUsage)
		u.mu.Lock()
		u.prune(now)
		if !u.gone && u.idle() {
			u.gone = true
			l.keys.CompareAndDelete(id, u)
		}
		u.mu.Unlock()
		return true
	})
}

// Headers of rate limits, as OpenAI names them.
const (
	headerLimitRequests     = "X-Ratelimit-Limit-Requests"
	headerRemainingRequests = "X-Ratelimit-Remaining-Requests"
	headerResetRequests     = "X-Ratelimit-Reset-Requests"
	headerLimitTokens       = "X-Ratelimit-Limit-Tokens"
	headerRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	headerResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// write sets the headers of the limits that apply: requests and tokens; and on a refusal, the
// exact wait in milliseconds (retry-after-ms, which OpenAI's SDKs prefer to Retry-After), or
// that no wait helps (x-should-retry: false, which they obey).
func (st state) write(h http.Header) {
	if st.lim.RequestsPerMinute > 0 {
		h.Set(headerLimitRequests, strconv.Itoa(st.lim.RequestsPerMinute))
		h.Set(headerRemainingRequests, strconv.Itoa(st.requestsLeft))
		h.Set(headerResetRequests, millisUp(st.requestsReset).String())
	}
	if st.lim.TokensPerMinute > 0 {
		h.Set(headerLimitTokens, strconv.Itoa(st.lim.TokensPerMinute))
		h.Set(headerRemainingTokens, strconv.Itoa(st.tokensLeft))
		h.Set(headerResetTokens, millisUp(st.tokensReset).String())
	}
	switch {
	case st.never:
		h.Set("X-Should-Retry", "false")
	case st.retryAfter > 0:
		h.Set("Retry-After-Ms", strconv.FormatInt(millisUp(st.retryAfter).Milliseconds(), 10))
	}
}

// millisUp rounds d up to a millisecond, and a negative d to 0.
func millisUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// seconds is d in whole seconds, rounded up: a Retry-After.
func seconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}

// maxTokensCeiling refuses a request that asks for more completion tokens than the gateway's
// MaxTokensLimit, or than the longest context of the nodes serving its model, as OpenAI
// refuses more than a model's output limit (400 on the parameter the buyer sent).
func (g *Gateway) maxTokensCeiling(req *protocol.Request, param string) error {
	return g.CheckMaxTokens(req, param)
}

// CheckMaxTokens refuses a request whose max_tokens (named param) is over the ceiling: the
// network's, within the model's context. The batch API checks its lines with it too.
func (g *Gateway) CheckMaxTokens(req *protocol.Request, param string) error {
	ceiling := g.cfg.MaxTokensLimit
	if base := g.core.ResolveModel(req.Model); ceiling > 0 {
		if mi, ok := g.cfg.Fleet.Model(base); ok && mi.ContextLength > 0 {
			ceiling = min(ceiling, mi.ContextLength)
		}
	}
	if ceiling <= 0 || req.MaxTokens <= ceiling {
		return nil
	}
	return api.BadRequest(param, api.CodeInvalidValue,
		"%s is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.", param, req.MaxTokens, ceiling, req.MaxTokens)
}

// times is a queue of times, oldest first. It grows with what it holds, never to more than the
// limit it is kept to, so a key with a high limit and little traffic takes little memory.
type times struct {
	t    []time.Time
	head int
}

func (q *times) len() int          { return len(q.t) - q.head }
func (q *times) oldest() time.Time { return q.t[q.head] }
func (q *times) newest() time.Time { return q.t[len(q.t)-1] }

func (q *times) push(t time.Time) { q.t = append(q.t, t) }

func (q *times) pop() {
	q.head++
	switch {
	case q.head == len(q.t):
		q.t, q.head = q.t[:0], 0
	case q.head >= 64 && q.head >= len(q.t)/2:
		// Half the array is spent: move what is left to its start, in place.
		q.t, q.head = append(q.t[:0], q.t[q.head:]...), 0
	}
}

// keep keeps the newest n times at most (0: none), and lets go of the array when it is empty.
func (q *times) keep(n int) {
	if q.len() > n {
		q.head = len(q.t) - n
	}
	if q.len() == 0 {
		q.t, q.head = nil, 0
	}
}
