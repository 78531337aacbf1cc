// Package localnet runs a whole ShareAI network in one process: a coordinator on SQLite (or
// several replicas sharing the store and a NATS server embedded in the process) and N provider
// agents, connected over real loopback sockets exactly as they would be across machines. `shareai up` and the test environment (testenv) are built on it.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/bus"
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

	DataDir string // database, keys and node keys live here
	// Addr is the first coordinator's listen address; "127.0.0.1:0" picks a free port. Replica
	// i (0-based) listens on its port + i, or on a free port when it is 0.
	Addr string
	// Replicas is the number of coordinators (0 or 1: one, without NATS unless NATS is set).
	// They share the store and NATS: an embedded NATS server, unless NATS names one.
	Replicas int
	// NATS is the URL (or URLs, comma-separated) of the NATS servers the replicas connect to;
	// empty: an embedded server when there are several replicas, none for one.
	NATS string
	// DB is the PostgreSQL URL of the network's store; empty: SQLite in DataDir.
	DB        string
	Providers int // number of agents, spread over the replicas: agent i connects to replica i mod Replicas first
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
	// URL is the coordinator's base URL, such as http://127.0.0.1:8080: the first replica's.
	URL string
	// URLs are the replicas' base URLs, URLs[0] == URL.
	URLs []string
	// APIKey is a buyer key; ProviderToken registers the agents.
	APIKey        string
	ProviderToken string
	Store         store.Store
	Agents        []*agent.Agent

	receiptKey ed25519.PrivateKey // kept in the data dir, so restarts countersign with it
	nats       *bus.Server        // the embedded NATS server, when the network runs one
	natsURL    string             // the NATS the replicas connect to; "": none
	natsDir    string             // the embedded server's store, removed at Close

	mu       sync.Mutex
	replicas []*replica

	stopAgents context.CancelFunc
	stopAgent  []context.CancelFunc // one per agent
	agentsDone sync.WaitGroup
}

