// Package localnet runs a whole ShareAI network in one process: a coordinator on SQLite and N
// provider agents, connected over real loopback sockets exactly as they would be across
// machines. `shareai up` and the test environment (testenv) are built on it.
package localnet

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/tier"
)

// Config configures a local network.
type Config struct {
	DataDir   string // database, keys and node keys live here
	Addr      string // coordinator listen address; "127.0.0.1:0" picks a free port
	Providers int    // number of agents
	// NewEngine makes agent i's engine (0-based). Default: a simulated GPU.
	NewEngine         func(i int) (engine.Engine, error)
	MaxConcurrent     int           // slots per offer; default 4
	HeartbeatInterval time.Duration // default 5s
	RecordInterval    time.Duration // how often nodes' activity is stored; default 1m
	// Verification (coordinator.Config): the mean time between canary probes of a node, how
	// often scores are recomputed, how often the prober looks for work, how long a check may
	// take. Defaults: the coordinator's.
	ProbeEvery, ScoreEvery, ProbeTick, CheckTimeout time.Duration
	// TrustNewNodes skips the onboarding checks (coordinator.Config).
	TrustNewNodes bool
	// MaxNodesPerAccount bounds each provider account's connected nodes (coordinator.Config).
	MaxNodesPerAccount int
	DrainTimeout       time.Duration // default 30s
	KeyCacheTTL        time.Duration // default 10s
	Region             string        // the agents' region
	Regions            []string      // if set, agent i's region is Regions[i % len(Regions)]
	// InputPrice and OutputPrice are the agents' ask.
	InputPrice, OutputPrice money.Price
	FeeBasisPoints          int           // the platform fee
	SettlementDelay         time.Duration // default 72h
	DefaultMaxTokens        int           // default 4096
	StallTimeout            time.Duration // default 30s
	// KeyLimits and MaxTokensLimit are the coordinator's (coordinator.Config).
	KeyLimits      store.RateLimits
	MaxTokensLimit int
	// Queue and TierPrices are the coordinator's (coordinator.Config).
	Queue      queue.Config
	TierPrices tier.Multipliers
	// Chaos makes the agents drop or stall mid-answer, all but the last Healthy ones.
	Chaos   agent.Chaos
	Healthy int
	// Agent, if set, changes agent i's configuration before it starts.
	Agent func(i int, c *agent.Config)
	// Credit is deposited to the local buyer's account when it is created.
	Credit  money.Nanos
	Version string
	Log     *slog.Logger

	// TracerProvider records the spans of the coordinator and of every agent (one trace
	// spans both); nil: none. The caller shuts it down, after Close.
	TracerProvider trace.TracerProvider
}

// Net is a running local network.
type Net struct {
	cfg Config
	// URL is the coordinator's base URL, such as http://127.0.0.1:8080.
	URL string
	// APIKey is a buyer key; ProviderToken registers the agents.
	APIKey        string
	ProviderToken string
	Store         store.Store
	Agents        []*agent.Agent

	receiptKey ed25519.PrivateKey // kept in the data dir, so restarts countersign with it

	mu       sync.Mutex
	coord    *coordinator.Coordinator
	addr     string
	stopC    context.CancelFunc
	coordErr chan error

	stopAgents context.CancelFunc
	stopAgent  []context.CancelFunc // one per agent
	agentsDone sync.WaitGroup
}

// credentials are kept in the data dir so a second start reuses the same key.
type credentials struct {
	APIKey        string `json:"api_key"`
	ProviderToken string `json:"provider_token"`
}

const credentialsFile = "local-credentials.json"

