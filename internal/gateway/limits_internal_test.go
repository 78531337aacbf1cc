package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/store"
)

// clock is a hand-moved time for the limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimiter(defaults store.RateLimits) (*limiter, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return &limiter{defaults: defaults, now: c.now}, c
}

func limitKey(id string, l store.RateLimits) *store.Key {
	return &store.Key{ID: id, Prefix: "sk-" + id, Kind: store.KeyBuyer, Limits: l}
}

// entries counts the keys the limiter keeps.
func (l *limiter) entries() int {
	n := 0
	l.keys.Range(func(any, any) bool { n++; return true })
	return n
}

// limitRefusal is admit's 429, or nil.
func limitRefusal(t *testing.T, err error) *api.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != api.CodeRateLimitExceeded {
		if ae != nil && ae.Cause != nil {
			t.Fatalf("admit: %v (%v); want a 429 rate_limit_exceeded", err, ae.Cause)
		}
		t.Fatalf("admit: %v; want a 429 rate_limit_exceeded", err)
	}
	return ae
}

// The requests per minute slide with the clock: a request is counted for exactly 60 s from
// its admission, and a refusal's Retry-After is when the oldest leaves the window.
func TestLimiter_RequestsPerMinuteWindow(t *testing.T) {
	l, clk := newLimiter(store.RateLimits{})
	k := limitKey("k", store.RateLimits{RequestsPerMinute: 3})
	admit := func() (*ticket, http.Header, *api.Error) {
		h := http.Header{}
		tk, err := l.admit(h, k, 1)
		return tk, h, limitRefusal(t, err)
	}
	for i, wantLeft := range []string{"2", "1", "0"} {
		tk, h, ae := admit()
		if ae != nil {
			t.Fatalf("request %d refused: %v", i, ae)
		}
		tk.done(0)
		if got := h.Get("X-Ratelimit-Remaining-Requests"); got != wantLeft || h.Get("X-Ratelimit-Limit-Requests") != "3" {
			t.Errorf("request %d: remaining %q, limit %q; want %s of 3", i, got, h.Get("X-Ratelimit-Limit-Requests"), wantLeft)
		}
		if got := h.Get("X-Ratelimit-Reset-Requests"); got != "1m0s" {
			t.Errorf("request %d: reset %q, want 1m0s (when the window is empty again)", i, got)
		}
		clk.add(10 * time.Second)
	}
	// t = 30 s: the first, admitted at 0 s, leaves at 60 s.
	_, h, ae := admit()
	if ae == nil {
		t.Fatal("fourth request in the minute admitted")
	}
	if ae.Type != api.TypeRequests || ae.RetryAfter != 30 || h.Get("Retry-After-Ms") != "30000" {
		t.Errorf("refusal %+v, retry-after-ms %q; want type requests, Retry-After 30 s exactly", ae, h.Get("Retry-After-Ms"))
	}
	if want := "Rate limit reached for requests per min (RPM) on key sk-k…: Limit 3, Used 3, Requested 1. Please try again in 30s."; ae.Message != want {
		t.Errorf("message %q\nwant %q", ae.Message, want)
	}
	if got := h.Get("X-Ratelimit-Reset-Requests"); got != "50s" {
		t.Errorf("reset %q, want 50s (the newest, of 20 s, leaves at 80 s)", got)
	}
	clk.add(30*time.Second - time.Millisecond)
	if _, h, ae = admit(); ae == nil || h.Get("Retry-After-Ms") != "1" || ae.RetryAfter != 1 {
		t.Fatalf("1 ms before the first leaves: %v, retry-after-ms %q; want refused for 1 ms, Retry-After 1", ae, h.Get("Retry-After-Ms"))
	}
	clk.add(time.Millisecond) // 60 s: the first has left
	if _, _, ae = admit(); ae != nil {
		t.Fatalf("at 60 s: %v; want admitted", ae)
	}
	if _, _, ae = admit(); ae == nil || ae.RetryAfter != 10 {
		t.Fatalf("at 60 s again: %v; want refused until the request of 10 s leaves", ae)
	}
	// Refusals are not counted: after a minute of silence the whole limit is there.
	clk.add(time.Minute)
	for i := range 3 {
		if _, _, ae := admit(); ae != nil {
			t.Fatalf("after a quiet minute, request %d: %v", i, ae)
		}
	}
}

