package console

import (
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// The record per day splits sessions at midnight, spreads busy time over their days, and
// counts uptime inside the declared windows only.
func TestNodeRecord(t *testing.T) {
	day := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	since, now := day(1, 0), day(3, 12)
	sched, err := schedule.Parse("mon-sun 08:00-20:00", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	sessions := []*store.NodeSession{
		{ConnectedAt: day(1, 18), LastSeen: day(2, 6), Busy: 6 * time.Hour, Ended: true}, // 6 h on each day
		{ConnectedAt: day(3, 9), LastSeen: day(3, 12), Busy: time.Hour},
	}
	counts := []store.NodeDay{{Day: day(1, 0), Jobs: 10, Failed: 1, PromptTokens: 100, CompletionTokens: 200}, {Day: day(3, 0), Jobs: 4}}
	earnings := []store.Earning{{NodeID: "n1", Day: day(3, 0), Pending: 30}, {NodeID: "n1", Day: day(1, 0), Available: 50},
		{NodeID: "n2", Day: day(1, 0), Available: 1000}}
	days, tot := nodeRecord("n1", since, now, sessions, counts, earnings, sched)
	if len(days) != 3 {
		t.Fatalf("%d days, want 3", len(days))
	}
	tests := []struct {
		name                 string
		got                  provDay
		day                  time.Time
		jobs                 int
		online, busy, window time.Duration
		uptime               float64
		pending, available   money.Nanos
	}{
		// Newest first. Day 3: 12 h so far, windows 08-12 (4 h), online 09-12 inside them.
		{"today", days[0], day(3, 0), 4, 3 * time.Hour, time.Hour, 4 * time.Hour, 0.75, 30, 0},
		// Day 2: online 00-06, outside the windows; busy 3 of the session's 6 h.
		{"yesterday", days[1], day(2, 0), 0, 6 * time.Hour, 3 * time.Hour, 12 * time.Hour, 0, 0, 0},
		// Day 1: online 18-24, 2 h of it (18-20) inside the windows.
		{"first", days[2], day(1, 0), 10, 6 * time.Hour, 3 * time.Hour, 12 * time.Hour, 2.0 / 12, 0, 50},
		{"totals", tot, time.Time{}, 14, 15 * time.Hour, 7 * time.Hour, 28 * time.Hour, 5.0 / 28, 30, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.got
			if !g.Day.Equal(tt.day) || g.Jobs != tt.jobs || g.Online != tt.online || g.Busy != tt.busy || g.Window != tt.window ||
				!g.HasWindow || !closeTo(g.UptimeInWindows, tt.uptime) || g.Pending != tt.pending || g.Available != tt.available {
				t.Errorf("got %+v\nwant day %s, %d jobs, online %s, busy %s, window %s, uptime %.3f, pending %d, available %d",
					g, tt.day, tt.jobs, tt.online, tt.busy, tt.window, tt.uptime, tt.pending, tt.available)
			}
			if want := float64(tt.busy) / float64(tt.online); !closeTo(g.FillRate, want) {
				t.Errorf("fill rate %.3f, want %.3f", g.FillRate, want)
			}
		})
	}

	// Without windows, the whole day is the window.
	days, _ = nodeRecord("n1", since, now, sessions, counts, earnings, nil)
	if d := days[2]; d.Window != 24*time.Hour || !closeTo(d.UptimeInWindows, 0.25) {
		t.Errorf("no windows: window %s, uptime %.3f; want 24h, 0.25", d.Window, d.UptimeInWindows)
	}
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
