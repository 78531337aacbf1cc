// Package testenv runs an in-process ShareAI network for tests: a coordinator on SQLite in a
// temporary directory and simulated agents, over real loopback connections, with the official
// OpenAI Go SDK as the buyer.
package testenv

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// Options shape a test network. The zero value is two simulated providers with no delays.
type Options struct {
	Providers     int // default 2
	MaxConcurrent int // slots per offer; default 64
	// Sim configures the default simulated engines.
	Sim sim.Config
	// NewEngine overrides the engines.
	NewEngine         func(i int) (engine.Engine, error)
	HeartbeatInterval time.Duration
	KeyCacheTTL       time.Duration
	Regions           []string // agent i's region is Regions[i % len(Regions)]
	StallTimeout      time.Duration
	// Chaos makes the agents drop or stall mid-answer, all but the last Healthy ones.
	Chaos   agent.Chaos
	Healthy int
	// Agent, if set, changes agent i's configuration before it starts.
	Agent func(i int, c *agent.Config)
	// ProbeEvery is the mean time between canary probes of a node; default the coordinator's
	// (10 minutes: none in a short test).
	ProbeEvery time.Duration
	// MaxNodesPerAccount bounds each provider account's connected nodes; default the
	// coordinator's.
	MaxNodesPerAccount int
	// ScoreEvery is how often the nodes' reputation scores are recomputed; default 100ms. A
	// test that sets scores itself (fleet.Node.SetScore) makes it long.
	ScoreEvery time.Duration
	// Onboard makes new nodes pass onboarding checks before they serve, as in production;
	// by default they are verified at once (coordinator.Config.TrustNewNodes), so that tests
	// of other things see no check jobs.
	Onboard bool
	// Credit is the buyer's starting balance; default $1000. Prices default to $0.05 and
	// $0.10 per million input and output tokens, the fee to 5%.
	Credit                  money.Nanos
	InputPrice, OutputPrice money.Price
	FeeBasisPoints          int
	// KeyLimits are the coordinator's rate limits of API keys without their own; default
	// none. MaxTokensLimit is its max_tokens ceiling; default the coordinator's.
	KeyLimits      store.RateLimits
	MaxTokensLimit int
	// Queue bounds the coordinator's queue and TierPrices prices its tiers; default the
	// coordinator's.
	Queue      queue.Config
	TierPrices tier.Multipliers
	// TracerProvider records the network's spans, the coordinator's and the agents'; nil:
	// none.
	TracerProvider trace.TracerProvider
	// DrainTimeout bounds how long a stop of the coordinator waits for answers; default 5s.
	DrainTimeout time.Duration
}

// Env is a running test network.
type Env struct {
	*localnet.Net
	// Logs is the network's logger: every line it logs is checked for secrets.
	Logs *Logs
	t    testing.TB
}

// New starts a network and stops it when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Providers == 0 {
		opts.Providers = 2
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = 64
	}
	if opts.Credit == 0 {
		opts.Credit = 1000 * money.USD
	}
	if opts.InputPrice == 0 && opts.OutputPrice == 0 {
		opts.InputPrice, opts.OutputPrice = 50_000_000, 100_000_000
	}
	if opts.ScoreEvery == 0 {
		opts.ScoreEvery = 100 * time.Millisecond
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	if opts.FeeBasisPoints == 0 {
		opts.FeeBasisPoints = 500
	}
	if opts.NewEngine == nil {
		opts.NewEngine = func(int) (engine.Engine, error) { return sim.New(opts.Sim), nil }
	}
	logs := NewLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := localnet.Start(ctx, localnet.Config{
		DataDir: t.TempDir(), Addr: "127.0.0.1:0", Providers: opts.Providers,
		NewEngine: opts.NewEngine, MaxConcurrent: opts.MaxConcurrent,
		HeartbeatInterval: opts.HeartbeatInterval, KeyCacheTTL: opts.KeyCacheTTL, Regions: opts.Regions, StallTimeout: opts.StallTimeout, Chaos: opts.Chaos, Healthy: opts.Healthy, Agent: opts.Agent,
		DrainTimeout: opts.DrainTimeout, RecordInterval: 100 * time.Millisecond, Log: logs.Logger,
		ProbeEvery: opts.ProbeEvery, ScoreEvery: opts.ScoreEvery, ProbeTick: 10 * time.Millisecond, CheckTimeout: 30 * time.Second,
		TrustNewNodes: !opts.Onboard, MaxNodesPerAccount: opts.MaxNodesPerAccount, KeyLimits: opts.KeyLimits, MaxTokensLimit: opts.MaxTokensLimit,
		Credit: opts.Credit, InputPrice: opts.InputPrice, OutputPrice: opts.OutputPrice, FeeBasisPoints: opts.FeeBasisPoints,
		TracerProvider: opts.TracerProvider, Queue: opts.Queue, TierPrices: opts.TierPrices,
	})
	if err != nil {
		t.Fatalf("start test network: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("stop test network: %v", err)
		}
	})
	logs.Secret(n.APIKey, n.ProviderToken)
	return &Env{Net: n, t: t, Logs: logs}
}

// BaseURL is the buyer API's base URL, ending in /v1.
func (e *Env) BaseURL() string { return e.URL + "/v1" }

// Client returns an OpenAI SDK client for the network, with the network's API key and no
// retries (so tests see every error as it is).
func (e *Env) Client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(e.BaseURL() + "/"),
		option.WithAPIKey(e.APIKey),
		option.WithMaxRetries(0),
	}, opts...)...)
}

// Post sends a raw JSON request to the buyer API with the network's API key.
func (e *Env) Post(path, body string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.BaseURL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// WaitFor waits until cond holds, failing the test after a while. It polls: the states it waits
// for (a slot freed, a node reconnected) happen on other goroutines of the network.
func (e *Env) WaitFor(what string, cond func() bool) {
	e.t.Helper()
	WaitFor(e.t, what, cond)
}

// WaitFor waits until cond holds, failing the test after 10 seconds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Running returns how many jobs run on the network, as the coordinator and the agents count.
func (e *Env) Running() (coordinator, agents int) {
	if c := e.Coordinator(); c != nil {
		coordinator = c.Fleet.Running()
	}
	for _, a := range e.Agents {
		agents += a.Running()
	}
	return coordinator, agents
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Sprintf is fmt.Sprintf, for building request bodies in tests.
func Sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
