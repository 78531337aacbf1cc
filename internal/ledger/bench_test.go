package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// BenchmarkHoldSettle measures the money path of a request, hold then settlement, with 64
// requests at a time, on each database. settled/s is the figure to read.
//
//	SHAREAI_TEST_POSTGRES=postgres://… go test -run '^$' -bench HoldSettle ./internal/ledger
func BenchmarkHoldSettle(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			f := setupB(b, kind)
			ctx := context.Background()
			bounds := ledger.Bounds{PromptTokens: 2000, CompletionTokens: 500}
			amount := f.l.MaxCost(ask, bounds)
			var n atomic.Int64
			b.SetParallelism(128) // 128 × GOMAXPROCS requests in flight
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("r%d", n.Add(1))
					if err := f.l.Hold(ctx, id, f.buyer, amount); err != nil {
						b.Error(err)
						return
					}
					bill := f.l.Price(id, bounds, []ledger.Work{{NodeID: "n1", ProviderID: f.provider, Ask: ask,
						PromptTokens: 1200, CompletionTokens: 300, DeliveredBytes: 1500}})
					if err := f.l.Settle(ctx, bill, &store.Usage{RequestID: id, AccountID: f.buyer.AccountID, CreatedAt: time.Now()}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "settled/s")
			if sum, _ := f.db.LedgerSum(ctx); sum != 0 {
				b.Errorf("ledger sum %d", sum)
			}
		})
	}
}

func setupB(b *testing.B, kind string) *fixture { return setupTB(b, kind, 1000*money.USD) }
