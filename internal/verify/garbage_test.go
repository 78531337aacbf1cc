package verify_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/verify"
)

// realModel is a model whose answers nobody knows in advance (no "sim/" name): its first
// nodes are judged by reference-free checks. The simulated engine serves it as a language
// model would; the garbage engines below do not.
const realModel = "acme/llama-3.1-8b"

// garbage is an engine that is no language model: it answers every request with text made by
// say, whatever was asked.
type garbage struct {
	models []engine.Model
	say    func() string
}

func (e *garbage) Name() string                                   { return "garbage" }
func (e *garbage) Models(context.Context) ([]engine.Model, error) { return e.models, nil }
func (e *garbage) Loaded(context.Context) ([]string, error)       { return nil, nil }
func (e *garbage) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	words := strings.SplitAfter(e.say(), " ")
	for _, w := range words {
		if err := out.Delta(protocol.Delta{Text: w}); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 10, CompletionTokens: len(words)}}, nil
}

func helloWorld(models ...string) *garbage {
	return &garbage{models: modelsNamed(models...), say: func() string { return "hello world" }}
}

func randomWords(models ...string) *garbage {
	vocab := strings.Fields("the a model answer 42 code river APPLE 7 is of and number result 95 yes no")
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(7, 7))
	return &garbage{models: modelsNamed(models...), say: func() string {
		mu.Lock()
		defer mu.Unlock()
		ws := make([]string, 10+r.IntN(40))
		for i := range ws {
			ws[i] = vocab[r.IntN(len(vocab))]
		}
		return strings.Join(ws, " ")
	}}
}

func modelsNamed(names ...string) []engine.Model {
	var ms []engine.Model
	for _, n := range names {
		ms = append(ms, engine.Model{Name: n, ContextLength: 8192})
	}
	return ms
}

// split serves each model from its own engine.
type split map[string]engine.Engine

func (s split) Name() string { return "split" }
func (s split) Models(ctx context.Context) ([]engine.Model, error) {
	var all []engine.Model
	for _, e := range s {
		ms, err := e.Models(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	slices.SortFunc(all, func(a, b engine.Model) int { return strings.Compare(a.Name, b.Name) })
	return all, nil
}
func (s split) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	e, ok := s[req.Model]
	if !ok {
		return engine.Result{}, &engine.RequestError{Status: 404, Message: "no such model"}
	}
	return e.Run(ctx, req, out)
}

func node(env *testenv.Env, i int) string { return env.Agents[i].NodeID() }

// offerLevel is the own level of model on agent i's node, as the fleet has it.
func offerLevel(env *testenv.Env, i int, model string) string {
	n := env.Coordinator().Fleet.Node(node(env, i))
	if n == nil {
		return ""
	}
	for _, o := range n.Offers {
		if o.Model == model {
			return o.OwnLevel()
		}
	}
	return ""
}

// everVerified says whether the audit log shows the node or one of its models verified.
func everVerified(t *testing.T, env *testenv.Env, id string, model string) bool {
	t.Helper()
	es, err := env.Store.AuditLog(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.Contains(e.Detail, "→ "+store.LevelVerified) && (model == "" && e.Action == "node.level" || strings.HasPrefix(e.Detail, model+": ")) {
			return true
		}
	}
	return false
}

// A model no verified node serves yet is checked with reference-free tests: the simulated
// engine passes them, as a language model does; a node answering "hello world" to everything,
// or random words, fails them, is quarantined and is never verified, and buyers never reach
// it. /v1/models counts only the verified node.
func TestOnboarding_GarbageNeverVerified(t *testing.T) {
	env := testenv.New(t, testenv.Providers(3), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.NewEngine = func(i int) (engine.Engine, error) {
			switch i {
			case 1:
				return helloWorld(realModel), nil
			case 2:
				return randomWords(realModel), nil
			}
			return sim.New(sim.Config{Models: modelsNamed(realModel)}), nil
		}
	})
	env.WaitFor("the honest node to be verified and the garbage quarantined", func() bool {
		return level(env, 0) == store.LevelVerified && level(env, 1) == store.LevelQuarantined && level(env, 2) == store.LevelQuarantined
	})
	for i, name := range []string{"the sim", "hello world", "random words"} {
		cs := checks(t, env, i)
		failed := 0
		for _, c := range cs {
			if !c.Passed {
				failed++
			}
			if i == 0 && !strings.Contains(c.Detail, "reference-free") {
				t.Errorf("%s: check %q; want a reference-free check", name, c.Detail)
			}
		}
		t.Logf("%s: %d checks, %d failed; the last: %s", name, len(cs), failed, cs[0].Detail)
		if i > 0 && (failed != len(cs) || everVerified(t, env, node(env, i), "") || everVerified(t, env, node(env, i), realModel)) {
			t.Errorf("%s passed a check or was verified: %+v", name, cs)
		}
	}
	ms := env.Coordinator().Fleet.Models()
	if len(ms) != 1 || ms[0].ID != realModel || ms[0].Nodes != 1 {
		t.Errorf("models listed %+v; want %s on 1 node, the verified one", ms, realModel)
	}
	client := env.Client()
	for i := range 10 {
		var resp *http.Response
		if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: realModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("q", i))}, MaxTokens: openai.Int(4),
		}, option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("X-Shareai-Node"); got != node(env, 0) {
			t.Fatalf("request %d served by %s; want the verified node %s", i, got, node(env, 0))
		}
	}
}

