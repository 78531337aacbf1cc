package aside

import (
	"runtime"
	"testing"
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

// A deep call run aside leaves the caller's stack as it was; its result and panics come back.
func TestRun(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var got int
	Run(func() { got = deep(64) })
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got != 64 {
		t.Errorf("Run lost fn's result: %d", got)
	}
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
