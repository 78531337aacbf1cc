package report

import (
	"testing"
	"time"

	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// Uptime counts online time inside the windows over the windows' time, an open session until
// now, and says when there is no window time to count.
func TestUptime(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 11, 23, h, 0, 0, 0, time.UTC) } // a Monday
	office, err := schedule.Parse("mon-fri 08:00-18:00", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	sessions := []*store.NodeSession{
		{ConnectedAt: at(6), LastSeen: at(10), Ended: true}, // 2h inside
		{ConnectedAt: at(15), LastSeen: at(15)},             // open: until now, 3h inside
	}
	if got, ok := Uptime(sessions, office, at(0), at(20)); !ok || got != 0.5 {
		t.Errorf("Uptime = %v, %v; want 5h of 10h", got, ok)
	}
	if _, ok := Uptime(sessions, office, at(0), at(7)); ok {
		t.Error("Uptime before the windows open says something")
	}
	if got, ok := Uptime(sessions, nil, at(6), at(10)); !ok || got != 1 {
		t.Errorf("always open, online throughout: %v, %v; want 1", got, ok)
	}
}

// A session across midnight is split between its days, its busy time in proportion.
func TestNodeDays_SplitsAtMidnight(t *testing.T) {
	since := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	now := since.Add(48 * time.Hour)
	s := &store.NodeSession{ConnectedAt: since.Add(20 * time.Hour), LastSeen: since.Add(28 * time.Hour), Busy: 4 * time.Hour, Ended: true}
	days, total := NodeDays("n", since, now, []*store.NodeSession{s}, nil, nil, nil)
	if len(days) != 2 || days[0].Online != 4*time.Hour || days[1].Online != 4*time.Hour || days[0].Busy != 2*time.Hour {
		t.Fatalf("days = %+v; want 4h online (2h busy) on each", days)
	}
	if total.FillRate() != 0.5 || total.Window != 48*time.Hour {
		t.Errorf("total fill %v, window %v; want 0.5 and 48h", total.FillRate(), total.Window)
	}
}
