// Package pricing holds the pure logic of dynamic prices: an offer's ask by weekly time
// windows (peak and off-peak asks, on the provider's clock) and the operator's surge
// multiplier, driven by a model's measured utilization. It reads no clock of its own: every
// function takes the time, so that callers inject theirs.
//
// It imports only the standard library and the money, protocol and schedule packages.
package pricing

import (
	"errors"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/schedule"
)

// Asks is an offer's compiled ask schedule. A nil *Asks asks the flat price at all times.
// An Asks is immutable, so it may be shared.
type Asks struct {
	src     protocol.AskSchedule
	windows []window
}

type window struct {
	name    string
	open    *schedule.Schedule
	in, out money.Price
}

// Ask is the ask in effect at some time: per million input and output tokens, the name of the
// window it comes from ("" for the flat ask), and when it may change next (zero: never).
type Ask struct {
	Input, Output money.Price
	Window        string
	Until         time.Time
}

// Compile checks an ask schedule, which a node sent and so may be hostile, and compiles it:
// a valid IANA time zone, 1 to protocol.MaxAskWindows windows of distinct short names,
// readable weekly specs and prices between 0 and money.MaxPrice. A nil schedule compiles to
// nil. Errors are short and quote only short parts of what was sent.
func Compile(s *protocol.AskSchedule) (*Asks, error) {
	if s == nil {
		return nil, nil
	}
	loc, err := zone(s.Timezone)
	if err != nil {
		return nil, err
	}
	switch n := len(s.Windows); {
	case n == 0:
		return nil, errors.New("no windows")
	case n > protocol.MaxAskWindows:
		return nil, fmt.Errorf("too many windows: %d > %d", n, protocol.MaxAskWindows)
	}
	a := &Asks{src: protocol.AskSchedule{Timezone: s.Timezone, Windows: append([]protocol.AskWindow(nil), s.Windows...)}}
	seen := map[string]bool{}
	for i, w := range s.Windows {
		if err := checkName(w.Name); err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
		if seen[w.Name] {
			return nil, fmt.Errorf("window %q named twice", w.Name)
		}
		seen[w.Name] = true
		if len(w.When) > protocol.MaxWindowsBytes {
			return nil, fmt.Errorf("window %q: times too long: %d > %d bytes", w.Name, len(w.When), protocol.MaxWindowsBytes)
		}
		open, err := schedule.Parse(w.When, loc)
		if err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // without the whole spec
			}
			return nil, fmt.Errorf("window %q: %s", w.Name, protocol.Clip(err.Error(), 60)) // it may quote a long term
		}
		if !validPrice(w.InputPrice) || !validPrice(w.OutputPrice) {
			return nil, fmt.Errorf("window %q: prices must be between 0 and %s USD per 1M tokens", w.Name, money.MaxPrice)
		}
		a.windows = append(a.windows, window{name: w.Name, open: open, in: money.Price(w.InputPrice), out: money.Price(w.OutputPrice)})
	}
	return a, nil
}

// zone loads an IANA time zone by name, refusing the empty name and "Local", which would
// read the windows on the coordinator's clock, not the provider's.
func zone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, errors.New("no time zone: want an IANA zone such as Europe/Berlin")
	}
	if len(name) > protocol.MaxTagBytes {
		return nil, fmt.Errorf("time zone too long: %d > %d bytes", len(name), protocol.MaxTagBytes)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", protocol.Clip(name, 24))
	}
	return loc, nil
}

func validPrice(p int64) bool { return p >= 0 && money.Price(p) <= money.MaxPrice }

// checkName accepts a window's name: 1 to protocol.MaxAskWindowNameBytes ASCII letters,
// digits, "-" or "_", which reports and the console show as they are.
func checkName(name string) error {
	if name == "" {
		return errors.New("no name")
	}
	if len(name) > protocol.MaxAskWindowNameBytes {
		return fmt.Errorf("name too long: %d > %d bytes", len(name), protocol.MaxAskWindowNameBytes)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("name %q: want letters, digits, - or _", protocol.Clip(name, 24))
		}
	}
	return nil
}

// Schedule returns the schedule as it was compiled; nil for a nil Asks.
func (a *Asks) Schedule() *protocol.AskSchedule {
	if a == nil {
		return nil
	}
	s := a.src
	s.Windows = append([]protocol.AskWindow(nil), s.Windows...)
	return &s
}

// maxEdges bounds At's search for the next change of the ask: each step passes an edge of a
// window that changes nothing (one hidden by a window before it).
const maxEdges = 64

// At returns the ask in effect at t: the prices of the first window open at t, or else the
// flat ask, with when that may change next.
func (a *Asks) At(t time.Time, flatIn, flatOut money.Price) Ask {
	ask := a.at(t, flatIn, flatOut)
	if a == nil {
		return ask
	}
	// Until: the first edge of a window after which the ask differs.
	cur := t
	for range maxEdges {
		next := a.nextEdge(cur)
		if next.IsZero() {
			return ask
		}
		if a.at(next, flatIn, flatOut) != ask {
			ask.Until = next
			return ask
		}
		cur = next
	}
	ask.Until = cur // an edge at which it may change: a safe bound for caches
	return ask
}

func (a *Asks) at(t time.Time, flatIn, flatOut money.Price) Ask {
	if a != nil {
		for _, w := range a.windows {
			if w.open.Open(t) {
				return Ask{Input: w.in, Output: w.out, Window: w.name}
			}
		}
	}
	return Ask{Input: flatIn, Output: flatOut}
}

// nextEdge is the first instant after t at which some window opens or closes; zero: none.
func (a *Asks) nextEdge(t time.Time) time.Time {
	var first time.Time
	for _, w := range a.windows {
		if n := w.open.Next(t); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}