// Start starts the coordinator and the agents and returns once every agent has registered.
func Start(ctx context.Context, cfg Config) (*Net, error) {
	if cfg.Providers < 0 {
		return nil, errors.New("localnet: negative number of providers")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.NewEngine == nil {
		cfg.NewEngine = func(int) (engine.Engine, error) { return sim.New(sim.Config{}), nil }
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	st, err := sqlstore.Open(ctx, filepath.Join(cfg.DataDir, "coordinator.db"))
	if err != nil {
		return nil, err
	}
	key, err := coordinator.LoadOrCreateKey(cfg.DataDir)
	if err != nil {
		st.Close()
		return nil, err
	}
	n := &Net{cfg: cfg, Store: st, addr: cfg.Addr, receiptKey: key}
	if err := n.credentials(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := n.StartCoordinator(); err != nil {
		st.Close()
		return nil, err
	}
	if err := n.startAgents(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// credentials loads the network's buyer key and provider token, making them on first start (or
// again if they were revoked).
func (n *Net) credentials(ctx context.Context) error {
	path := filepath.Join(n.cfg.DataDir, credentialsFile)
	var c credentials
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &c)
	}
	var err error
	if c.APIKey, err = n.ensureKey(ctx, c.APIKey, "local-buyer", store.KeyBuyer); err != nil {
		return err
	}
	if c.ProviderToken, err = n.ensureKey(ctx, c.ProviderToken, "local-provider", store.KeyProvider); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	n.APIKey, n.ProviderToken = c.APIKey, c.ProviderToken
	return nil
}

func (n *Net) ensureKey(ctx context.Context, secret, account, kind string) (string, error) {
	if secret != "" {
		k, err := n.Store.KeyByHash(ctx, store.HashSecret(secret))
		if err == nil && !k.Revoked() && k.Kind == kind {
			return secret, nil
		}
	}
	acct, err := EnsureAccount(ctx, n.Store, account)
	if err != nil {
		return "", err
	}
	if kind == store.KeyBuyer && n.cfg.Credit > 0 {
		// Once per account: the deposit's reference makes a second one a conflict.
		err := n.Store.Deposit(ctx, acct.ID, n.cfg.Credit, "welcome-"+acct.ID, time.Now())
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return "", fmt.Errorf("credit the local buyer: %w", err)
		}
	}
	if kind == store.KeyProvider {
		if err := n.Store.MarkProvider(ctx, acct.ID); err != nil {
			return "", err
		}
	}
	secret, k := store.NewKey(acct.ID, kind, "local network", time.Now())
	if err := n.Store.CreateKey(ctx, k); err != nil {
		return "", fmt.Errorf("create %s key: %w", kind, err)
	}
	return secret, nil
}

// EnsureAccount returns the account with this name, creating it if needed.
func EnsureAccount(ctx context.Context, st store.Store, name string) (*store.Account, error) {
	a, err := st.Account(ctx, name)
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	a = &store.Account{ID: store.NewID("acct"), Name: name, CreatedAt: time.Now()}
	if err := st.CreateAccount(ctx, a); err != nil {
		return nil, fmt.Errorf("create account %s: %w", name, err)
	}
	return a, nil
}

// Coordinator returns the running coordinator, or nil while it is stopped.
func (n *Net) Coordinator() *coordinator.Coordinator {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.coord
}

// StartCoordinator starts the coordinator on the network's address (the same port after a
// restart).
func (n *Net) StartCoordinator() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.coord != nil {
		return errors.New("localnet: coordinator already running")
	}
	ln, err := net.Listen("tcp", n.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", n.addr, err)
	}
	n.addr = ln.Addr().String()
	n.URL = "http://" + n.addr
	c := coordinator.New(coordinator.Config{
		Store: n.Store, Log: n.cfg.Log, HeartbeatInterval: n.cfg.HeartbeatInterval, RecordInterval: n.cfg.RecordInterval,
		ProbeEvery: n.cfg.ProbeEvery, ScoreEvery: n.cfg.ScoreEvery, ProbeTick: n.cfg.ProbeTick, CheckTimeout: n.cfg.CheckTimeout, TrustNewNodes: n.cfg.TrustNewNodes,
		MaxNodesPerAccount: n.cfg.MaxNodesPerAccount,
		DrainTimeout:       n.cfg.DrainTimeout, KeyCacheTTL: n.cfg.KeyCacheTTL,
		FeeBasisPoints: n.cfg.FeeBasisPoints, SettlementDelay: n.cfg.SettlementDelay, DefaultMaxTokens: n.cfg.DefaultMaxTokens,
		StallTimeout: n.cfg.StallTimeout, ReceiptKey: n.receiptKey, TracerProvider: n.cfg.TracerProvider,
		KeyLimits: n.cfg.KeyLimits, MaxTokensLimit: n.cfg.MaxTokensLimit, Queue: n.cfg.Queue, TierPrices: n.cfg.TierPrices,
	})
	ctx, cancel := context.WithCancel(context.Background())
	n.coord, n.stopC, n.coordErr = c, cancel, make(chan error, 1)
	go func(errc chan error) { errc <- c.Serve(ctx, ln) }(n.coordErr)
	return nil
}

// StopCoordinator shuts the coordinator down gracefully, as a restart would; the agents keep
// trying to reconnect.
func (n *Net) StopCoordinator() error {
	n.mu.Lock()
	stop, errc := n.stopC, n.coordErr
	n.coord, n.stopC = nil, nil
	n.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	return <-errc
}

func (n *Net) startAgents(ctx context.Context) error {
	actx, cancel := context.WithCancel(context.Background())
	n.stopAgents = cancel
	var failed []chan error
	for i := range n.cfg.Providers {
		eng, err := n.cfg.NewEngine(i)
		if err != nil {
			return fmt.Errorf("engine of provider %d: %w", i+1, err)
		}
		hw := protocol.Hardware{}
		if eng.Name() == "sim" {
			hw.Simulated = true
			hw.GPUs = []protocol.GPU{{Name: "Simulated GPU", VRAMMiB: 24576}}
		}
		cfg := agent.Config{
			Coordinator:   n.URL,
			Token:         n.ProviderToken,
			DataDir:       filepath.Join(n.cfg.DataDir, "nodes", fmt.Sprintf("node-%d", i+1)),
			Name:          fmt.Sprintf("local-%d", i+1),
			Region:        n.region(i),
			Engine:        eng,
			MaxConcurrent: n.cfg.MaxConcurrent,
			InputPrice:    n.cfg.InputPrice,
			OutputPrice:   n.cfg.OutputPrice,
			Hardware:      hw,
			Version:       n.cfg.Version,
			Chaos:         n.chaos(i),
			Log:           n.cfg.Log.With("agent", i+1),
		}
		cfg.TracerProvider = n.cfg.TracerProvider
		if n.cfg.Agent != nil {
			n.cfg.Agent(i, &cfg)
		}
		a, err := agent.New(cfg)
		if err != nil {
			return err
		}
		n.Agents = append(n.Agents, a)
		stopped := make(chan error, 1)
		failed = append(failed, stopped)
		one, stop := context.WithCancel(actx)
		n.stopAgent = append(n.stopAgent, stop)
		n.agentsDone.Go(func() {
			err := a.Run(one)
			if err != nil {
				n.cfg.Log.Error("agent stopped", "agent", i+1, "err", err)
			}
			stopped <- err
		})
	}
	for i, a := range n.Agents {
		select {
		case <-a.Ready():
		case err := <-failed[i]:
			return fmt.Errorf("provider %d stopped before registering: %w", i+1, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return n.waitVerified(ctx)
}

// verifyWait bounds how long Start waits for the nodes' onboarding checks.
const verifyWait = time.Minute

// waitVerified waits until every agent's node has been through its onboarding checks (a new
// node gets no live traffic before): passed them, or failed them and been quarantined.
func (n *Net) waitVerified(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(verifyWait)
	for {
		waiting := 0
		for _, a := range n.Agents {
			node := n.Coordinator().Fleet.Node(a.NodeID())
			if node != nil && node.Paused() != "" {
				continue // checked once it takes jobs
			}
			if node == nil || node.Level() == store.LevelNew || slices.ContainsFunc(node.Offers, func(o *fleet.Offer) bool { return o.OwnLevel() == store.LevelNew }) {
				waiting++ // each model is verified on its own
			}
		}
		if waiting == 0 && n.Coordinator().Fleet.Running() == 0 {
			return nil // every model verified, and no check still running
		}
		if time.Now().After(deadline) {
			// A node whose checks cannot be made (its engine fails) stays unverified: start
			// all the same, and say so.
			n.cfg.Log.Warn("nodes not verified yet: they get no traffic until they pass their onboarding checks", "nodes", waiting)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d nodes not verified yet: %w", waiting, ctx.Err())
		case <-t.C:
		}
	}
}

func (n *Net) chaos(i int) agent.Chaos {
	if i >= n.cfg.Providers-n.cfg.Healthy {
		return agent.Chaos{}
	}
	return n.cfg.Chaos
}

func (n *Net) region(i int) string {
	if len(n.cfg.Regions) > 0 {
		return n.cfg.Regions[i%len(n.cfg.Regions)]
	}
	return n.cfg.Region
}

// StopAgent stops agent i (0-based) as if its machine went away: its connection closes and
// its running jobs end.
func (n *Net) StopAgent(i int) { n.stopAgent[i]() }

// Close stops the coordinator (letting streams in flight finish), then the agents, and closes
// the database.
func (n *Net) Close() error {
	err := n.StopCoordinator()
	if n.stopAgents != nil {
		n.stopAgents()
		n.agentsDone.Wait()
	}
	if cerr := n.Store.Close(); err == nil {
		err = cerr
	}
	return err
}
