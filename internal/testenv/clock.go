package testenv

import (
	"sync/atomic"
	"time"
)

// Clock is real time shifted by an offset a test moves (Set, Jump), or a time it holds still
// (Freeze): the network keeps running while a test moves the coordinator's clock, across an
// ask schedule's edge for one. WithClock makes it the coordinator's.
type Clock struct {
	offset atomic.Int64
	frozen atomic.Pointer[time.Time]
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	if t := c.frozen.Load(); t != nil {
		return *t
	}
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// Set makes the clock show t now, and run on from it.
func (c *Clock) Set(t time.Time) { c.frozen.Store(nil); c.offset.Store(int64(time.Until(t))) }

// Jump moves the running clock by d.
func (c *Clock) Jump(d time.Duration) { c.offset.Add(int64(d)) }

// Freeze holds the clock at t until Set.
func (c *Clock) Freeze(t time.Time) { c.frozen.Store(&t) }

// WithClock runs the coordinator's fleet, core and gateway on clk, starting at start. Its
// heartbeats are rare (an hour apart), so that the clock's jumps drop no node. The agents keep
// the real time: their receipts of jobs sent at a time far from theirs are not countersigned.
func WithClock(clk *Clock, start time.Time) Option {
	return func(c *Config) {
		clk.Set(start)
		co := &c.Coordinator
		co.Fleet.Now, co.Core.Now, co.Gateway.Now, co.Console.Now = clk.Now, clk.Now, clk.Now, clk.Now
		co.Fleet.HeartbeatInterval = time.Hour
	}
}
