package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// Earnings by the ask they were billed at, on every database: each part's window and surge are
// kept with its entry, summed over the same entries as Earnings (pending and released alike),
// dearest first; entries from before surge (0) read as ×1.
func TestDB_EarningsByAsk(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_b", "buyer")
		mustAccount(t, db, "acct_p", "provider")
		if err := db.Deposit(ctx, "acct_b", 10_000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		for i, p := range []store.Part{
			{NodeID: "node_1", Earned: 100, AskWindow: "peak", Surge: 10000},
			{NodeID: "node_2", Earned: 250, AskWindow: "peak", Surge: 10000},
			{NodeID: "node_1", Earned: 30, AskWindow: "", Surge: 0}, // from before surge
			{NodeID: "node_1", Earned: 20, AskWindow: "", Surge: 10000},
			{NodeID: "node_1", Earned: 600, AskWindow: "peak", Surge: 15000},
			{NodeID: "node_1", Earned: 7, AskWindow: "night", Surge: 10000},
		} {
			id := fmt.Sprintf("req_%d", i)
			p.ProviderID = "acct_p"
			if err := db.PlaceHold(ctx, &store.Hold{RequestID: id, AccountID: "acct_b", KeyID: "key_1", Amount: p.Earned + 5, CreatedAt: at(time.Duration(i) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			s := &store.Settlement{RequestID: id, Debit: p.Earned + 5, Fee: 5, At: at(time.Duration(i) * time.Minute), ReleaseAt: at(time.Hour),
				Parts: []store.Part{p}}
			if errs := db.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		}
		if _, err := db.ReleaseEarnings(ctx, at(time.Hour)); err != nil { // released earnings still count
			t.Fatal(err)
		}
		got, err := db.EarningsByAsk(ctx, "acct_p", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.AskEarning{
			{Window: "peak", Surge: 15000, Parts: 1, Earned: 600},
			{Window: "peak", Surge: 10000, Parts: 2, Earned: 350},
			{Window: "", Surge: 10000, Parts: 2, Earned: 50},
			{Window: "night", Surge: 10000, Parts: 1, Earned: 7},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("EarningsByAsk\n got %v\nwant %v", got, want)
		}
		var byAsk, byDay money.Nanos
		for _, e := range got {
			byAsk += e.Earned
		}
		days, err := db.Earnings(ctx, "acct_p", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			byDay += d.Pending + d.Available
		}
		if byAsk != byDay {
			t.Errorf("by ask %d; per day %d: want the same earnings", byAsk, byDay)
		}
		if got, err := db.EarningsByAsk(ctx, "acct_p", at(4*time.Minute)); err != nil || len(got) != 2 {
			t.Errorf("since the 5th part: %v, %v; want its two", got, err)
		}
	})
}

// A node's ask schedule from the console: none, set, replaced, cleared.
func TestDB_NodeAskSchedule(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if s, err := db.NodeAskSchedule(ctx, "node_1"); s != "" || err != nil {
			t.Fatalf("none set: %q, %v", s, err)
		}
		for _, want := range []string{`{"timezone":"UTC","windows":[]}`, `{"timezone":"Europe/Berlin","windows":[]}`} {
			if err := db.SetNodeAskSchedule(ctx, "node_1", want, t0); err != nil {
				t.Fatal(err)
			}
			if s, err := db.NodeAskSchedule(ctx, "node_1"); s != want || err != nil {
				t.Errorf("got %q, %v; want %q", s, err, want)
			}
		}
		if err := db.SetNodeAskSchedule(ctx, "node_1", "", t0); err != nil {
			t.Fatal(err)
		}
		if s, err := db.NodeAskSchedule(ctx, "node_1"); s != "" || err != nil {
			t.Errorf("cleared: %q, %v", s, err)
		}
	})
}
