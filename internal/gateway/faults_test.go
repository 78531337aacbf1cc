package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/testenv"
)

// Under random buyer cancels and nodes vanishing mid-stream, money is conserved: the ledger sums
// to zero, nothing stays held, each request has one record, and the buyer's spending is the sum
// of those records' costs.
func TestConservation_UnderFaults(t *testing.T) {
	env := testenv.New(t, testenv.Providers(3), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 400} })
	client := env.Client()
	rng := rand.New(rand.NewPCG(7, 7))
	const requests = 60
	var wg sync.WaitGroup
	for i := range requests {
		cancelAfter := -1
		if rng.IntN(3) == 0 {
			cancelAfter = rng.IntN(5)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stream := client.Chat.Completions.NewStreaming(ctx, chatParams(fmt.Sprintf("request %d", i), int64(i)))
			for n := 0; stream.Next(); n++ {
				if n == cancelAfter {
					cancel()
					break
				}
			}
			stream.Close() // errors are expected: cancels, and nodes that vanish
		})
		if i == requests/3 {
			env.StopAgent(0)
		}
		if i == 2*requests/3 {
			env.StopAgent(1)
		}
	}
	wg.Wait()
	ctx := context.Background()
	account := keyAccount(t, env)
	env.WaitFor("every request to be settled", func() bool {
		b, _ := env.Store.Balance(ctx, account)
		return b.Held == 0
	})
	ledgerSumIsZero(t, env)
	us, err := env.Store.Usages(ctx, account, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var sum money.Nanos
	seen := map[string]bool{}
	outcomes := map[string]int{}
	for _, u := range us {
		if seen[u.RequestID] {
			t.Errorf("request %s recorded twice", u.RequestID)
		}
		seen[u.RequestID] = true
		sum += u.Cost
		outcomes[u.Outcome]++
	}
	if len(us) > requests || len(us) < requests/2 {
		t.Errorf("%d usage records for %d requests", len(us), requests)
	}
	b, _ := env.Store.Balance(ctx, account)
	if b.Spent != sum || b.Credits != b.Deposited-sum {
		t.Errorf("buyer %+v; want spent = %s, the sum of the records' costs", b, sum)
	}
	t.Logf("outcomes: %v", outcomes)
}
