// Package report computes a node's record per UTC day from what the store keeps of it: its
// sessions (online and busy time), its job counts, its earnings and its declared windows. The
// provider API (gateway), the web console and the reputation's uptime read it the same way.
//
// It is pure: the caller loads the store's records.
package report

import (
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// Day is a node's record over one UTC day, or over a whole period (totals).
type Day struct {
	Day                            time.Time // midnight UTC; zero for totals
	Jobs, Failed                   int
	PromptTokens, CompletionTokens int64
	Pending, Available             money.Nanos // earned, by the ledger's state
	Online, Busy                   time.Duration
	Window                         time.Duration // time inside the declared windows (all day without)
	InWindows                      time.Duration // online time inside them
}

// FillRate is busy over online time, in [0, 1]; 0 when never online.
func (d Day) FillRate() float64 {
	if d.Online <= 0 {
		return 0
	}
	return min(float64(d.Busy)/float64(d.Online), 1)
}

// UptimeInWindows is the share of the windows' time the node was online, in [0, 1]; ok is
// false when the day had no window time.
func (d Day) UptimeInWindows() (share float64, ok bool) {
	if d.Window <= 0 {
		return 0, false
	}
	return min(float64(d.InWindows)/float64(d.Window), 1), true
}

// NodeDays is a node's record per UTC day from since (a midnight UTC) to now, oldest first,
// and over the whole period. Online time is the sessions' time within each day (an open
// session's LastSeen is its last sighting); a session's busy time is spread over its days in
// proportion to its online time in each. A nil schedule is always open.
func NodeDays(nodeID string, since, now time.Time, sessions []*store.NodeSession, counts []store.NodeDay,
	earnings []store.Earning, sched *schedule.Schedule) (days []Day, total Day) {
	for day := since; day.Before(now); day = day.AddDate(0, 0, 1) {
		end := minTime(day.AddDate(0, 0, 1), now)
		d := Day{Day: day, Window: sched.Overlap(day, end)}
		for _, s := range sessions {
			from, to := maxTime(s.ConnectedAt, day), minTime(s.LastSeen, end)
			if !from.Before(to) {
				continue
			}
			d.Online += to.Sub(from)
			d.InWindows += sched.Overlap(from, to)
			if span := s.LastSeen.Sub(s.ConnectedAt); span > 0 {
				d.Busy += time.Duration(float64(s.Busy) * float64(to.Sub(from)) / float64(span))
			}
		}
		days = append(days, d)
	}
	index := func(t time.Time) int { return int(t.Sub(since) / (24 * time.Hour)) }
	for _, c := range counts {
		if i := index(c.Day); i >= 0 && i < len(days) {
			d := &days[i]
			d.Jobs, d.Failed, d.PromptTokens, d.CompletionTokens = c.Jobs, c.Failed, c.PromptTokens, c.CompletionTokens
		}
	}
	for _, e := range earnings {
		if i := index(e.Day); e.NodeID == nodeID && i >= 0 && i < len(days) {
			days[i].Pending += e.Pending
			days[i].Available += e.Available
		}
	}
	for _, d := range days {
		total.Jobs += d.Jobs
		total.Failed += d.Failed
		total.PromptTokens += d.PromptTokens
		total.CompletionTokens += d.CompletionTokens
		total.Pending += d.Pending
		total.Available += d.Available
		total.Online += d.Online
		total.Busy += d.Busy
		total.Window += d.Window
		total.InWindows += d.InWindows
	}
	return days, total
}

// Uptime is the share of the windows' time between since and now that the node was online,
// from its sessions (an open one counts until now); ok is false when the windows held less
// than a minute.
func Uptime(sessions []*store.NodeSession, sched *schedule.Schedule, since, now time.Time) (share float64, ok bool) {
	meant := sched.Overlap(since, now)
	if meant < time.Minute {
		return 0, false
	}
	var online time.Duration
	for _, s := range sessions {
		to := s.LastSeen
		if !s.Ended {
			to = now
		}
		online += sched.Overlap(maxTime(s.ConnectedAt, since), minTime(to, now))
	}
	return min(float64(online)/float64(meant), 1), true
}

// Schedule is a node's declared windows; nil when it declared none (always available). A node
// that could not name its time zone ("" or "Local") is read in UTC.
func Schedule(n *store.Node) (*schedule.Schedule, error) {
	if n.Windows == "" {
		return nil, nil
	}
	loc := time.UTC
	if n.Timezone != "" && n.Timezone != "Local" {
		l, err := time.LoadLocation(n.Timezone)
		if err != nil {
			return nil, err
		}
		loc = l
	}
	return schedule.Parse(n.Windows, loc)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