// Each model of a node is verified on its own: a node whose second model always fails keeps
// its first on sale, and loses only the second, however long it is probed.
func TestOnboarding_SecondModelFailsAlone(t *testing.T) {
	const good, broken = "acme/good-8b", "acme/broken-70b"
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Coordinator.Prober.ProbeEvery = 30 * time.Millisecond
		c.NewEngine = func(int) (engine.Engine, error) {
			return split{good: sim.New(sim.Config{Models: modelsNamed(good)}), broken: helloWorld(broken)}, nil
		}
	})
	env.WaitFor("the broken model to be quarantined", func() bool { return offerLevel(env, 0, broken) == store.LevelQuarantined })
	// Probed on and on: every probe of the broken model fails, every probe of the good one passes.
	env.WaitFor("a long run of probes", func() bool { return len(checks(t, env, 0)) >= 30 })
	if l := level(env, 0); l != store.LevelVerified {
		t.Errorf("the node is %s; want verified, for its good model", l)
	}
	if l := offerLevel(env, 0, good); l != store.LevelVerified {
		t.Errorf("the good model is %s; want verified", l)
	}
	if l := offerLevel(env, 0, broken); l != store.LevelQuarantined {
		t.Errorf("the broken model is %s; want quarantined", l)
	}
	if everVerified(t, env, node(env, 0), broken) {
		t.Error("the broken model was verified at some point")
	}
	var ids []string
	for _, m := range env.Coordinator().Fleet.Models() {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{good}) {
		t.Errorf("models listed %v; want only %s", ids, good)
	}
	client := env.Client()
	page, err := client.Models.List(context.Background())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != good {
		t.Errorf("GET /v1/models = %+v, %v; want only %s", page, err, good)
	}
	ask := func(model string) error {
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(4),
		})
		return err
	}
	if err := ask(good); err != nil {
		t.Errorf("the good model: %v", err)
	}
	if err := ask(broken); err == nil {
		t.Error("a buyer reached the broken model")
	}
	n, err := env.Store.Node(context.Background(), node(env, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("score %.3f after %d checks", n.Score, len(checks(t, env, 0)))
	if n.Score < 0.6 {
		t.Errorf("the node scores %.3f; want its broken model's probes not to sink it", n.Score)
	}
}

// strict plays llama.cpp started with a small context (-c): it refuses a request whose prompt
// and max_tokens do not fit, counting a token per 4 bytes of the messages.
type strict struct {
	*sim.Engine
	context int
	refused atomic.Int32
}

func (e *strict) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	if need := len(req.Messages)/4 + 8*strings.Count(string(req.Messages), `"role"`) + 20 + req.MaxTokens; need > e.context {
		e.refused.Add(1)
		return engine.Result{}, &engine.RequestError{Status: 400, Message: fmt.Sprintf(
			"the request exceeds the available context size (%d tokens > %d)", need, e.context)}
	}
	return e.Engine.Run(ctx, req, out)
}

