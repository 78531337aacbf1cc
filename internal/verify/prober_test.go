package verify_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/verify"
)

const model = "sim/llama-3.1-8b"

// turncoat serves honestly until told to cheat, then answers with another model's text under
// the same name (a sim with another salt).
type turncoat struct {
	honest, cheat *sim.Engine
	cheating      atomic.Bool
}

func (e *turncoat) Name() string { return "sim" }
func (e *turncoat) Models(ctx context.Context) ([]engine.Model, error) {
	return e.honest.Models(ctx)
}
func (e *turncoat) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	if e.cheating.Load() {
		return e.cheat.Run(ctx, req, out)
	}
	return e.honest.Run(ctx, req, out)
}

func level(env *testenv.Env, i int) string {
	n := env.Coordinator().Fleet.Node(env.Agents[i].NodeID())
	if n == nil {
		return ""
	}
	return n.Level()
}

func checks(t *testing.T, env *testenv.Env, i int) []store.NodeCheck {
	t.Helper()
	cs, err := env.Store.NodeChecks(context.Background(), env.Agents[i].NodeID(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// A node that serves another model under the asked name fails its onboarding checks and never
// gets live traffic.
func TestOnboarding_CheaterQuarantined(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Sim = sim.Config{TokensPerSecond: 0}
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 1 {
				return sim.New(sim.Config{Salt: "a smaller, cheaper model"}), nil
			}
			return sim.New(sim.Config{}), nil
		}
	})
	env.WaitFor("the cheater to be quarantined", func() bool { return level(env, 1) == store.LevelQuarantined })
	if l := level(env, 0); l != store.LevelVerified {
		t.Errorf("honest node is %s, want verified", l)
	}
	failed := 0
	for _, c := range checks(t, env, 1) {
		if !c.Passed {
			failed++
		}
	}
	t.Logf("onboarding checks needed to quarantine a node serving another model: %d", len(checks(t, env, 1)))
	if failed == 0 {
		t.Error("the cheater is quarantined without a failed check on record")
	}
	// Buyers only ever reach the honest node.
	client := env.Client()
	for i := range 20 {
		var resp *openai.ChatCompletion
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("q", i))}, MaxTokens: openai.Int(4),
		})
		if err != nil || resp == nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	earn, err := env.Store.Earnings(context.Background(), mustAccount(t, env), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range earn {
		if e.NodeID == env.Agents[1].NodeID() {
			t.Errorf("the quarantined node earned %s from buyers", e.Pending)
		}
	}
}

func mustAccount(t *testing.T, env *testenv.Env) string {
	t.Helper()
	a, err := env.Store.Account(context.Background(), "local-provider")
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// A node that passes onboarding and then starts serving another model is caught by canary
// probes within a bounded number of them, and quarantined. The probes are paid, from the
// platform's account; the ledger still balances.
func TestProbes_TurncoatQuarantined(t *testing.T) {
	tc := &turncoat{honest: sim.New(sim.Config{}), cheat: sim.New(sim.Config{Salt: "cheaper"})}
	env := testenv.New(t, testenv.Providers(3), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Coordinator.Prober.ProbeEvery = 40 * time.Millisecond
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 2 {
				return tc, nil
			}
			return sim.New(sim.Config{}), nil
		}
	})
	// Buyers' traffic first: the platform's fees pay the probes, each held at its most
	// possible cost (its prompt with a template's slack, and its max_tokens).
	client := env.Client()
	for i := range 100 {
		if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("fees ", i))},
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := len(checks(t, env, 2))
	tc.cheating.Store(true)
	env.WaitFor("the turncoat to be quarantined", func() bool { return level(env, 2) == store.LevelQuarantined })
	probes := len(checks(t, env, 2)) - before
	t.Logf("probes needed to quarantine a node that switched models: %d", probes)
	if probes > 5 {
		t.Errorf("%d probes to catch a node that fails every one; want at most 5", probes)
	}
	for i := range 2 {
		if l := level(env, i); l != store.LevelVerified && l != store.LevelTrusted {
			t.Errorf("honest node %d is %s", i, l)
		}
	}
	// A quarantined node is still probed; one that serves honestly again is released.
	tc.cheating.Store(false)
	env.WaitFor("the reformed node to be released", func() bool { return level(env, 2) == store.LevelVerified })

	platform, err := env.Store.Account(context.Background(), "shareai-platform")
	if err != nil {
		t.Fatalf("probes paid from no platform account: %v", err)
	}
	if us, err := env.Store.Usages(context.Background(), platform.ID, 5); err != nil || len(us) == 0 || us[0].Cost <= 0 {
		t.Errorf("probe usage %+v, %v; want probes billed to the platform", us, err)
	}
	env.WaitFor("every probe to be settled", func() bool {
		b, err := env.Store.Balance(context.Background(), platform.ID)
		return err == nil && b.Held == 0
	})
	if sum, err := env.Store.LedgerSum(context.Background()); err != nil || sum != 0 {
		t.Errorf("ledger sum %s, %v; want 0", sum, err)
	}
}

