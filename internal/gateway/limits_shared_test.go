package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/store"
)

// embedNATS starts an embedded NATS server for the test.
func embedNATS(t testing.TB) *bus.Server {
	t.Helper()
	srv, err := bus.Embed(bus.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// replicaLimiters returns n shared limiters, as n replicas would have, each on its own
// connection to urls[i % len(urls)], all on clk.
func replicaLimiters(t testing.TB, n int, urls []string, clk *clock) []*limiter {
	t.Helper()
	out := make([]*limiter, n)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := bus.Connect(ctx, bus.Config{URL: urls[i%len(urls)], Name: fmt.Sprintf("replica-%d", i+1)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		s := newSharedLimiter(b, clk.now, nil)
		t.Cleanup(func() { s.close(); b.Close() })
		out[i] = &limiter{now: clk.now, shared: s}
	}
	return out
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} } // the start of a slot

// race admits tries requests of k, spread over the limiters, at once, and returns the tickets
// admitted; every other answer must be a 429.
func race(t *testing.T, ls []*limiter, k *store.Key, tries, tokens int) []*ticket {
	t.Helper()
	var (
		mu  sync.Mutex
		got []*ticket
		wg  sync.WaitGroup
	)
	for i := range tries {
		wg.Go(func() {
			tk, err := ls[i%len(ls)].admit(http.Header{}, k, tokens)
			if limitRefusal(t, err) == nil {
				mu.Lock()
				got = append(got, tk)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// A key limited to 60 requests per minute gets 60 over three replicas together, not 180;
// refusals are 429s whose Retry-After is when the first slot leaves the window.
func TestSharedLimiter_RequestsPerMinuteAcrossReplicas(t *testing.T) {
	clk := newClock()
	ls := replicaLimiters(t, 3, []string{embedNATS(t).URL()}, clk)
	k := limitKey("k", store.RateLimits{RequestsPerMinute: 60})
	if got := race(t, ls, k, 150, 1); len(got) != 60 {
		t.Fatalf("admitted %d of 150 over 3 replicas, want 60", len(got))
	}
	clk.add(30 * time.Second)
	for i, l := range ls {
		h := http.Header{}
		_, err := l.admit(h, k, 1)
		ae := limitRefusal(t, err)
		if ae == nil {
			t.Fatalf("replica %d admitted a 61st request", i+1)
		}
		// Admitted in the slot of 0 s: they count until 65 s.
		if ae.Type != api.TypeRequests || ae.RetryAfter != 35 || h.Get("Retry-After-Ms") != "35000" || h.Get("X-Ratelimit-Remaining-Requests") != "0" {
			t.Errorf("replica %d: %+v, retry-after-ms %q, remaining %q; want requests, 35 s, 0 left", i+1, ae, h.Get("Retry-After-Ms"), h.Get("X-Ratelimit-Remaining-Requests"))
		}
		if want := "Rate limit reached for requests per min (RPM) on key sk-k…: Limit 60, Used 60, Requested 1. Please try again in 35s."; ae.Message != want {
			t.Errorf("message %q\nwant %q", ae.Message, want)
		}
	}
	clk.add(35 * time.Second) // 65 s: the first slot has left
	if got := race(t, ls, k, 90, 1); len(got) != 60 {
		t.Fatalf("a window later: admitted %d of 90, want 60", len(got))
	}
}

// Tokens are reserved at admission on any replica and replaced by the tokens billed at the end.
func TestSharedLimiter_TokensPerMinuteAcrossReplicas(t *testing.T) {
	clk := newClock()
	ls := replicaLimiters(t, 3, []string{embedNATS(t).URL()}, clk)
	k := limitKey("k", store.RateLimits{TokensPerMinute: 1000})
	var tks []*ticket
	for i, l := range ls {
		tk, err := l.admit(http.Header{}, k, 300)
		if err != nil {
			t.Fatalf("replica %d: %v", i+1, err)
		}
		tks = append(tks, tk)
	}
	h := http.Header{}
	_, err := ls[0].admit(h, k, 300)
	if ae := limitRefusal(t, err); ae == nil || ae.Type != api.TypeTokens || ae.RetryAfter != 1 {
		t.Fatalf("1,200 tokens of 1,000: %v; want refused on tokens for a second (the tokens in flight)", err)
	}
	if got := h.Get("X-Ratelimit-Remaining-Tokens"); got != "100" {
		t.Errorf("remaining tokens %q, want 100", got)
	}
	tks[0].done(100) // 100 billed, 600 in flight
	h = http.Header{}
	tk, err := ls[1].admit(h, k, 300)
	if err != nil {
		t.Fatalf("after 200 tokens came back: %v", err)
	}
	if got := h.Get("X-Ratelimit-Remaining-Tokens"); got != "0" {
		t.Errorf("remaining tokens %q, want 0", got)
	}
	tks = append(tks[1:], tk)
	for _, tk := range tks {
		tk.done(0)
	}
	// 100 billed at 0 s, nothing in flight: 901 is refused until the 100 leave, at 65 s.
	clk.add(20 * time.Second)
	h = http.Header{}
	_, err = ls[2].admit(h, k, 901)
	if ae := limitRefusal(t, err); ae == nil || ae.RetryAfter != 45 || h.Get("X-Ratelimit-Reset-Tokens") != "45s" {
		t.Fatalf("901 with 100 billed: %v, reset %q; want refused for 45 s", err, h.Get("X-Ratelimit-Reset-Tokens"))
	}
	if tk, err = ls[2].admit(http.Header{}, k, 900); err != nil {
		t.Fatalf("900 with 100 billed: %v", err)
	}
	tk.done(900)
	// More than the limit can never fit: refused without a wait, as in one process.
	h = http.Header{}
	_, err = ls[0].admit(h, k, 1001)
	if ae := limitRefusal(t, err); ae == nil || ae.RetryAfter >= 0 || h.Get("X-Should-Retry") != "false" {
		t.Fatalf("1,001 of 1,000: %v; want a 429 that says not to retry", err)
	}
}

// Requests in flight are counted over the replicas; a replica that crashed stops counting
// when its lease expires.
func TestSharedLimiter_ConcurrentAcrossReplicas(t *testing.T) {
	clk := newClock()
	ls := replicaLimiters(t, 3, []string{embedNATS(t).URL()}, clk)
	k := limitKey("k", store.RateLimits{Concurrent: 4})
	got := race(t, ls, k, 30, 1)
	if len(got) != 4 {
		t.Fatalf("admitted %d of 30 at once, want 4", len(got))
	}
	got[0].done(0)
	if tk, err := ls[2].admit(http.Header{}, k, 1); err != nil {
		t.Fatalf("after one ended: %v", err)
	} else {
		got[0] = tk
	}
	if _, err := ls[1].admit(http.Header{}, k, 1); limitRefusal(t, err) == nil {
		t.Fatal("a fifth in flight admitted")
	}
	for _, tk := range got {
		tk.done(0)
	}

	// Replica 1 takes all four, then dies: no done, no renewal.
	for range 4 {
		if _, err := ls[0].admit(http.Header{}, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	ls[0].shared.close()
	if _, err := ls[1].admit(http.Header{}, k, 1); limitRefusal(t, err) == nil {
		t.Fatal("admitted while the dead replica's lease holds")
	}
	clk.add(leaseTTL + time.Second)
	if got := race(t, ls[1:], k, 10, 1); len(got) != 4 {
		t.Fatalf("after the dead replica's lease expired: admitted %d, want 4", len(got))
	}
}

// Three replicas, each on its own server of a cluster of three, with the bucket replicated.
func TestSharedLimiter_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a NATS cluster takes seconds to elect its leaders")
	}
	servers, err := bus.Cluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	clk := newClock()
	ls := replicaLimiters(t, 3, urls, clk)
	k := limitKey("k", store.RateLimits{RequestsPerMinute: 30, Concurrent: 100})
	// Make the bucket first, with the cluster's patience: admissions wait kvTimeout only.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := ls[0].shared.bus.KeyValue(ctx, limitsBucket, bucketTTL, 3); err != nil {
		t.Fatal(err)
	}
	got := race(t, ls, k, 90, 1)
	if len(got) != 30 {
		t.Fatalf("admitted %d of 90 over a cluster, want 30", len(got))
	}
	for _, tk := range got {
		tk.done(0)
	}
}

// When NATS is gone, a limited key's requests are refused with a 503 that says the rate
// limiter is unavailable, never admitted; keys without limits never needed NATS.
func TestSharedLimiter_FailsClosed(t *testing.T) {
	srv := embedNATS(t)
	clk := newClock()
	l := replicaLimiters(t, 1, []string{srv.URL()}, clk)[0]
	limited := limitKey("k", store.RateLimits{RequestsPerMinute: 100})
	unlimited := limitKey("free", store.RateLimits{})
	tk, err := l.admit(http.Header{}, limited, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	start := time.Now()
	_, err = l.admit(http.Header{}, limited, 1)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Type != api.TypeUnavailable ||
		ae.Code != codeLimiterUnavailable || ae.RetryAfter != 1 {
		t.Fatalf("limited key without NATS: %v; want 503 %s with Retry-After 1", err, codeLimiterUnavailable)
	}
	if want := "The rate limiter is unavailable: requests of key sk-k…, which has rate limits, cannot be admitted until it is back. Please try again shortly."; ae.Message != want {
		t.Errorf("message %q\nwant %q", ae.Message, want)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("refused after %v; want about kvTimeout", waited)
	}
	tk.done(0) // gives back what it can: nothing, without NATS
	if tk, err := l.admit(http.Header{}, unlimited, 1); err != nil || tk != nil {
		t.Fatalf("unlimited key without NATS: %v, %v; want admitted, untracked", tk, err)
	}
}

// Keys without limits never reach the bus: this limiter's would panic if they did.
func TestSharedLimiter_UnlimitedKeysSkipNATS(t *testing.T) {
	clk := newClock()
	l := &limiter{now: clk.now, shared: newSharedLimiter(&bus.Bus{}, clk.now, nil)}
	for range 3 {
		tk, err := l.admit(http.Header{}, limitKey("free", store.RateLimits{}), 1<<20)
		if err != nil || tk != nil {
			t.Fatalf("admit: %v, %v", tk, err)
		}
		tk.done(100)
	}
	l = &limiter{now: clk.now, defaults: store.RateLimits{RequestsPerMinute: 10}, shared: newSharedLimiter(&bus.Bus{}, clk.now, nil)}
	if tk, err := l.admit(http.Header{}, limitKey("opted-out", store.RateLimits{RequestsPerMinute: -1}), 1); err != nil || tk != nil {
		t.Fatalf("a key unlimited whatever the default: %v, %v", tk, err)
	}
}

// The slots slide: a request counts from its admission until its slot of 5 s leaves the
// window, 60 to 65 s later, so no 60 s holds more than the limit.
func TestSharedLimiter_SlotsSlide(t *testing.T) {
	clk := newClock()
	l := replicaLimiters(t, 1, []string{embedNATS(t).URL()}, clk)[0]
	k := limitKey("k", store.RateLimits{RequestsPerMinute: 2})
	clk.add(4 * time.Second) // the first at 4 s, the second at 14 s
	for range 2 {
		if _, err := l.admit(http.Header{}, k, 1); err != nil {
			t.Fatal(err)
		}
		clk.add(10 * time.Second)
	}
	clk.add(40 * time.Second) // 64 s: the first left the exact window at 64 s, its slot at 65 s
	_, err := l.admit(http.Header{}, k, 1)
	if ae := limitRefusal(t, err); ae == nil || ae.RetryAfter != 1 {
		t.Fatalf("at 64 s: %v; want refused for 1 s", err)
	}
	clk.add(time.Second)
	if _, err := l.admit(http.Header{}, k, 1); err != nil {
		t.Fatalf("at 65 s: %v", err)
	}
	if _, err := l.admit(http.Header{}, k, 1); limitRefusal(t, err) == nil {
		t.Fatal("at 65 s, a third in the window admitted")
	}
	clk.add(10 * time.Minute) // the entry's slots are all old
	if _, err := l.admit(http.Header{}, k, 1); err != nil {
		t.Fatalf("after 10 min: %v", err)
	}
}

// Admission and release of a request through the shared limiter on one embedded server, on
// 1,000 keys at once: compare BenchmarkLimiter_AdmitDone.
func BenchmarkSharedLimiter_AdmitDone(b *testing.B) {
	clk := &clock{t: time.Now()}
	l := replicaLimiters(b, 1, []string{embedNATS(b).URL()}, clk)[0]
	l.defaults = store.RateLimits{RequestsPerMinute: 1 << 20, TokensPerMinute: 1 << 40, Concurrent: 1 << 20}
	keys := make([]*store.Key, 1000)
	for i := range keys {
		keys[i] = limitKey(strconv.Itoa(i), store.RateLimits{})
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		h := http.Header{}
		for pb.Next() {
			tk, err := l.admit(h, keys[next.Add(1)%int64(len(keys))], 100)
			if err != nil {
				b.Error(err)
				return
			}
			tk.done(50)
		}
	})
}