// Onboarding probes fit the node's advertised context: a node with a small one is verified in
// the first round, by 3 checks that pass, none refused.
func TestOnboarding_SmallContext(t *testing.T) {
	const ctxLen = 256
	e := &strict{Engine: sim.New(sim.Config{Models: []engine.Model{{Name: model, ContextLength: ctxLen}}}), context: ctxLen}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.NewEngine = func(int) (engine.Engine, error) { return e, nil }
	})
	env.WaitFor("the node to be verified", func() bool { return level(env, 0) == store.LevelVerified })
	cs := checks(t, env, 0)
	for _, c := range cs {
		if !c.Passed {
			t.Errorf("a failed check: %s", c.Detail)
		}
	}
	if len(cs) != 3 || e.refused.Load() != 0 {
		t.Errorf("%d checks, %d requests refused for their length; want 3 checks, none refused", len(cs), e.refused.Load())
	}
}

// inflater serves honestly, and once told to, claims three times the completion tokens it
// generates: no more than it delivered (the ledger lets that pass), but more than the model
// counts.
type inflater struct {
	*sim.Engine
	on atomic.Bool
}

func (e *inflater) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	res, err := e.Engine.Run(ctx, req, out)
	if e.on.Load() {
		res.Usage.CompletionTokens *= 3
	}
	return res, err
}

// Canary probes compare a node's count of completion tokens with the known count for the same
// answer: an inflated claim is billed at the known count and counted as an over-claim, and
// repeated over-claims quarantine the node.
func TestProbes_InflatedUsageQuarantined(t *testing.T) {
	e := &inflater{Engine: sim.New(sim.Config{})}
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.Coordinator.Prober.ProbeEvery = 40 * time.Millisecond
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 1 {
				return e, nil
			}
			return sim.New(sim.Config{}), nil
		}
	})
	// The platform's account pays the probes: fund it from outside, as an operator would.
	env.WaitFor("the platform's account", func() bool {
		_, err := env.Store.Account(context.Background(), verify.PlatformAccountID)
		return err == nil
	})
	if err := env.Store.Deposit(context.Background(), verify.PlatformAccountID, 10*money.USD, "platform-funding:test", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.on.Store(true)
	env.WaitFor("the inflating node to be quarantined", func() bool { return level(env, 1) == store.LevelQuarantined })
	n, err := env.Store.Node(context.Background(), node(env, 1))
	if err != nil {
		t.Fatal(err)
	}
	usage := 0
	for _, c := range checks(t, env, 1) {
		if c.Kind == store.CheckUsage {
			usage++
		}
	}
	t.Logf("quarantined: %q; %d over-claims, %d usage checks", n.LevelReason, n.Overclaims, usage)
	if n.Overclaims < 3 || usage < 3 || !strings.Contains(n.LevelReason, "usage claims were inflated") {
		t.Errorf("over-claims %d, usage checks %d, reason %q; want 3 or more, and quarantined for them", n.Overclaims, usage, n.LevelReason)
	}
	if l := level(env, 0); l != store.LevelVerified {
		t.Errorf("the honest node is %s", l)
	}
	platform, err := env.Store.Account(context.Background(), "shareai-platform")
	if err != nil {
		t.Fatal(err)
	}
	us, err := env.Store.Usages(context.Background(), platform.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	paid := 0
	for _, u := range us {
		if u.NodeID == node(env, 1) {
			paid++
			if u.CompletionTokens > 96 {
				t.Errorf("a probe billed %d completion tokens; want at most max_tokens, the known count", u.CompletionTokens)
			}
		}
	}
	if paid == 0 {
		t.Error("no probe of the inflating node was paid")
	}
}