// Honest nodes probed many times are never quarantined: the false-positive rate on honest
// nodes is reported.
func TestProbes_HonestNodesNeverQuarantined(t *testing.T) {
	if testing.Short() {
		t.Skip("a long run")
	}
	env := testenv.New(t, testenv.Providers(4), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Coordinator.Prober.ProbeEvery = 20 * time.Millisecond
	})
	// Run until the nodes have been checked at least 300 times (a count, not a time, so that a
	// loaded machine makes the run longer rather than the test fail), watching their levels.
	quarantined := map[string]bool{}
	var total, failed int
	count := func() {
		total, failed = 0, 0
		for i := range env.Agents {
			for _, c := range checks(t, env, i) {
				total++
				if !c.Passed {
					failed++
				}
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for count(); total < 300 && time.Now().Before(deadline); count() {
		for i := range env.Agents {
			if l := level(env, i); l == store.LevelQuarantined || l == store.LevelSuspended {
				quarantined[env.Agents[i].NodeID()] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("honest nodes: %d checks, %d failed (false-positive rate %.4f), %d quarantined", total, failed, float64(failed)/float64(max(total, 1)), len(quarantined))
	if total < 300 {
		t.Errorf("only %d checks in the run; want a long run", total)
	}
	if failed > 0 || len(quarantined) > 0 {
		t.Errorf("%d honest checks failed and %d honest nodes were quarantined; want none", failed, len(quarantined))
	}
}

// A coordinator restart costs no node any score: the jobs it cut short are not the nodes'
// failures, and its downtime is not theirs.
func TestRestart_CostsNoScore(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Sim = sim.Config{TokensPerSecond: 200}
	})
	client := env.Client()
	for i := range 5 {
		if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("warm ", i))}, MaxTokens: openai.Int(4),
		}); err != nil {
			t.Fatal(err)
		}
	}
	scores := func() map[string]float64 {
		out := map[string]float64{}
		for _, a := range env.Agents {
			n, err := env.Store.Node(context.Background(), a.NodeID())
			if err != nil {
				t.Fatal(err)
			}
			out[a.NodeID()] = n.Score
		}
		return out
	}
	env.WaitFor("scores to be computed", func() bool {
		for _, s := range scores() {
			if s == 0 {
				return false
			}
		}
		return true
	})
	before := scores()
	// Streams in flight when the coordinator stops are cut short by the coordinator, not by
	// the nodes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 4 {
		s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("long ", i))},
		})
		s.Next()
		defer s.Close()
	}
	if err := env.StopCoordinator(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // downtime
	if err := env.StartCoordinator(); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the nodes to reconnect and be scored again", func() bool {
		for _, a := range env.Agents {
			n := env.Coordinator().Fleet.Node(a.NodeID())
			if n == nil || n.Score() == 0 {
				return false
			}
		}
		return true
	})
	after := scores()
	for id, s := range before {
		// Scores drift by millionths as the record's days age; a restart must not lower them.
		if after[id] < s-1e-4 {
			t.Errorf("node %s scored %.4f before the restart and %.4f after", id, s, after[id])
		}
	}
	for _, a := range env.Agents {
		days, err := env.Store.NodeDays(context.Background(), a.NodeID(), time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			if d.Failed > 0 {
				t.Errorf("node %s has %d failed jobs after a coordinator restart; want none", a.NodeID(), d.Failed)
			}
		}
	}
}

