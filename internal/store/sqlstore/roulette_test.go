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

// A split's arms are compared by model: counts, sums, errors, ratings, and exact percentiles
// of the most recent whole answers (store.ArmSample of them).
func TestDB_SplitArms(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		const split = "a=0.8,b=0.2"
		var us []*store.Usage
		add := func(id, model, outcome string, dur, ttft time.Duration, stream bool, at time.Time) {
			us = append(us, &store.Usage{RequestID: id, AccountID: "acct_1", Model: model, Endpoint: "chat", Stream: stream,
				PromptTokens: 10, CompletionTokens: 5, Duration: dur, TTFT: ttft, Outcome: outcome, Cost: money.Nanos(7),
				CreatedAt: at, Split: split})
		}
		// Arm a: 100 whole answers of 1..100 ms, streamed, first tokens at a tenth; one error.
		for i := 1; i <= 100; i++ {
			add(fmt.Sprintf("req_a%03d", i), "a", store.OutcomeOK, time.Duration(i)*time.Millisecond, time.Duration(i)*100*time.Microsecond, true, t0.Add(time.Duration(i)*time.Second))
		}
		add("req_aerr", "a", store.OutcomeError, time.Hour, 0, true, t0)
		// Arm b: ArmSample+5 answers, the 5 oldest far slower: out of the sample.
		for i := range store.ArmSample + 5 {
			d := 10 * time.Millisecond
			if i < 5 {
				d = time.Minute
			}
			add(fmt.Sprintf("req_b%04d", i), "b", store.OutcomeOK, d, 0, false, t0.Add(time.Duration(i)*time.Millisecond))
		}
		// Another split, another account, a request before since: none counted here.
		us = append(us, &store.Usage{RequestID: "req_other", AccountID: "acct_1", Model: "a", Outcome: store.OutcomeOK, CreatedAt: t0, Split: "a=1"},
			&store.Usage{RequestID: "req_theirs", AccountID: "acct_2", Model: "a", Outcome: store.OutcomeOK, CreatedAt: t0, Split: split},
			&store.Usage{RequestID: "req_old", AccountID: "acct_1", Model: "a", Outcome: store.OutcomeOK, CreatedAt: t0.Add(-time.Hour), Split: split},
			&store.Usage{RequestID: "req_plain", AccountID: "acct_1", Model: "a", Outcome: store.OutcomeOK, CreatedAt: t0})
		if err := db.InsertUsage(ctx, us); err != nil {
			t.Fatal(err)
		}
		for _, f := range []store.Feedback{{RequestID: "req_a001", Score: 0.2}, {RequestID: "req_a002", Score: 1}, {RequestID: "req_a002", Score: 0.6}} {
			f.AccountID, f.CreatedAt, f.UpdatedAt = "acct_1", t0, t0
			if err := db.SetFeedback(ctx, &f); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.SetFeedback(ctx, &store.Feedback{RequestID: "req_a003", AccountID: "acct_1", Score: 1.5, CreatedAt: t0, UpdatedAt: t0}); err == nil {
			t.Error("a score of 1.5 was stored")
		}
		arms, err := db.SplitArms(ctx, "acct_1", t0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.SplitArm{}
		for _, a := range arms {
			got[a.Split+" "+a.Model] = a
		}
		if len(arms) != 3 {
			t.Fatalf("arms %+v; want a and b of %s, and a of a=1", arms, split)
		}
		a := got[split+" a"]
		if a.Requests != 101 || a.Errors != 1 || a.PromptTokens != 1010 || a.Cost != 707 || a.Feedback != 2 || a.ScoreSum != 0.8 {
			t.Errorf("arm a: %+v", a)
		}
		if a.Sampled != 100 || a.Latency != (store.Percentiles{P50: 50 * time.Millisecond, P95: 95 * time.Millisecond}) ||
			a.TTFTSampled != 100 || a.TTFT != (store.Percentiles{P50: 5 * time.Millisecond, P95: 9500 * time.Microsecond}) {
			t.Errorf("arm a's percentiles: latency %v of %d, ttft %v of %d", a.Latency, a.Sampled, a.TTFT, a.TTFTSampled)
		}
		b := got[split+" b"]
		if b.Requests != store.ArmSample+5 || b.Sampled != store.ArmSample || b.Latency.P95 != 10*time.Millisecond || b.TTFTSampled != 0 {
			t.Errorf("arm b: %d requests, %d sampled, p95 %v, %d ttft; want the slow oldest out of the sample and no ttft", b.Requests, b.Sampled, b.Latency.P95, b.TTFTSampled)
		}
	})
}
