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

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// Config configures a local network: the coordinator's config whole, a template of the
// agents' configs, and what is the network's own.
type Config struct {
	// Coordinator configures the coordinator. Its Log is the network's: the agents log to it
	// too (with an "agent" attribute), and its TracerProvider records the agents' spans as
	// well (one trace spans both); the caller shuts it down, after Close. Its Store and
	// ReceiptKey are the network's: SQLite and the key kept in DataDir.
	Coordinator coordinator.Config
	// Agent is every agent's config before the network fills in what is each one's own: the
	// coordinator's URL and provider token, its data directory and name, its engine (with
	// simulated hardware for the sim engine), its logger and tracer provider, its region when
	// Regions is set, and no chaos for the last Healthy ones.
	Agent agent.Config

	DataDir   string // database, keys and node keys live here
	Addr      string // coordinator listen address; "127.0.0.1:0" picks a free port
	Providers int    // number of agents
	// NewEngine makes agent i's engine (0-based). Default: a simulated GPU.
	NewEngine func(i int) (engine.Engine, error)
	Regions   []string // if set, agent i's region is Regions[i % len(Regions)]
	// Healthy is how many agents, the last ones, run without Agent.Chaos.
	Healthy int
	// EachAgent, if set, changes agent i's configuration before it starts.
	EachAgent func(i int, c *agent.Config)
	// Credit is deposited to the local buyer's account when it is created.
	Credit money.Nanos
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
	if cfg.Coordinator.Log == nil {
		cfg.Coordinator.Log = slog.New(slog.DiscardHandler)
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
	cc := n.cfg.Coordinator
	cc.Store, cc.ReceiptKey = n.Store, n.receiptKey
	c := coordinator.New(cc)
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
		cfg := n.cfg.Agent
		cfg.Coordinator, cfg.Token = n.URL, n.ProviderToken
		cfg.DataDir = filepath.Join(n.cfg.DataDir, "nodes", fmt.Sprintf("node-%d", i+1))
		cfg.Name = fmt.Sprintf("local-%d", i+1)
		cfg.Engine = eng
		if eng.Name() == "sim" {
			cfg.Hardware.Simulated = true
			cfg.Hardware.GPUs = []protocol.GPU{{Name: "Simulated GPU", VRAMMiB: 24576}}
		}
		cfg.Log, cfg.TracerProvider = n.log().With("agent", i+1), n.cfg.Coordinator.TracerProvider
		if len(n.cfg.Regions) > 0 {
			cfg.Region = n.cfg.Regions[i%len(n.cfg.Regions)]
		}
		if i >= n.cfg.Providers-n.cfg.Healthy {
			cfg.Chaos = agent.Chaos{}
		}
		if n.cfg.EachAgent != nil {
			n.cfg.EachAgent(i, &cfg)
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
				n.log().Error("agent stopped", "agent", i+1, "err", err)
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
			n.log().Warn("nodes not verified yet: they get no traffic until they pass their onboarding checks", "nodes", waiting)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d nodes not verified yet: %w", waiting, ctx.Err())
		case <-t.C:
		}
	}
}

// log is the network's logger.
func (n *Net) log() *slog.Logger { return n.cfg.Coordinator.Log }

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
