// Package aside runs a call on another goroutine, a worker kept for later calls.
//
// A goroutine's stack grows to the deepest call it ever made and, while the goroutine stays
// busy at a moderate depth, does not shrink: a request that made one deep call (matching a
// node, a database write, net/http writing a response's header) and then holds a stream open
// for minutes keeps a 16 or 32 KiB stack all along. Run makes the deep call on a worker
// instead, so that the request's goroutine stays at 8 KiB. The workers are kept for the next
// calls while calls come, with the stacks they grew: a goroutine started for each call would
// grow its stack, copying it, every time.
package aside

import "time"

// idle is how long a worker waits for another call before it exits.
var idle = time.Second

// calls hands a call to a waiting worker.
var calls = make(chan call)

type call struct {
	fn   func()
	done chan any // fn's panic, or nil
}

// Run runs fn on a worker and waits for it. A panic in fn is raised again in the caller, as if
// fn had run there.
func Run(fn func()) {
	c := call{fn: fn, done: make(chan any, 1)}
	hand(c)
	if p := <-c.done; p != nil {
		panic(p)
	}
}

// Go runs fn on a worker and returns at once, as a go statement does (a panic in fn ends the
// program): for goroutines started by the thousand whose calls go deep, such as jobs.
func Go(fn func()) { hand(call{fn: fn}) }

// hand gives c to a waiting worker, or to a new one when every worker is busy.
func hand(c call) {
	select {
	case calls <- c:
	default:
		go work(c, idle)
	}
}

// work runs c, then the calls handed to it, until none comes for idle.
func work(c call, idle time.Duration) {
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		c.run()
		t.Reset(idle)
		select {
		case c = <-calls:
		case <-t.C:
			return
		}
	}
}

func (c call) run() {
	if c.done == nil {
		c.fn()
		return
	}
	defer func() { c.done <- recover() }()
	c.fn()
}
