// Package testenv runs an in-process ShareAI network for tests: a coordinator on SQLite in a
// temporary directory (or several replicas on an embedded NATS server: Replicas) and simulated
// agents, over real loopback connections, with the official OpenAI Go SDK as the buyer.
//
// A network of replicas: env.ClientOf(i) and env.ReplicaURL(i) reach replica i,
// env.CoordinatorOf(i) is its coordinator, env.StopReplica(i) kills it abruptly (as kill -9:
// connections and its NATS connection close at once; its agents reconnect to the others) and
// env.StartReplica(i) starts it again, on the same port and with the same replica name.
//
// New takes options as functions over the network's Config, as nomad's TestServer(t,
// func(*Config)) does: New sets the test defaults first, then each option changes what its test
// needs, at the setting's own place in the components' configs,
//
//	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
//		c.Coordinator.Core.Queue.Timeout = 300 * time.Millisecond
//		c.Sim.TokensPerSecond = 100
//	})
//
// Config embeds localnet.Config, which holds coordinator.Config, which holds each component's
// config: a new setting is declared once, in its component, and a test can set it without
// testenv repeating it. Because the options run after the defaults, a test can set any value,
// zero included (c.Coordinator.Fleet.TrustNewNodes = false for onboarding checks), and no
// field needs a "0 means default" rule here. Providers is the one shorthand, for the setting
// nearly every test makes.
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

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/money"
)

// Config is a test network's configuration: the local network's, whole, and the settings of
// its default simulated engines.
type Config struct {
	localnet.Config
	// Sim configures the simulated engines made when NewEngine is nil.
	Sim sim.Config
}

// An Option changes a test network's configuration, after New has set the test defaults.
type Option func(*Config)

// Providers sets the number of simulated providers (default 2).
func Providers(n int) Option { return func(c *Config) { c.Providers = n } }

// Replicas runs n coordinators (default 1) sharing the store (SQLite in the test's directory,
// or PostgreSQL: set DB) and a NATS server embedded in the test (or NATS's URLs: set NATS),
// with the providers spread over them: agent i connects to replica i mod n first, and to the
// others when its replica goes away.
func Replicas(n int) Option { return func(c *Config) { c.Replicas = n } }

// defaults is a test network's configuration before its options: two providers of 64 slots
// each; prices of $0.05 and $0.10 per million input and output tokens, a 5% fee, $1000 for the
// buyer; new nodes verified at once, so that tests of other things see no check jobs (set
// Coordinator.Fleet.TrustNewNodes to false for onboarding checks, as in production); scores
// every 100ms (a test that sets scores itself, fleet.Node.SetScore, makes it long); no canary
// probes in a short test (the coordinator's 10 minutes); a stop of the coordinator waits 5s
// for answers; the slot-time metrics sampled every 20ms.
func defaults(dir string) Config {
	var c Config
	c.DataDir, c.Addr, c.Providers, c.Credit = dir, "127.0.0.1:0", 2, 1000*money.USD
	c.Agent.MaxConcurrent = 64
	c.Agent.InputPrice, c.Agent.OutputPrice = 50_000_000, 100_000_000
	co := &c.Coordinator
	co.DrainTimeout = 5 * time.Second
	co.SlotSampleEvery = 20 * time.Millisecond
	co.Fleet.RecordInterval = 100 * time.Millisecond
	co.Fleet.TrustNewNodes = true
	co.Ledger.FeeBasisPoints = 500
	co.Prober.ScoreEvery = 100 * time.Millisecond
	co.Prober.Tick = 10 * time.Millisecond
	co.Prober.CheckTimeout = 30 * time.Second
	return c
}

// Env is a running test network.
type Env struct {
	*localnet.Net
	// Logs is the network's logger: every line it logs is checked for secrets.
	Logs *Logs
	t    testing.TB
}

// New starts a network and stops it when the test ends. The options run in order, after the
// defaults; the network's logger is always Logs', which checks every line for secrets.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	cfg := defaults(t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.NewEngine == nil {
		sc := cfg.Sim
		cfg.NewEngine = func(int) (engine.Engine, error) { return sim.New(sc), nil }
	}
	logs := NewLogs(t)
	cfg.Coordinator.Log = logs.Logger
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := localnet.Start(ctx, cfg.Config)
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

// ReplicaURL is replica i's (0-based) buyer API base URL, ending in /v1.
func (e *Env) ReplicaURL(i int) string { return e.URLs[i] + "/v1" }

// Client returns an OpenAI SDK client for the network (its first replica), with the network's
// API key and no retries (so tests see every error as it is).
func (e *Env) Client(opts ...option.RequestOption) openai.Client { return e.ClientOf(0, opts...) }

// ClientOf returns an OpenAI SDK client for replica i (0-based), as Client.
func (e *Env) ClientOf(i int, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(e.ReplicaURL(i) + "/"),
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

// Running returns how many jobs run on the network, as the coordinators and the agents count.
func (e *Env) Running() (coordinator, agents int) {
	for _, c := range e.Coordinators() {
		if c != nil {
			coordinator += c.Fleet.Running()
		}
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