// Tokens per minute: admission reserves the request's most possible tokens; its end replaces
// them with the tokens billed, counted for a minute from then.
func TestLimiter_TokensPerMinute(t *testing.T) {
	l, clk := newLimiter(store.RateLimits{})
	k := limitKey("k", store.RateLimits{TokensPerMinute: 100})
	admit := func(tokens int) (*ticket, http.Header, *api.Error) {
		h := http.Header{}
		tk, err := l.admit(h, k, tokens)
		return tk, h, limitRefusal(t, err)
	}
	a, _, _ := admit(40)
	b, h, ae := admit(40)
	if ae != nil || h.Get("X-Ratelimit-Remaining-Tokens") != "20" || h.Get("X-Ratelimit-Limit-Tokens") != "100" {
		t.Fatalf("second: %v, remaining %q; want admitted with 20 of 100 left", ae, h.Get("X-Ratelimit-Remaining-Tokens"))
	}
	if _, h, ae = admit(40); ae == nil || ae.Type != api.TypeTokens || ae.RetryAfter != 1 {
		t.Fatalf("third: %v; want refused on tokens, Retry-After 1 while the reservations stand", ae)
	} else if want := "Rate limit reached for tokens per min (TPM) on key sk-k…: Limit 100, Used 80, Requested 40. Please try again in 1s."; ae.Message != want {
		t.Errorf("message %q\nwant %q", ae.Message, want)
	}
	clk.add(5 * time.Second)
	a.done(10) // billed 10 of the 40 reserved
	c, h, ae := admit(40)
	if ae != nil || h.Get("X-Ratelimit-Remaining-Tokens") != "10" {
		t.Fatalf("after the first ended: %v, remaining %q; want admitted, 10 left", ae, h.Get("X-Ratelimit-Remaining-Tokens"))
	}
	clk.add(5 * time.Second)
	b.done(40)
	c.done(45) // more than reserved: counted all the same
	// Used 95 in the window: 10 at 5 s, 40 and 45 at 10 s.
	_, h, ae = admit(10)
	if ae == nil || ae.RetryAfter != 55 || h.Get("X-Ratelimit-Reset-Tokens") != "1m0s" {
		t.Fatalf("10 more: %v, reset %q; want refused for 55 s (when the 10 of 5 s leave)", ae, h.Get("X-Ratelimit-Reset-Tokens"))
	}
	clk.add(55 * time.Second)
	if _, _, ae = admit(5); ae != nil {
		t.Fatalf("at 60 s: %v; want 5 tokens admitted", ae)
	}
	// Larger than the whole limit: no wait helps, and the SDKs are told not to retry.
	_, h, ae = admit(101)
	if ae == nil || ae.RetryAfter >= 0 || h.Get("X-Should-Retry") != "false" || h.Get("Retry-After-Ms") != "" {
		t.Fatalf("101 tokens: %v, headers %v; want a 429 without Retry-After and x-should-retry false", ae, h)
	}
}

func TestLimiter_Concurrent(t *testing.T) {
	l, _ := newLimiter(store.RateLimits{})
	k := limitKey("k", store.RateLimits{Concurrent: 2})
	h := http.Header{}
	a, err := l.admit(h, k, 1)
	limitRefusal(t, err)
	if _, err = l.admit(h, k, 1); limitRefusal(t, err) != nil {
		t.Fatal("second request in flight refused")
	}
	if len(h) != 0 {
		t.Errorf("headers %v; want none for a key limited only in concurrency", h)
	}
	if _, err = l.admit(h, k, 1); limitRefusal(t, err) == nil {
		t.Fatal("third request in flight admitted")
	}
	a.done(0)
	if _, err = l.admit(h, k, 1); limitRefusal(t, err) != nil {
		t.Fatalf("after one ended: %v; want admitted", err)
	}
}

// A key's own limits override the defaults; a negative one lifts the default; a key with no
// limit at all is never counted.
func TestLimiter_KeyOverridesDefaults(t *testing.T) {
	l, _ := newLimiter(store.RateLimits{RequestsPerMinute: 2, TokensPerMinute: 1000, Concurrent: 1})
	tests := []struct {
		name string
		own  store.RateLimits
		want store.RateLimits
	}{
		{"defaults", store.RateLimits{}, store.RateLimits{RequestsPerMinute: 2, TokensPerMinute: 1000, Concurrent: 1}},
		{"own", store.RateLimits{RequestsPerMinute: 5, Concurrent: 3}, store.RateLimits{RequestsPerMinute: 5, TokensPerMinute: 1000, Concurrent: 3}},
		{"lifted", store.RateLimits{RequestsPerMinute: -1, TokensPerMinute: -1}, store.RateLimits{Concurrent: 1}},
	}
	for _, tt := range tests {
		if got := l.rateLimits(limitKey("k", tt.own)); got != tt.want {
			t.Errorf("%s: limits %+v, want %+v", tt.name, got, tt.want)
		}
	}
	free := limitKey("free", store.RateLimits{RequestsPerMinute: -1, TokensPerMinute: -1, Concurrent: -1})
	for range 100 {
		h := http.Header{}
		tk, err := l.admit(h, free, 1_000_000)
		if err != nil || tk != nil || len(h) != 0 {
			t.Fatalf("unlimited key: ticket %v, err %v, headers %v; want admitted, uncounted, no headers", tk, err, h)
		}
		tk.done(5) // a nil ticket does nothing
	}
	if n := l.entries(); n != 0 {
		t.Errorf("%d entries for an unlimited key, want 0", n)
	}
}

