package gateway

import (
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// A node's days: online time split at midnight, busy time spread in proportion, fill rate,
// uptime inside windows (Berlin office hours), job counts and earnings by day.
func TestNodeDays(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	sched, err := schedule.Parse("mon-fri 08:00-18:00", berlin)
	if err != nil {
		t.Fatal(err)
	}
	day := func(d int, h, m int) time.Time { return time.Date(2026, 11, 23+d, h, m, 0, 0, time.UTC) } // Mon 23 Nov
	since, now := day(0, 0, 0), day(2, 12, 0)
	sessions := []*store.NodeSession{
		// Monday 07:00–17:00 UTC = 08:00–18:00 Berlin: the whole window; busy 5h.
		{ConnectedAt: day(0, 7, 0), LastSeen: day(0, 17, 0), Busy: 5 * time.Hour, Ended: true},
		// Tuesday 22:00 UTC to Wednesday 10:00 UTC: 2h on Tuesday, 10h on Wednesday, busy 6h;
		// inside Wednesday's window from 07:00 to 10:00 UTC.
		{ConnectedAt: day(1, 22, 0), LastSeen: day(2, 10, 0), Busy: 6 * time.Hour},
	}
	counts := []store.NodeDay{{Day: day(0, 0, 0), Jobs: 10, Failed: 1, CompletionTokens: 500}, {Day: day(2, 0, 0), Jobs: 4}}
	earnings := []store.Earning{
		{NodeID: "n1", Day: day(0, 0, 0), Pending: 3 * money.USD},
		{NodeID: "other", Day: day(0, 0, 0), Pending: 7 * money.USD},
		{NodeID: "n1", Day: day(2, 0, 0), Available: money.USD / 2},
	}
	days, tot := nodeDays("n1", since, now, sessions, counts, earnings, sched)
	if len(days) != 3 {
		t.Fatalf("%d days, want Monday to Wednesday", len(days))
	}
	want := []NodeDayReport{
		{Date: "2026-11-23", Jobs: 10, Failed: 1, CompletionTokens: 500, EarnedPending: usd(3 * money.USD),
			OnlineSeconds: 10 * 3600, BusySeconds: 5 * 3600, FillRate: 0.5, WindowSeconds: 10 * 3600, UptimeInWindows: 1},
		{Date: "2026-11-24", OnlineSeconds: 2 * 3600, BusySeconds: 3600, FillRate: 0.5, WindowSeconds: 10 * 3600, UptimeInWindows: 0},
		{Date: "2026-11-25", Jobs: 4, EarnedAvailable: usd(money.USD / 2),
			OnlineSeconds: 10 * 3600, BusySeconds: 5 * 3600, FillRate: 0.5, WindowSeconds: 5 * 3600, UptimeInWindows: 0.6},
	}
	for i := range want {
		if days[i] != want[i] {
			t.Errorf("day %d:\n got %+v\nwant %+v", i, days[i], want[i])
		}
	}
	if tot.Jobs != 14 || tot.OnlineSeconds != 22*3600 || tot.WindowSeconds != 25*3600 || tot.UptimeInWindows != 0.52 || tot.EarnedPending != usd(3*money.USD) {
		t.Errorf("totals = %+v; want 14 jobs, 22h online, 25h of windows, 13/25 uptime, $3 pending", tot)
	}

	// Without windows a node is meant to be available all day.
	days, _ = nodeDays("n1", since, now, sessions, nil, nil, nil)
	if d := days[0]; d.WindowSeconds != 24*3600 || d.UptimeInWindows != 0.4167 {
		t.Errorf("always available, Monday: %+v; want 24h of window and 10/24 uptime", d)
	}
}
