package gateway_test

import (
	"context"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// As many buyers as the network has slots, each sending requests one after the other, are
// always served: a node whose slot freed a moment ago is not refused as busy because the
// candidates' cached snapshot still counts the job that ended.
func TestBusy_FreedSlotIsTakenAtOnce(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 2000}
	})
	client := env.Client()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for range 2 { // two buyers, two slots
		wg.Go(func() {
			for range 10 {
				if _, err := client.Chat.Completions.New(context.Background(), chatParams("One slot each.", 1)); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of 20 requests refused with a slot free for each; first: %v", len(failed), failed[0])
	}
}
