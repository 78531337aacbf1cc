package console

import (
	"sync"
	"time"
)

// limiter counts log-in attempts (a success takes its email's back) per client address and per email, and sign-ups per address,
// each in a sliding window. It is in memory: each coordinator process counts its own.
type limiter struct {
	now func() time.Time

	mu      sync.Mutex
	byAddr  window // failed log-ins
	byEmail window // failed log-ins
	signups window // sign-ups made
	swept   time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{
		now:     now,
		byAddr:  window{max: loginsByAddr, span: loginWindow, hits: map[string][]time.Time{}},
		byEmail: window{max: loginsByEmail, span: loginWindow, hits: map[string][]time.Time{}},
		signups: window{max: signupsByAddr, span: signupWindow, hits: map[string][]time.Time{}},
	}
}

// loginAttempt checks and counts a log-in attempt in one step, before its password is
// checked: parallel attempts cannot all pass the check before any is counted. It returns
// how long to wait when blocked (nothing counted then); a success takes the email's count
// back with loginSucceeded.
func (l *limiter) loginAttempt(addr, email string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if wait := max(l.byAddr.wait(addr, now), l.byEmail.wait(email, now)); wait > 0 {
		return wait
	}
	l.sweep(now)
	l.byAddr.add(addr, now)
	l.byEmail.add(email, now)
	return 0
}

// loginSucceeded clears the email's failures (not the address's).
func (l *limiter) loginSucceeded(email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byEmail.hits, email)
}

// signupBlocked returns how long sign-ups from addr must wait; 0: they may go on.
func (l *limiter) signupBlocked(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signups.wait(addr, l.now())
}

// signedUp counts a sign-up.
func (l *limiter) signedUp(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	l.signups.add(addr, now)
}

// sweep forgets, every so often, the keys that have no hit left in their window, so that the
// maps hold only the recently active.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < loginWindow {
		return
	}
	l.swept = now
	for _, w := range []*window{&l.byAddr, &l.byEmail, &l.signups} {
		for k := range w.hits {
			w.live(k, now)
		}
	}
}

// window counts hits per key in the last span, allowing max.
type window struct {
	max  int
	span time.Duration
	hits map[string][]time.Time // per key, oldest first: only those in the window, at most max
}

// live drops the key's hits that left the window, and returns the rest.
func (w *window) live(key string, now time.Time) []time.Time {
	hs := w.hits[key]
	i := 0
	for i < len(hs) && !hs[i].After(now.Add(-w.span)) {
		i++
	}
	hs = hs[i:]
	if len(hs) == 0 {
		delete(w.hits, key)
	} else {
		w.hits[key] = hs
	}
	return hs
}

// wait returns how long until the key has fewer than max hits in the window; 0 if it has.
func (w *window) wait(key string, now time.Time) time.Duration {
	hs := w.live(key, now)
	if len(hs) < w.max {
		return 0
	}
	return hs[len(hs)-w.max].Add(w.span).Sub(now)
}

// add counts a hit.
func (w *window) add(key string, now time.Time) {
	hs := append(w.live(key, now), now)
	if len(hs) > w.max {
		hs = append([]time.Time(nil), hs[len(hs)-w.max:]...)
	}
	w.hits[key] = hs
}