// A flapping node (it drops half its jobs mid-answer and reconnects) scores below a steady one,
// and its share of the traffic falls.
func TestFlappingNode_ScoreAndShareFall(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Healthy = 1
		c.Agent.Chaos = agent.Chaos{Drop: 0.5}
		c.Coordinator.Core.StallTimeout = time.Second
	})
	flapper, steady := env.Agents[0].NodeID(), env.Agents[1].NodeID()
	client := env.Client()
	served := func(n int) (share float64) {
		var mine int
		for i := range n {
			var resp *http.Response
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("flap ", i))}, MaxTokens: openai.Int(40),
			}, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			if resp.Header.Get("X-Shareai-Node") == flapper {
				mine++
			}
		}
		return float64(mine) / float64(n)
	}
	// The scores as last stored: the flapping node may be between connections when read.
	stored := func(id string) float64 {
		n, err := env.Store.Node(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return n.Score
	}
	first := served(10)
	env.WaitFor("both nodes to be scored", func() bool { return stored(flapper) > 0 && stored(steady) > 0 })
	last := served(40)
	f, s := stored(flapper), stored(steady)
	t.Logf("flapping node: share of requests %.2f then %.2f; score %.3f against the steady node's %.3f", first, last, f, s)
	if f >= s {
		t.Errorf("the flapping node scores %.3f, the steady one %.3f; want the flapping one lower", f, s)
	}
	if last > 0.2 || last > first {
		t.Errorf("the flapping node's share went from %.2f to %.2f; want it to fall", first, last)
	}
}

// A selftest runs the onboarding checks against the coordinator and shows the results, without
// going live: the node is in no ranking, and nothing is recorded of it.
func TestSelftest(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	for i, tt := range []struct {
		name   string
		salt   string
		passed bool
	}{{"honest", "", true}, {"another model", "cheaper", false}} {
		t.Run(tt.name, func(t *testing.T) {
			// An account of its own: one selftest a minute per account.
			acct := &store.Account{ID: fmt.Sprint("acct_selftest_", i), Name: fmt.Sprint("selftester-", i), CreatedAt: time.Now()}
			if err := env.Store.CreateAccount(ctx, acct); err != nil {
				t.Fatal(err)
			}
			token, k := store.NewKey(acct.ID, store.KeyProvider, "", time.Now())
			if err := env.Store.CreateKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Coordinator: env.URL, Token: token, DataDir: t.TempDir(),
				Engine: sim.New(sim.Config{Salt: tt.salt}), Selftest: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := a.Run(ctx); err != nil {
				t.Fatal(err)
			}
			res := a.SelftestResult()
			if res == nil || res.Passed != tt.passed || len(res.Checks) != 3 {
				t.Fatalf("selftest = %+v; want 3 checks, passed %v", res, tt.passed)
			}
			if n := env.Coordinator().Fleet.Node(a.NodeID()); n != nil {
				t.Error("a node in a selftest is in the fleet")
			}
			if _, err := env.Store.Node(context.Background(), a.NodeID()); err == nil {
				t.Error("a node in a selftest was recorded")
			}
		})
	}
}

// A probe pays a node no more than its peers ask: a node asking a fortune cannot make the
// platform pay it.
func TestProbes_PayNoMoreThanPeers(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Prober.ProbeEvery = 300 * time.Millisecond
		c.Agent.InputPrice = money.Price(10 * money.USD)
		c.Agent.OutputPrice = money.Price(20 * money.USD)
		c.EachAgent = func(i int, c *agent.Config) {
			if i == 1 {
				c.InputPrice, c.OutputPrice = money.MaxPrice, money.MaxPrice
			}
		}
	})
	// The operator funds the probes (a deposit to the platform's account) rather than buyers'
	// fees: a few requests' fees pay a few probes, and whichever node's probes came first took
	// them (under load the greedy node's then ran unpaid for the whole wait).
	ctx := context.Background()
	if err := env.Store.CreateAccount(ctx, &store.Account{ID: verify.PlatformAccountID, Name: verify.PlatformAccount, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Deposit(ctx, verify.PlatformAccountID, money.USD, "platform-funding:test", time.Now()); err != nil {
		t.Fatal(err)
	}
	greedy := env.Agents[1].NodeID()
	var platform *store.Account
	env.WaitFor("a paid probe of the greedy node", func() bool {
		a, err := env.Store.Account(context.Background(), "shareai-platform")
		if err != nil {
			return false
		}
		platform = a
		us, err := env.Store.Usages(context.Background(), a.ID, 100)
		if err != nil {
			return false
		}
		for _, u := range us {
			if u.NodeID == greedy && u.Cost > 0 {
				return true
			}
		}
		return false
	})
	us, _ := env.Store.Usages(context.Background(), platform.ID, 100)
	for _, u := range us {
		// The peer's ask: $10 and $20 per 1M tokens, plus the fee.
		bound := money.Price(10*money.USD).Cost(u.PromptTokens) + money.Price(20*money.USD).Cost(u.CompletionTokens)
		if u.NodeID == greedy && u.Cost > bound+money.Fee(bound, 500)+1 {
			t.Errorf("a probe of the greedy node cost %s for %d+%d tokens; want at most its peer's ask, %s", u.Cost, u.PromptTokens, u.CompletionTokens, bound)
		}
	}
}
