package ledger_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
)

// BenchmarkHoldSettle measures the money path of a request as the request core runs it: a hold,
// then the bill queued for settlement (SettleLater) with the request's usage record, on each
// database, with 1, 50 and 256 requests at a time. cpu-µs/op is the CPU (user and system) this
// process spends per request, the settlements' commits included (the ledger is closed, which
// settles what is queued, before the clock stops); on SQLite that is the database's own work
// too, on PostgreSQL only the client's. settled/s is the throughput. Each settlement carries
// its job's receipt (1.2 KiB, a random job id), as the notary's do.
//
// The stored= cases run on a store that has settled 100,000 requests already, as a busy
// coordinator's has after half a minute: an index that takes each request at a random place
// (as receipts keyed by their job id did, before migration 0016) costs a page per request
// there, where a fresh store's whole index fits in a few pages.
//
//	SHAREAI_TEST_POSTGRES=postgres://… go test -run '^$' -bench HoldSettle ./internal/ledger
func BenchmarkHoldSettle(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, conc := range []int{1, 50, 256} {
			b.Run(fmt.Sprintf("%s/conc=%d", kind, conc), func(b *testing.B) {
				benchHoldSettle(b, kind, conc, 0)
			})
		}
		b.Run(kind+"/conc=50/stored=100000", func(b *testing.B) {
			benchHoldSettle(b, kind, 50, 100_000)
		})
	}
}

func benchHoldSettle(b *testing.B, kind string, conc, stored int) {
	f := setupB(b, kind)
	ctx := context.Background()
	bounds := ledger.Bounds{PromptTokens: 2000, CompletionTokens: 500}
	amount := f.l.MaxCost(ask, bounds)
	signed := []byte(`{"receipt":"` + strings.Repeat("x", 1200) + `"}`)
	one := func() error {
		id := requestid.New()
		if err := f.l.Hold(ctx, id, f.buyer, amount); err != nil {
			return err
		}
		bill := f.l.Price(id, bounds, []ledger.Work{{NodeID: "n1", ProviderID: f.provider, Ask: ask,
			PromptTokens: 1200, CompletionTokens: 300, DeliveredBytes: 1500}})
		bill.Settlement.Receipts = []*store.Receipt{{RequestID: id, JobID: "job_" + rand.Text()[:20], NodeID: "n1",
			Signed: signed, CreatedAt: time.Now()}}
		f.l.SettleLater(bill, &store.Usage{RequestID: id, AccountID: f.buyer.AccountID, KeyID: f.buyer.ID,
			Model: "llama3.1:8b", NodeID: "n1", Endpoint: "chat", PromptTokens: bill.PromptTokens,
			CompletionTokens: bill.CompletionTokens, TTFT: 20 * time.Millisecond, Duration: 900 * time.Millisecond,
			Outcome: store.OutcomeOK, FinishReason: "stop", CreatedAt: time.Now()})
		return nil
	}
	for range 20 { // warm the statement caches
		if err := one(); err != nil {
			b.Fatal(err)
		}
	}
	runAtOnce(b, stored, conc, one)
	if err := f.l.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cpu0, start := cpu(b), time.Now()
	b.ResetTimer()
	runAtOnce(b, b.N, conc, one)
	f.l.Close() // settles what is queued
	b.StopTimer()
	b.ReportMetric(float64((cpu(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "settled/s")
	if sum, _ := f.db.LedgerSum(ctx); sum != 0 {
		b.Errorf("ledger sum %d", sum)
	}
	if bal, _ := f.db.Balance(ctx, f.buyer.AccountID); bal.Held != 0 {
		b.Errorf("held %d after every request settled", bal.Held)
	}
}

// runAtOnce calls one n times, conc calls at a time.
func runAtOnce(b *testing.B, n, conc int, one func() error) {
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range next {
				if err := one(); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
}

func setupB(b *testing.B, kind string) *fixture { return setupTB(b, kind, 1000*money.USD) }

// cpu is the CPU this process has used so far (bench.ProcessCPU).
func cpu(b *testing.B) time.Duration {
	d, err := bench.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
