package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// streamed is what a buyer saw of one streamed answer.
type streamed struct {
	id     string // the request id
	events []string
	err    error
}

func (s *streamed) done() bool { return len(s.events) > 0 && s.events[len(s.events)-1] == "[DONE]" }

func (s *streamed) has(sub string) bool {
	for _, e := range s.events {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

// startStreams starts n streamed chats and returns once each has its first event; the
// answers go on being read in the background until wg is done.
func startStreams(t *testing.T, env *testenv.Env, n int, wg *sync.WaitGroup) []*streamed {
	t.Helper()
	out := make([]*streamed, n)
	started := make(chan struct{}, n)
	for i := range out {
		s := &streamed{}
		out[i] = s
		body := fmt.Sprintf(`{"model":"sim/llama-3.1-8b","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"restart story %d"}]}`, i)
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		s.id = resp.Header.Get("X-Request-Id")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			first := true
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					s.events = append(s.events, data)
					if first {
						first = false
						started <- struct{}{}
					}
				}
			}
			s.err = sc.Err()
			if first {
				started <- struct{}{}
			}
		}()
	}
	for range n {
		<-started
	}
	return out
}

// noHoldLeftOpen checks, while the coordinator is stopped, that it settled every hold before
// it exited: nothing is left for the next start to recover.
func noHoldLeftOpen(t *testing.T, env *testenv.Env) {
	t.Helper()
	if holds, err := env.Store.OpenHolds(context.Background()); err != nil || len(holds) != 0 {
		t.Errorf("%d holds left open by the stop, %v; want none", len(holds), err)
	}
}

// checkLedger checks that every request was settled once, the ledger
// balances, and the buyer paid exactly what the requests' records say.
func checkLedger(t *testing.T, env *testenv.Env, before *store.Balance, streams []*streamed) []*store.Usage {
	t.Helper()
	ctx := context.Background()
	ledgerSumIsZero(t, env)
	var charged money.Nanos
	var usages []*store.Usage
	for _, s := range streams {
		u, err := env.Store.UsageByRequest(ctx, s.id)
		if err != nil {
			t.Errorf("request %s has no record: %v", s.id, err)
			continue
		}
		charged += u.Cost
		usages = append(usages, u)
	}
	after := balance(t, env)
	if spent := after.Spent - before.Spent; spent != charged {
		t.Errorf("the buyer was charged %s across the restart; the requests' records say %s", spent, charged)
	}
	return usages
}

// A restart with streams in flight that finish within the drain deadline: the coordinator
// takes no new request while it drains, every stream ends whole, the agents reconnect on their
// own, the network serves again, and each request is billed once.
func TestRestart_StreamsInFlightFinish(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 150}
		c.Coordinator.DrainTimeout = 20 * time.Second
	})
	before := balance(t, env)
	var wg sync.WaitGroup
	streams := startStreams(t, env, 12, &wg)

	stopped := make(chan error, 1)
	go func() { stopped <- env.StopCoordinator() }()
	// While it drains, a new request is not taken: its connection is refused.
	testenv.WaitFor(t, "the coordinator to stop listening", func() bool {
		resp, err := http.Get(env.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	for i, s := range streams {
		if !s.done() || !s.has(`"finish_reason":"stop"`) || s.err != nil {
			t.Errorf("stream %d did not end whole across the drain: %d events, error %v, last %q", i, len(s.events), s.err, s.events[len(s.events)-1])
		}
	}

	noHoldLeftOpen(t, env)
	if err := env.StartCoordinator(); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the agents to reconnect on their own", func() bool {
		c := env.Coordinator()
		return c != nil && len(c.Fleet.Nodes()) == len(env.Agents)
	})
	for _, u := range checkLedger(t, env, before, streams) {
		if u.Outcome != store.OutcomeOK || u.CompletionTokens == 0 {
			t.Errorf("request %s recorded as %s with %d tokens; want ok", u.RequestID, u.Outcome, u.CompletionTokens)
		}
	}
	client := env.Client()
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("After the restart.", 1)); err != nil {
		t.Fatalf("a request after the restart: %v", err)
	}
}

// A restart with streams longer than the drain deadline: each ends with an error event that
// says the coordinator is restarting (never a bare cut, never [DONE]), is billed for what was
// delivered and no more, once, and nothing is left for the next start to recover.
func TestRestart_StreamsPastTheDrainDeadlineEndWithAClearError(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 10}
		c.Coordinator.DrainTimeout = 300 * time.Millisecond
	})
	before := balance(t, env)
	var wg sync.WaitGroup
	streams := startStreams(t, env, 6, &wg)
	if err := env.StopCoordinator(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	wg.Wait()
	for i, s := range streams {
		if s.done() || !s.has(`"code":"coordinator_restarting"`) || !s.has(`"finish_reason":"error"`) {
			t.Errorf("stream %d: want an error event saying the coordinator restarts; got %d events, last %q", i, len(s.events), s.events[len(s.events)-1])
		}
	}
	noHoldLeftOpen(t, env)
	if err := env.StartCoordinator(); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the agents to reconnect on their own", func() bool {
		c := env.Coordinator()
		return c != nil && len(c.Fleet.Nodes()) == len(env.Agents)
	})
	for _, u := range checkLedger(t, env, before, streams) {
		if u.Outcome != store.OutcomeError || !strings.Contains(u.Error, "coordinator is restarting") || u.CompletionTokens == 0 || u.CompletionTokens >= 40 {
			t.Errorf("request %s recorded as %s with %d completion tokens; want an error billed for the few tokens delivered in time",
				u.RequestID, u.Outcome, u.CompletionTokens)
		}
	}
}
