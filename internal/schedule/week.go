package schedule

import (
	"fmt"
	"strings"
	"time"
)

const (
	dayMinutes  = 24 * 60
	weekMinutes = 7 * dayMinutes
)

// minuteSet holds the minutes of a week, counted from Sunday 00:00 (time.Weekday's order).
type minuteSet [(weekMinutes + 63) / 64]uint64

// add adds the n minutes from minute start on, wrapping at the week's end.
func (s *minuteSet) add(start, n int) {
	for i := range n {
		m := (start + i) % weekMinutes
		s[m/64] |= 1 << (m % 64)
	}
}

// has reports whether minute m of the week is in the set.
func (s *minuteSet) has(m int) bool {
	return s[m/64]&(1<<(m%64)) != 0
}

// flips returns the minutes at which the set starts or stops, in order: the minutes m in the
// set whose minute before is not (wrapping at the week's end), and the other way round.
func (s *minuteSet) flips() []int {
	var out []int
	for m := range weekMinutes {
		if s.has(m) != s.has((m+weekMinutes-1)%weekMinutes) {
			out = append(out, m)
		}
	}
	return out
}

// days is a set of weekdays, one bit per time.Weekday.
type days uint8

const allDays days = 1<<7 - 1

func (d days) has(w time.Weekday) bool { return d&(1<<w) != 0 }

// dayNames are the days as a spec names them, in time.Weekday's order.
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// mondayFirst is the order a spec lists days in.
var mondayFirst = [7]time.Weekday{
	time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday,
}

// lookupDay returns the weekday a name (mon, tue, …, any case) stands for.
func lookupDay(name string) (time.Weekday, bool) {
	for i, n := range dayNames {
		if strings.EqualFold(name, n) {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

// dayRange returns the days from first to last, wrapping at the week's end: fri-mon is
// fri, sat, sun, mon. A range from a day to itself is that day.
func dayRange(first, last time.Weekday) days {
	var d days
	for w := first; ; w = (w + 1) % 7 {
		d |= 1 << w
		if w == last {
			return d
		}
	}
}

// String writes the days as a spec would, in their shortest form: daily, mon-fri, sat,sun,
// fri-mon, mon,wed,fri.
func (d days) String() string {
	if d == allDays {
		return "daily"
	}
	var parts []string
	for _, first := range mondayFirst {
		if !d.has(first) || d.has((first+6)%7) {
			continue // not the first day of a run
		}
		last, n := first, 1
		for d.has((last + 1) % 7) {
			last, n = (last+1)%7, n+1
		}
		switch n {
		case 1:
			parts = append(parts, dayNames[first])
		case 2:
			parts = append(parts, dayNames[first]+","+dayNames[last])
		default:
			parts = append(parts, dayNames[first]+"-"+dayNames[last])
		}
	}
	return strings.Join(parts, ",")
}

// clock is a time of day in minutes since midnight, 0 to 24*60.
type clock int

func (c clock) String() string { return fmt.Sprintf("%02d:%02d", c/60, c%60) }

// window is a span of wall-clock time that starts on a day: it ends on the next day when
// end is not after start.
type window struct{ start, end clock }

func (w window) String() string { return w.start.String() + "-" + w.end.String() }

// minutes is the window's length.
func (w window) minutes() int {
	if w.end > w.start {
		return int(w.end - w.start)
	}
	return int(w.end-w.start) + dayMinutes
}