// replica is one coordinator of the network, and what it runs on. Net.mu guards it.
type replica struct {
	name  string // its Config.Replica
	addr  string // its listen address, kept across restarts
	coord *coordinator.Coordinator
	bus   *bus.Bus
	conns *tracked // its listener and the connections accepted from it
	stop  context.CancelFunc
	errc  chan error
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
	if cfg.Replicas < 0 || cfg.Replicas > 64 {
		return nil, errors.New("localnet: replicas must be between 1 and 64")
	}
	cfg.Replicas = max(cfg.Replicas, 1)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	addrs, err := replicaAddrs(cfg.Addr, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	dsn := cfg.DB
	if dsn == "" {
		dsn = filepath.Join(cfg.DataDir, "coordinator.db")
	}
	st, err := sqlstore.Open(ctx, dsn) // one handle, shared by the replicas
	if err != nil {
		return nil, err
	}
	key, err := coordinator.LoadOrCreateKey(cfg.DataDir)
	if err != nil {
		st.Close()
		return nil, err
	}
	n := &Net{cfg: cfg, Store: st, receiptKey: key, natsURL: cfg.NATS}
	for i, a := range addrs {
		r := &replica{addr: a, name: cfg.Coordinator.Replica}
		if cfg.Replicas > 1 {
			r.name = fmt.Sprintf("rep_%d", i+1) // the same at every start: a restart recovers its own holds
		}
		n.replicas = append(n.replicas, r)
	}
	fail := func(err error) (*Net, error) {
		n.Close()
		return nil, err
	}
	if err := n.credentials(ctx); err != nil {
		return fail(err)
	}
	if cfg.Replicas > 1 && n.natsURL == "" {
		if err := n.embedNATS(); err != nil {
			return fail(err)
		}
	}
	for i := range n.replicas {
		if err := n.StartReplica(i); err != nil {
			return fail(err)
		}
	}
	if err := n.startAgents(ctx); err != nil {
		return fail(err)
	}
	return n, nil
}

// replicaAddrs returns the listen addresses of n replicas: addr, then the ports after it (or
// free ports, for port 0).
func replicaAddrs(addr string, n int) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("localnet: address %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("localnet: address %q: port is not a number", addr)
	}
	out := []string{addr}
	for i := 1; i < n; i++ {
		if p != 0 {
			port = strconv.Itoa(p + i)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// embedNATS starts the NATS server the replicas share, its JetStream store in the data dir.
func (n *Net) embedNATS() error {
	dir, err := os.MkdirTemp(n.cfg.DataDir, "nats-")
	if err != nil {
		return fmt.Errorf("NATS store: %w", err)
	}
	n.natsDir = dir
	s, err := bus.Embed(bus.ServerConfig{Name: "shareai-local", Dir: dir})
	if err != nil {
		return err
	}
	n.nats, n.natsURL = s, s.URL()
	return nil
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

// Coordinator returns the running coordinator (the first replica), or nil while it is stopped.
func (n *Net) Coordinator() *coordinator.Coordinator { return n.CoordinatorOf(0) }

// CoordinatorOf returns replica i's coordinator (0-based), or nil while it is stopped.
func (n *Net) CoordinatorOf(i int) *coordinator.Coordinator {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[i].coord
}

// Coordinators returns the replicas' coordinators, in order; a stopped one is nil.
func (n *Net) Coordinators() []*coordinator.Coordinator {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*coordinator.Coordinator, len(n.replicas))
	for i, r := range n.replicas {
		out[i] = r.coord
	}
	return out
}

// Replicas returns the number of coordinators.
func (n *Net) Replicas() int { return len(n.replicas) }

// ReplicaName returns replica i's name (its coordinator.Config.Replica): rep_1, rep_2, … when
// there are several, and "" for one, which its coordinator names itself.
func (n *Net) ReplicaName(i int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[i].name
}

// NATSURL returns the URL of the NATS the replicas share, "" when they use none.
func (n *Net) NATSURL() string { return n.natsURL }

// StartCoordinator starts the coordinator (the first replica) on the network's address (the
// same port after a restart).
func (n *Net) StartCoordinator() error { return n.StartReplica(0) }

// StopCoordinator shuts the coordinator (the first replica) down gracefully, as a restart
// would; the agents keep trying to reconnect.
func (n *Net) StopCoordinator() error { return n.DrainReplica(0) }

// StartReplica starts replica i (0-based) on its address (the same port after a restart), with
// the same name, and connects it to the network's NATS.
func (n *Net) StartReplica(i int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[i]
	if r.coord != nil {
		return fmt.Errorf("localnet: replica %d already running", i+1)
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", r.addr, err)
	}
	r.addr = ln.Addr().String()
	url := "http://" + r.addr
	if i == 0 {
		n.URL = url
	}
	if len(n.URLs) <= i {
		n.URLs = append(n.URLs, url)
	}
	n.URLs[i] = url
	cc := n.cfg.Coordinator
	cc.Store, cc.ReceiptKey, cc.Replica = n.Store, n.receiptKey, r.name
	if n.natsURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := bus.Connect(ctx, bus.Config{URL: n.natsURL, Name: r.name, Log: n.log().With("replica", i+1)})
		cancel()
		if err != nil {
			ln.Close()
			return err
		}
		r.bus, cc.Bus = b, b
	}
	if len(n.replicas) > 1 {
		cc.Log = n.log().With("replica", i+1)
	}
	c := coordinator.New(cc)
	ctx, cancel := context.WithCancel(context.Background())
	r.conns = &tracked{Listener: ln, conns: map[net.Conn]struct{}{}}
	r.coord, r.stop, r.errc = c, cancel, make(chan error, 1)
	go func(errc chan error, l net.Listener) { errc <- c.Serve(ctx, l) }(r.errc, r.conns)
	return nil
}

// DrainReplica shuts replica i down gracefully, as a restart would: it lets streams in flight
// finish, then closes its NATS connection. Its agents reconnect, to another replica if they
// know one.
func (n *Net) DrainReplica(i int) error {
	_, stop, errc, b := n.detach(i)
	if stop == nil {
		return nil
	}
	stop()
	err := <-errc
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// StopReplica kills replica i abruptly, as kill -9 would: its listener and every connection
// to it (buyers' streams, agents' WebSockets) close at once, and so does its NATS connection,
// without draining. Its agents reconnect to another replica. Unlike a killed process, the
// coordinator's goroutines then wind down (its context is cancelled) and may still write to
// the shared store what they were doing when their connections closed.
func (n *Net) StopReplica(i int) {
	r, stop, errc, b := n.detach(i)
	if stop == nil {
		return
	}
	if b != nil {
		b.Conn.Close() // no drain: peers see it vanish
	}
	r.conns.kill()
	stop()
	<-errc
}

// detach marks replica i stopped and returns what stops it.
func (n *Net) detach(i int) (*replica, context.CancelFunc, chan error, *bus.Bus) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[i]
	stop, errc, b := r.stop, r.errc, r.bus
	r.coord, r.stop, r.bus = nil, nil, nil
	return r, stop, errc, b
}

// tracked is a listener that keeps the connections it accepted, to close them all at once.
type tracked struct {
	net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	killed bool
}

func (l *tracked) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// kill closes the listener and every connection it accepted.
func (l *tracked) kill() {
	l.mu.Lock()
	l.killed = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.Listener.Close()
	for _, c := range conns {
		c.(*trackedConn).Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *tracked
	once sync.Once
}

// NetConn returns the connection it tracks, as tls.Conn does: the gateway's poller of HTTP/1.1
// streams watches that one.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
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
		// Replica i mod N first, then the others: the agents spread over the replicas, and
		// move to another when theirs goes away.
		urls := append(slices.Clone(n.URLs[i%len(n.URLs):]), n.URLs[:i%len(n.URLs)]...)
		cfg.Coordinator, cfg.Token = strings.Join(urls, ","), n.ProviderToken
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
			node := n.node(a.NodeID())
			if node != nil && node.Paused() != "" {
				continue // checked once it takes jobs
			}
			if node == nil || node.Level() == store.LevelNew || slices.ContainsFunc(node.Offers, func(o *fleet.Offer) bool { return o.OwnLevel() == store.LevelNew }) {
				waiting++ // each model is verified on its own
			}
		}
		if waiting == 0 && n.running() == 0 {
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

// node returns the node with this id on whichever replica holds its connection, or nil.
func (n *Net) node(id string) *fleet.Node {
	for _, c := range n.Coordinators() {
		if c == nil {
			continue
		}
		if node := c.Fleet.Node(id); node != nil {
			return node
		}
	}
	return nil
}

// running returns the jobs running on the replicas' fleets.
func (n *Net) running() int {
	var r int
	for _, c := range n.Coordinators() {
		if c != nil {
			r += c.Fleet.Running()
		}
	}
	return r
}

// log is the network's logger.
func (n *Net) log() *slog.Logger { return n.cfg.Coordinator.Log }

// StopAgent stops agent i (0-based) as if its machine went away: its connection closes and
// its running jobs end.
func (n *Net) StopAgent(i int) { n.stopAgent[i]() }

// Close stops the coordinators (letting streams in flight finish), then the agents, then the
// embedded NATS server, and closes the database.
func (n *Net) Close() error {
	var errs []error
	var wg sync.WaitGroup
	errc := make([]error, len(n.replicas))
	for i := range n.replicas {
		wg.Go(func() { errc[i] = n.DrainReplica(i) })
	}
	wg.Wait()
	errs = append(errs, errc...)
	if n.stopAgents != nil {
		n.stopAgents()
		n.agentsDone.Wait()
	}
	if n.nats != nil {
		n.nats.Shutdown()
	}
	if n.natsDir != "" {
		os.RemoveAll(n.natsDir)
	}
	errs = append(errs, n.Store.Close())
	return errors.Join(errs...)
}
