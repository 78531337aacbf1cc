package aside

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// deep uses about n KiB of stack, and returns n.
//
//go:noinline
func deep(n int) int {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return 0
	}
	return deep(n-1) + 1 + int(pad[n%len(pad)]) - n%256
}

// A deep call run aside leaves the caller's stack as it was, and the worker's goes when the
// worker does; its result and panics come back.
func TestRun(t *testing.T) {
	defer func(d time.Duration) { idle = d }(idle)
	idle = 10 * time.Millisecond
	var before, after runtime.MemStats
	waitWorkers(t, 0)
	runtime.GC()
	runtime.ReadMemStats(&before)
	var got int
	Run(func() { got = deep(64) })
	if got != 64 {
		t.Errorf("Run lost fn's result: %d", got)
	}
	waitWorkers(t, 0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.StackInuse) - int64(before.StackInuse); grew >= 64<<10 {
		t.Errorf("the stacks in use grew by %d bytes after a 64 KiB call run aside", grew)
	}
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want fn's panic", p)
		}
	}()
	Run(func() { panic("boom") })
}

// A worker takes the calls that come while it waits, and calls at once get workers of their
// own.
func TestRun_ReusesWorkers(t *testing.T) {
	defer func(d time.Duration) { idle = d }(idle)
	idle = 2 * time.Second // long enough that no worker leaves between two calls
	waitWorkers(t, 0)
	for range 10 {
		Run(func() {})
		waitWaiting(t, 1) // back and waiting for the next call
	}
	if n := workers(); n != 1 {
		t.Errorf("%d workers after 10 calls one after the other; want 1", n)
	}
	gone := make(chan struct{})
	Go(func() { close(gone) })
	<-gone
	waitWaiting(t, 1)
	if n := workers(); n != 1 {
		t.Errorf("%d workers after Go; want the one that waited", n)
	}
	var wg sync.WaitGroup
	release := make(chan struct{})
	ran := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			Run(func() {
				ran <- struct{}{}
				<-release
			})
		})
	}
	for range 8 {
		<-ran // each call runs while the others wait: none waits for a worker
	}
	close(release)
	wg.Wait()
}

// waitWaiting waits until n workers wait for a call.
func waitWaiting(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, waiting := countWorkers(); waiting != n; _, waiting = countWorkers() {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers waiting after 10 s; want %d", waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitWorkers waits until n workers are left, the others gone after idle.
func waitWorkers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for workers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers after 10 s; want %d", workers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// workers counts the goroutines in work.
func workers() int {
	n, _ := countWorkers()
	return n
}

// countWorkers counts the goroutines in work, and those of them waiting in its select.
func countWorkers() (all, waiting int) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("aside.work(")) {
			all++
			if bytes.Contains(g, []byte(" [select")) { // "goroutine 7 [select]:" or "[select, 1 minutes]:"
				waiting++
			}
		}
	}
	return all, waiting
}