// However many requests of a key arrive at once, exactly the limit is admitted, and keys do
// not share their limits.
func TestLimiter_ExactUnderConcurrency(t *testing.T) {
	l, _ := newLimiter(store.RateLimits{})
	keys := []*store.Key{
		limitKey("rpm", store.RateLimits{RequestsPerMinute: 10}),
		limitKey("tpm", store.RateLimits{TokensPerMinute: 100}), // 14 of 7 tokens
		limitKey("both", store.RateLimits{RequestsPerMinute: 50, TokensPerMinute: 70}),
	}
	want := map[string]int64{"rpm": 10, "tpm": 14, "both": 10}
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		for i, k := range keys {
			wg.Go(func() {
				<-start
				if _, err := l.admit(http.Header{}, k, 7); err == nil {
					admitted[i].Add(1)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for i, k := range keys {
		if got := admitted[i].Load(); got != want[k.ID] {
			t.Errorf("key %s: %d admitted, want exactly %d", k.ID, got, want[k.ID])
		}
	}
}

// With requests coming and going at once, a key never has more in flight than its limit, and
// once they have all ended its entry is gone.
func TestLimiter_ConcurrentNeverExceeded(t *testing.T) {
	l, _ := newLimiter(store.RateLimits{Concurrent: 3})
	k := limitKey("k", store.RateLimits{})
	var inFlight, most, served atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 200 {
				tk, err := l.admit(http.Header{}, k, 1)
				if err != nil {
					continue
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				served.Add(1)
				inFlight.Add(-1)
				tk.done(1)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 3 || served.Load() == 0 {
		t.Errorf("at most %d in flight (%d served); want at most 3", m, served.Load())
	}
	if n := l.entries(); n != 0 {
		t.Errorf("%d entries after every request ended, want 0: a key limited in concurrency only counts nothing then", n)
	}
}

// Entries of keys gone quiet are dropped once their window has passed, so memory is bounded
// by the keys active in the last minute or two.
func TestLimiter_IdleEntriesDropped(t *testing.T) {
	l, clk := newLimiter(store.RateLimits{RequestsPerMinute: 100, TokensPerMinute: 1000})
	for _, id := range []string{"a", "b", "c"} {
		tk, err := l.admit(http.Header{}, limitKey(id, store.RateLimits{}), 10)
		if err != nil {
			t.Fatal(err)
		}
		tk.done(5)
	}
	inFlight, err := l.admit(http.Header{}, limitKey("d", store.RateLimits{}), 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := l.entries(); n != 4 {
		t.Fatalf("%d entries, want 4", n)
	}
	clk.add(rateWindow)
	// Any admission after a window sweeps: only the key in flight and this one remain.
	e, err := l.admit(http.Header{}, limitKey("e", store.RateLimits{}), 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := l.entries(); n != 2 {
		t.Errorf("%d entries after a quiet minute, want 2 (d in flight, e just admitted)", n)
	}
	inFlight.done(5)
	e.done(0)
	clk.add(rateWindow)
	l.sweep(clk.now())
	if n := l.entries(); n != 0 {
		t.Errorf("%d entries at the end, want 0", n)
	}
	// A key too large for its limit leaves nothing behind either.
	if _, err := l.admit(http.Header{}, limitKey("f", store.RateLimits{}), 5000); err == nil {
		t.Fatal("5000 tokens admitted under a limit of 1000")
	}
	if n := l.entries(); n != 0 {
		t.Errorf("%d entries after a refusal of a new key, want 0", n)
	}
}

// A key's limit changed (the key cache refreshes every few seconds) applies at its next
// request, keeping the window's newest admissions.
func TestLimiter_LimitChanges(t *testing.T) {
	l, clk := newLimiter(store.RateLimits{})
	k := limitKey("k", store.RateLimits{RequestsPerMinute: 5})
	for range 5 {
		if _, err := l.admit(http.Header{}, k, 1); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Second)
	}
	k = limitKey("k", store.RateLimits{RequestsPerMinute: 2})
	_, err := l.admit(http.Header{}, k, 1)
	if ae := limitRefusal(t, err); ae == nil || ae.RetryAfter != 58 {
		t.Fatalf("after lowering the limit: %v; want refused until the 4th of 5 (of 3 s) leaves, in 58 s", err)
	}
	k = limitKey("k", store.RateLimits{RequestsPerMinute: 3})
	if _, err := l.admit(http.Header{}, k, 1); err != nil {
		t.Fatalf("after raising it to 3: %v; want admitted", err)
	}
}

// Admission and release of a request, on 1,000 keys at once: no lock is shared between keys.
func BenchmarkLimiter_AdmitDone(b *testing.B) {
	l := &limiter{defaults: store.RateLimits{RequestsPerMinute: 1 << 20, TokensPerMinute: 1 << 40, Concurrent: 1 << 20}, now: time.Now}
	keys := make([]*store.Key, 1000)
	for i := range keys {
		keys[i] = limitKey(strconv.Itoa(i), store.RateLimits{})
	}
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		h := http.Header{}
		for pb.Next() {
			tk, err := l.admit(h, keys[next.Add(1)%int64(len(keys))], 100)
			if err != nil {
				b.Fatal(err)
			}
			tk.done(50)
		}
	})
}
