package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar shows a run's progress. On a terminal it redraws one line in place:
//
//	[=============>                ] 523/1000  52%  812 req/s  3 errors  eta 1s
//
// Elsewhere (a log file, a pipe) it writes one such line every Every.
type Bar struct {
	w        io.Writer
	terminal bool
	// Every is how often a line is written when not on a terminal; default 5s.
	Every time.Duration
	last  time.Duration // when the last line was written, off a terminal
}

var _ Progress = (*Bar)(nil)

// NewBar returns a bar writing to w, which is a terminal or not.
func NewBar(w io.Writer, terminal bool) *Bar {
	return &Bar{w: w, terminal: terminal, Every: 5 * time.Second}
}

// Update draws the bar.
func (b *Bar) Update(s Snapshot) {
	if b.terminal {
		fmt.Fprintf(b.w, "\r%s\033[K", Line(s))
		return
	}
	if s.Elapsed-b.last >= b.Every {
		b.last = s.Elapsed
		fmt.Fprintln(b.w, Line(s))
	}
}

// Done draws the bar a last time, and ends its line, on a terminal.
func (b *Bar) Done(s Snapshot) {
	if b.terminal {
		fmt.Fprintf(b.w, "\r%s\033[K\n", Line(s))
	}
}

const barWidth = 30

// Line is the progress line of s.
func Line(s Snapshot) string {
	var frac float64
	var count string
	switch {
	case s.Holding && s.Total > 0:
		frac = float64(s.Done) / float64(s.Total)
		count = fmt.Sprintf("%d/%d streams opened", s.Done-s.Failed, s.Total)
	case s.Total > 0:
		frac = float64(s.Done) / float64(s.Total)
		count = fmt.Sprintf("%d/%d  %3.0f%%", s.Done, s.Total, 100*frac)
	case s.Duration > 0:
		frac = float64(s.Elapsed) / float64(s.Duration)
		count = fmt.Sprintf("%s/%s  %d done", s.Elapsed.Truncate(time.Second), s.Duration, s.Done)
	}
	frac = min(max(frac, 0), 1)
	fill := int(frac * barWidth)
	bar := strings.Repeat("=", fill)
	if fill < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-fill-1)
	}
	var rate float64
	if s.Elapsed > 0 {
		rate = float64(s.Done) / s.Elapsed.Seconds()
	}
	line := fmt.Sprintf("[%s] %s", bar, count)
	if !s.Holding {
		line += fmt.Sprintf("  %.0f req/s", rate)
	}
	errs := "errors"
	if s.Failed == 1 {
		errs = "error"
	}
	line += fmt.Sprintf("  %d %s", s.Failed, errs)
	var eta time.Duration
	switch {
	case s.Holding:
		return line
	case s.Total > 0 && rate > 0:
		eta = time.Duration(float64(s.Total-s.Done) / rate * float64(time.Second))
	case s.Total == 0 && s.Duration > 0:
		eta = s.Duration - s.Elapsed
	default:
		return line
	}
	return line + "  eta " + max(eta, 0).Round(time.Second).String()
}
