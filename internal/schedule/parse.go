package schedule

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Parse reads a spec (see the package doc) whose times are wall-clock times in loc. An empty
// spec, or "always", is always open. The error names the part of the spec that is wrong.
func Parse(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		return nil, errors.New("schedule: no time zone")
	}
	items, err := parseItems(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule: %q: %w", spec, err)
	}
	return compile(items, loc), nil
}

// item is windows on some days.
type item struct {
	days    days
	windows []window
}

// dashSpaces is a dash and the spaces around it, which a spec may put in "mon - fri".
var dashSpaces = regexp.MustCompile(`\s*-\s*`)

// parseItems reads a spec into items; nil for one that is always open.
func parseItems(spec string) ([]item, error) {
	terms := strings.FieldsFunc(dashSpaces.ReplaceAllString(spec, "-"), func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == ';'
	})
	if len(terms) == 1 && strings.EqualFold(terms[0], "always") {
		return nil, nil
	}
	var (
		items   []item
		pending days     // days named since the last window
		named   []string // the terms that named them
	)
	for _, term := range terms {
		first, _ := utf8.DecodeRuneInString(term)
		switch {
		case strings.EqualFold(term, "always"):
			return nil, errors.New(`"always" must stand alone`)
		case unicode.IsLetter(first):
			d, err := parseDays(term)
			if err != nil {
				return nil, err
			}
			pending, named = pending|d, append(named, term)
		case unicode.IsDigit(first):
			w, err := parseWindow(term)
			if err != nil {
				return nil, err
			}
			items = addWindow(items, pending, w)
			pending, named = 0, nil
		default:
			return nil, fmt.Errorf("unexpected %q", term)
		}
	}
	if pending != 0 {
		return nil, fmt.Errorf("no window after %q", strings.Join(named, ","))
	}
	return items, nil
}

// addWindow adds w to the last item, or to a new one on the days just named (every day when
// none has been named yet).
func addWindow(items []item, named days, w window) []item {
	last := len(items) - 1
	if named == 0 && last < 0 {
		named = allDays
	}
	if named == 0 || (last >= 0 && items[last].days == named) {
		items[last].windows = append(items[last].windows, w)
		return items
	}
	return append(items, item{days: named, windows: []window{w}})
}

// parseDays reads daily, a day (mon) or a range of days (fri-mon).
func parseDays(term string) (days, error) {
	if strings.EqualFold(term, "daily") {
		return allDays, nil
	}
	names := strings.Split(term, "-")
	if len(names) > 2 || slices.Contains(names, "") {
		return 0, fmt.Errorf("%q is not a day or a range of days such as mon-fri", term)
	}
	var ws []time.Weekday
	for _, name := range names {
		w, ok := lookupDay(name)
		if !ok {
			return 0, fmt.Errorf("unknown day %q", name)
		}
		ws = append(ws, w)
	}
	return dayRange(ws[0], ws[len(ws)-1]), nil
}

// parseWindow reads a window such as 08:00-18:00 or 22:30-01:00.
func parseWindow(term string) (window, error) {
	ends := strings.Split(term, "-")
	if len(ends) != 2 || slices.Contains(ends, "") {
		return window{}, fmt.Errorf("%q is not a window such as 08:00-18:00", term)
	}
	start, err := parseClock(ends[0])
	if err != nil {
		return window{}, err
	}
	end, err := parseClock(ends[1])
	if err != nil {
		return window{}, err
	}
	w := window{start, end}
	switch {
	case start == dayMinutes:
		return window{}, fmt.Errorf("window %s cannot start at 24:00", w)
	case start == end:
		return window{}, fmt.Errorf("window %s is empty", w)
	}
	return w, nil
}

// parseClock reads a time of day, H:MM or HH:MM, from 00:00 to 24:00.
func parseClock(s string) (clock, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	hour, min := atoi(h), atoi(m)
	if hour > 24 || min > 59 || (hour == 24 && min != 0) {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return clock(hour*60 + min), nil
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// atoi reads at most two decimal digits.
func atoi(s string) int {
	n := 0
	for _, c := range []byte(s) {
		n = n*10 + int(c-'0')
	}
	return n
}
