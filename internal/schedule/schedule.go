// Package schedule holds a provider's weekly availability windows: the hours of the week,
// on the clock of the node's time zone, during which the node takes jobs.
//
// A spec names days and the windows open on them:
//
//	mon-fri 08:00-18:00, 22:30-01:00   weekdays 08:00 to 18:00, and 22:30 to 01:00 the next day
//	sat,sun 00:00-24:00                all weekend
//	daily 09:00-17:00                  every day from 9 to 17
//	22:00-06:00                        every night (no days: every day)
//	mon 22:00-06:00; wed 10:00-12:00   Monday night until Tuesday 6:00, and Wednesday morning
//	fri-mon 18:00-24:00                Friday, Saturday, Sunday and Monday evenings
//	always                             always open, as is the empty spec
//
// The grammar:
//
//	spec    = "always" | [ windows ] { days windows }
//	windows = window { window }
//	days    = dayterm { dayterm }
//	dayterm = "daily" | day | day "-" day
//	day     = "mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun"
//	window  = time "-" time
//	time    = H:MM | HH:MM             from 00:00 to 23:59, and 24:00 as a window's end
//
// Terms are separated by spaces, commas or semicolons, which all mean the same; spaces around
// a "-" do not count, and names may be in any case. A window is open on the days named last
// before it: in "mon-fri 08:00-18:00, 22:30-01:00" both windows are on weekdays, and
// "mon 22:00-06:00; 10:00-12:00" means both windows on Mondays. Windows before any day is
// named are open every day. A range of days wraps the week: fri-mon is Friday to Monday.
//
// A window whose end is not after its start ends on the next day: "fri 22:30-01:00" is open
// from Friday 22:30 to Saturday 01:00, and "sun 23:00-01:00" until Monday 01:00. A window
// lasts at most a day (00:00-24:00), and one that ends where it starts is an error. Windows
// may overlap; the schedule is open in any of them.
//
// Windows are wall-clock times: the schedule is open whenever a clock on the wall in the
// schedule's time zone shows a time inside a window. When clocks spring forward, the times
// they skip are never shown: a window inside the gap (02:00-03:00 in Europe/Berlin on the last
// Sunday of March) does not open that day, one that starts in the gap opens when the clocks
// jump, and one around the gap is shorter in real time by the time skipped. When clocks fall
// back, the times they repeat are shown twice and a window is open both times: one around
// them is longer in real time by the time repeated.
//
// This package imports only the standard library.
package schedule

import "time"

// Schedule is a provider's weekly availability windows in a time zone. A nil or zero
// Schedule is always open. A Schedule is immutable, so it may be shared.
type Schedule struct {
	loc   *time.Location
	items []item // nil: always open
	open  minuteSet
	flips []int // the minutes of the week at which open changes
}

// compile builds the schedule of items in loc.
func compile(items []item, loc *time.Location) *Schedule {
	s := &Schedule{loc: loc, items: items}
	for _, it := range items {
		for w := range time.Weekday(7) {
			if !it.days.has(w) {
				continue
			}
			for _, win := range it.windows {
				s.open.add(int(w)*dayMinutes+int(win.start), win.minutes())
			}
		}
	}
	s.flips = s.open.flips()
	return s
}

// always reports whether the schedule has no windows, and so is always open.
func (s *Schedule) always() bool { return s == nil || s.items == nil }

// Open reports whether t is inside a window: whether the node may take jobs at t.
func (s *Schedule) Open(t time.Time) bool {
	if s.always() {
		return true
	}
	return s.open.has(minuteOfWeek(t.In(s.loc)))
}

// Next returns the first instant after t at which Open changes: when the next window opens, or
// the current one closes, in the schedule's time zone. That may be the instant clocks change,
// when they skip into or out of a window. Next returns the zero time when Open never changes,
// as for a schedule that is always open.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.always() || len(s.flips) == 0 {
		return time.Time{}
	}
	open := s.Open(t)
	// Between changes of the zone's offset, the wall clock runs with real time: find the
	// next flip of the week on the wall, unless the offset changes first.
	cur := t
	for range maxSteps {
		wall := cur.In(s.loc)
		_, zoneEnd := wall.ZoneBounds()
		next := cur.Add(s.untilFlip(wall))
		if !zoneEnd.IsZero() && !next.Before(zoneEnd) {
			next = zoneEnd
		}
		if s.Open(next) != open {
			return next.In(s.loc)
		}
		cur = next
	}
	return time.Time{}
}

// maxSteps bounds Next's search. Each step ends at a flip of the week, which changes Open
// unless clocks change, or where clocks change, which a zone does a few times a year.
const maxSteps = 1000

// untilFlip returns how long the wall clock runs from wall to the next flip of the week.
func (s *Schedule) untilFlip(wall time.Time) time.Duration {
	now := sinceWeekStart(wall)
	for _, m := range s.flips {
		if at := time.Duration(m) * time.Minute; at > now {
			return at - now
		}
	}
	return time.Duration(s.flips[0])*time.Minute + 7*24*time.Hour - now
}

// Overlap returns how much of [from, to) lies inside windows, in real time: the time the node
// was meant to be available. It is zero when to is not after from.
func (s *Schedule) Overlap(from, to time.Time) time.Duration {
	var inside time.Duration
	for cur := from; cur.Before(to); {
		next := s.Next(cur)
		if next.IsZero() || next.After(to) {
			next = to
		}
		if s.Open(cur) {
			inside += next.Sub(cur)
		}
		cur = next
	}
	return inside
}

// String returns the spec in its normal form, such as
// "mon-fri 08:00-18:00, 22:30-01:00; sat,sun 00:00-24:00", or "always". Parsing it gives the
// same schedule.
func (s *Schedule) String() string {
	if s.always() {
		return "always"
	}
	var b []byte
	for i, it := range s.items {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = append(b, it.days.String()...)
		for j, w := range it.windows {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, ' ')
			b = append(b, w.String()...)
		}
	}
	return string(b)
}

// minuteOfWeek returns the minutes since Sunday 00:00 on wall's clock.
func minuteOfWeek(wall time.Time) int {
	return int(sinceWeekStart(wall) / time.Minute)
}

// sinceWeekStart returns the time since Sunday 00:00 on wall's clock.
func sinceWeekStart(wall time.Time) time.Duration {
	h, m, sec := wall.Clock()
	return time.Duration(wall.Weekday())*24*time.Hour + time.Duration(h)*time.Hour +
		time.Duration(m)*time.Minute + time.Duration(sec)*time.Second +
		time.Duration(wall.Nanosecond())
}
