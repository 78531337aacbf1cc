// Package coordinator wires the coordinator's parts together: store, fleet, gateway and the
// HTTP server that carries the buyer API, the agents' connections and health checks. It holds
// no logic of its own.
package coordinator

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/batch"
	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/keyfile"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/mesh"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/verify"
)

// Config configures a coordinator: the components' configs whole, each holding its own
// settings, and the few that are the coordinator's own. A new setting of a component is
// declared once, in the component's Config, and reaches it without a copy here.
//
// New fills in the wiring of each component config, whatever it held: the store, the logger,
// the metrics, the other components and callbacks (fleet.Config.Authenticate and Selftest,
// gateway.Config.Reputation, console.Config.Core, Batches, Reputation and Secure). What the
// coordinator owns for all of them (ReceiptKey, TracerProvider) it hands to the core and the
// gateway; what one component owns and another reads (the gateway's Limits and the core's
// TierPrices, which the console shows) is set once, in the owner's config, and wired into the
// reader's (console.Config.KeyLimits and TierPrices).
type Config struct {
	Store store.Store
	Log   *slog.Logger
	TLS   *tls.Config // nil: plain HTTP
	// DrainTimeout bounds how long a shutdown waits for streams in flight. Default 30s.
	DrainTimeout time.Duration
	// BodyTimeout bounds how long a request's body may take to arrive, from the start of the
	// request (408 after it); it never bounds the answer. Default 1 minute.
	BodyTimeout time.Duration
	// ReceiptKey is the key the coordinator countersigns jobs' receipts with, which buyers pin
	// (GET /v1/receipts/key): keep it in a file (keyfile.LoadOrCreate). Nil: a key made for
	// this run alone, with a warning.
	ReceiptKey ed25519.PrivateKey
	// TracerProvider records the spans of buyers' requests, whose jobs carry their trace
	// context to the agents; nil: none. The caller shuts it down, after Serve returns.
	TracerProvider trace.TracerProvider
	// Metrics is the registry the coordinator's metrics are registered on, served by
	// Coordinator.MetricsHandler; nil: a registry of its own.
	Metrics *metrics.Registry
	// Replica names this coordinator among the replicas of its network (their holds, their
	// nodes); "": a name made at start (rep_…), which a restart changes.
	Replica string
	// Bus connects the replica to its peers over NATS; nil: a network of one coordinator.
	Bus *bus.Bus
	// BusReplicas is how many copies the NATS cluster keeps of the fleet's bucket: 1 on one
	// server, 3 on a cluster of three or more; 0: 3 when the bus knows three servers or more.
	BusReplicas int

	// SlotSampleEvery is how often the slot-time metrics sample the nodes' slots, and the
	// batch jobs running (shareai_slot_seconds_total, shareai_batch_slot_seconds_total).
	// Default 1s.
	SlotSampleEvery time.Duration

	// Fleet holds the nodes' settings: heartbeats, how often they are recorded, whether new
	// nodes are trusted without checks, the nodes per account.
	Fleet fleet.Config
	// Ledger holds the billing settings: the platform fee, the settlement delay, the default
	// max_tokens.
	Ledger ledger.Config
	// Prober holds the verification settings: canary probes, scores, checks' timeout. Zero
	// Rules: reputation.DefaultRules.
	Prober verify.Config
	// Core holds the request core's settings: stalls, the queue and the tiers' prices.
	Core core.Config
	// Gateway holds the buyer API's settings: bodies, keys' cache and default limits, the
	// max_tokens ceiling.
	Gateway gateway.Config
	// Console holds the web console's settings.
	Console console.Config
	// Batch holds the Files and Batch APIs' settings: files' size and directory, the lines
	// run at once.
	Batch batch.Config
}

// KeyFile is the file in the coordinator's data directory that keeps its receipt key.
const KeyFile = "coordinator.key"

// LoadOrCreateKey returns the receipt key kept in dir, making one on first start. Buyers pin
// its public half: keep the data directory to keep the key.
func LoadOrCreateKey(dir string) (ed25519.PrivateKey, error) {
	k, err := keyfile.LoadOrCreate(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("coordinator receipt key: %w", err)
	}
	return k, nil
}

// maxStreamsPerConn bounds the requests one HTTP/2 connection carries at once.
const maxStreamsPerConn = 1000

func serverProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// abortGrace is how long the answers still running at the drain deadline get to write their
// error and return, before their connections are closed: longer than the relay waits for a
// cancelled job's end frame, with the node's usage (2 s).
const abortGrace = 3 * time.Second

// Coordinator is a running coordinator.
type Coordinator struct {
	cfg     Config
	log     *slog.Logger
	Fleet   *fleet.Fleet
	Ledger  *ledger.Ledger
	Core    *core.Core
	Mesh    *mesh.Mesh // the fleet shared with the other replicas; nil without a bus
	Gateway *gateway.Gateway
	Batches *batch.Batches // the Files and Batch APIs, and the batches' runner
	Prober  *verify.Prober
	Metrics *metrics.Coordinator
	handler http.Handler
	closing atomic.Bool
}

// New wires a coordinator over an open store.
func New(cfg Config) *Coordinator {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// Lines logged with a request's context carry its id.
	cfg.Log = slog.New(requestid.LogHandler(cfg.Log.Handler()))
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.SlotSampleEvery <= 0 {
		cfg.SlotSampleEvery = time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = time.Minute // a 16 MiB body, the default limit, over 2.5 Mbit/s
	}
	if cfg.ReceiptKey == nil {
		_, cfg.ReceiptKey, _ = ed25519.GenerateKey(rand.Reader)
		pub := base64.StdEncoding.EncodeToString(cfg.ReceiptKey.Public().(ed25519.PublicKey))
		cfg.Log.Warn("no receipt key given: countersigning receipts with a key made for this run, which buyers cannot pin across restarts",
			"key_prefix", pub[:12])
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewRegistry()
	}
	if cfg.Replica == "" {
		cfg.Replica = "rep_" + rand.Text()[:12]
	}
	c := &Coordinator{cfg: cfg, log: cfg.Log, Metrics: metrics.NewCoordinator(cfg.Metrics)}

	fc := cfg.Fleet
	fc.Store, fc.Log, fc.Authenticate = cfg.Store, cfg.Log, c.authenticateProvider
	fc.Selftest = func(ctx context.Context, n *fleet.Node) *protocol.Selftest {
		return c.Prober.Selftest(ctx, n) // the prober is made below, before any node connects
	}
	c.Fleet = fleet.New(fc)
	if cfg.Bus != nil {
		c.Mesh = mesh.New(mesh.Config{Bus: cfg.Bus, Fleet: c.Fleet, Replica: cfg.Replica, Replicas: cfg.BusReplicas, Log: cfg.Log})
	}

	lc := cfg.Ledger
	lc.Store, lc.Metrics, lc.Log, lc.Replica = cfg.Store, c.Metrics, cfg.Log, cfg.Replica
	// Other replicas may hold open holds in the store when they share it: through a bus, or a
	// PostgreSQL database. Then recovery is per replica and dead peers' holds are swept; a lone
	// process on SQLite closes every open hold at start, as it always did.
	lc.Shared = cfg.Bus != nil || isPostgres(cfg.Store)
	c.Ledger = ledger.New(lc)

	kc := cfg.Core
	kc.Store, kc.Fleet, kc.Ledger, kc.Log, kc.Metrics = cfg.Store, c.Fleet, c.Ledger, cfg.Log, c.Metrics
	kc.ReceiptKey, kc.TracerProvider = cfg.ReceiptKey, cfg.TracerProvider
	c.Core = core.New(kc)

	pc := cfg.Prober
	pc.Fleet, pc.Store, pc.Ledger, pc.Core, pc.Log = c.Fleet, cfg.Store, c.Ledger, c.Core, cfg.Log
	if pc.Rules == (reputation.Rules{}) {
		pc.Rules = reputation.DefaultRules()
	}
	c.Prober = verify.New(pc)

	bc := cfg.Batch
	bc.Store, bc.Core, bc.Fleet, bc.Ledger, bc.Log = cfg.Store, c.Core, c.Fleet, c.Ledger, cfg.Log
	bc.Check = func(req *protocol.Request, param string) error { return c.Gateway.CheckMaxTokens(req, param) } // the live endpoints' check
	c.Batches = batch.New(bc)

	gc := cfg.Gateway
	gc.Core, gc.Store, gc.Fleet, gc.Ledger, gc.Log, gc.Metrics = c.Core, cfg.Store, c.Fleet, c.Ledger, cfg.Log, c.Metrics
	gc.Batches = c.Batches
	gc.Reputation, gc.TracerProvider, gc.Bus = c.Prober.Explain, cfg.TracerProvider, cfg.Bus // the bus: rate limits shared by the replicas
	c.Gateway = gateway.New(gc)
	metrics.RegisterFleet(cfg.Metrics, metrics.FleetView{Nodes: c.nodeSamples, Running: c.Fleet.Running})

	mux := http.NewServeMux()
	c.Gateway.Register(mux)
	mux.HandleFunc("GET /v1/agent/connect", c.Fleet.ServeAgent)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", c.readyz)
	c.handler = requestid.Handler(mux)
	cc := cfg.Console
	cc.Store, cc.Fleet, cc.Ledger, cc.Log = cfg.Store, c.Fleet, c.Ledger, cfg.Log
	cc.Core, cc.Metrics, cc.Secure, cc.Reputation = c.Core, c.Metrics, cfg.TLS != nil, c.Prober.Explain
	cc.Batches = c.Batches                                       // the batch pages open files and cancel batches as the Batch API does
	cc.KeyLimits, cc.TierPrices = gc.Limits, c.Core.TierPrices() // the gateway's and the core's, which the console shows
	web, err := console.New(cc)
	if err != nil {
		panic(err) // the console's templates are embedded: a broken one is a bug caught by tests
	}
	web.Register(mux)
	return c
}

func (c *Coordinator) authenticateProvider(ctx context.Context, token string) (string, error) {
	k, err := c.cfg.Store.KeyByHash(ctx, store.HashSecret(token))
	if err != nil {
		return "", err
	}
	if k.Kind != store.KeyProvider || k.Revoked() {
		return "", errors.New("not a valid provider token")
	}
	return k.AccountID, nil
}

// readyz answers 200 when the coordinator can take requests: its database answers and it is
// not shutting down. It also says how many nodes are connected.
func (c *Coordinator) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	status, reason := http.StatusOK, ""
	if c.closing.Load() {
		status, reason = http.StatusServiceUnavailable, "shutting down"
	} else if err := c.cfg.Store.Ping(r.Context()); err != nil {
		status, reason = http.StatusServiceUnavailable, "database unavailable"
	} else if c.Mesh != nil && !c.Mesh.Ready() {
		status, reason = http.StatusServiceUnavailable, "joining the network: the other replicas' nodes are not in view yet"
	}
	w.WriteHeader(status)
	if reason != "" {
		fmt.Fprintf(w, `{"status":"unavailable","reason":%q,"nodes":%d}`+"\n", reason, len(c.Fleet.Nodes()))
		return
	}
	fmt.Fprintf(w, `{"status":"ready","nodes":%d}`+"\n", len(c.Fleet.Nodes()))
}

// Replica returns the coordinator's name among the replicas of its network.
func (c *Coordinator) Replica() string { return c.cfg.Replica }

// isPostgres says whether the store is a PostgreSQL database, which other replicas may share.
func isPostgres(s store.Store) bool {
	p, ok := s.(interface{ Postgres() bool })
	return ok && p.Postgres()
}

// endSessions ends the node sessions an unclean stop left open, at their last sighting. A
// replica of several ends only those no live replica records any more: seen before
// sessionsStale record intervals ago.
func (c *Coordinator) endSessions(ctx context.Context) (int, error) {
	if c.Mesh == nil {
		return c.cfg.Store.EndOpenSessions(ctx)
	}
	return c.cfg.Store.EndSessionsSeenBefore(ctx, time.Now().Add(-sessionsStale*c.recordInterval()))
}

// sessionsStale is how many record intervals a session goes unseen before a replica takes it
// for one a dead replica left.
const sessionsStale = 3

func (c *Coordinator) recordInterval() time.Duration {
	return cmp.Or(c.cfg.Fleet.RecordInterval, time.Minute)
}

// sweepSessions ends, every record interval, the sessions dead replicas left open.
func (c *Coordinator) sweepSessions(ctx context.Context) {
	t := time.NewTicker(c.recordInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := c.endSessions(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("end the node sessions of dead replicas", "err", err)
			} else if n > 0 {
				c.log.Info("ended node sessions a dead replica left open", "sessions", n)
			}
		}
	}
}

// closeBilling stores the receipts queued and hands their bills to the ledger, then commits
// what the ledger has queued, and stops both.
func (c *Coordinator) closeBilling() {
	c.Core.Close()
	c.Ledger.Close()
}

// MetricsHandler serves the coordinator's Prometheus metrics. Serve it on an address of its
// own (--metrics-addr), not to the public.
func (c *Coordinator) MetricsHandler() http.Handler { return c.cfg.Metrics.Handler() }

// nodeSamples is the fleet as the nodes gauge counts it; nodes connected for a selftest only
// are not counted.
func (c *Coordinator) nodeSamples() []metrics.NodeSample {
	nodes := c.Fleet.Local() // each replica counts the nodes it holds: summed over replicas, each once
	out := make([]metrics.NodeSample, 0, len(nodes))
	for _, n := range nodes {
		if n.Selftest {
			continue
		}
		state := "available"
		if n.Paused() != "" {
			state = "paused"
		} else if !slices.ContainsFunc(n.Offers, func(o *fleet.Offer) bool { return o.Running() < o.MaxConcurrent }) {
			state = "busy"
		}
		out = append(out, metrics.NodeSample{State: state, Level: n.Level(), Region: n.Region})
	}
	return out
}

// sampleSlots adds to the slot-time metrics, every SlotSampleEvery until ctx is done, the
// slots of each model that this replica's nodes hold open, busy and free, and the batch jobs
// it runs: the share of idle slot-time that batches fill is read from them.
func (c *Coordinator) sampleSlots(ctx context.Context) {
	last := time.Now()
	t := time.NewTicker(c.cfg.SlotSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// The time read now, not the tick's: a tick may carry the time it was due, before
			// a late start or the previous sample.
			now := time.Now()
			dt := max(now.Sub(last), 0).Seconds()
			slots, batch := c.Fleet.OpenSlots(), c.Core.BatchJobs()
			for model, s := range slots {
				c.Metrics.SlotTime(model, s.Busy, s.Free, batch[model], dt)
				delete(batch, model)
			}
			for model, n := range batch { // batch jobs on nodes of other replicas
				c.Metrics.SlotTime(model, 0, 0, n, dt)
			}
			last = now
		}
	}
}

// Handler returns the coordinator's HTTP handler.
func (c *Coordinator) Handler() http.Handler { return c.handler }

// server is the coordinator's HTTP server.
//
// ReadTimeout bounds the reading of a request, its body included: a client that sends half a
// body is answered 408 (api.Decode) and its connection closed, rather than held open. It never
// bounds the answer: net/http lifts the read deadline once the body has been read (HTTP/1.1
// before its watch for the client leaving; HTTP/2 per stream), so answers streamed for longer
// still run, and a request without a body (the agents' WebSocket upgrade) is not bounded at
// all. TestServer_LongAnswer holds this.
func (c *Coordinator) server() *http.Server {
	return &http.Server{
		Handler:           c.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       c.cfg.BodyTimeout,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         c.cfg.TLS,
		ErrorLog:          slog.NewLogLogger(c.log.Handler(), slog.LevelDebug),
		// HTTP/1.1, and HTTP/2 over TLS or, for clients behind an HTTP/2 proxy, without TLS
		// (prior knowledge): many streams on one connection, each cheaper than a connection.
		Protocols: serverProtocols(),
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: maxStreamsPerConn},
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it stops accepting
// requests, lets streams in flight finish (up to DrainTimeout), disconnects the agents (they
// reconnect on their own) and settles the last bills. Before serving, it voids the holds a
// crash left open. It does not close the store.
func (c *Coordinator) Serve(ctx context.Context, ln net.Listener) error {
	if r, err := c.Ledger.Recover(ctx); err != nil {
		ln.Close()
		c.closeBilling()
		if ctx.Err() != nil {
			return nil // stopped before it served: nothing to drain, and the holds wait for the next start
		}
		return fmt.Errorf("close holds left open: %w", err)
	} else if r.Settled+r.Voided > 0 {
		c.log.Warn("closed holds left open by an unclean stop", "settled_at_checkpoint", r.Settled, "voided", r.Voided)
	}
	if n, err := c.endSessions(ctx); err != nil {
		ln.Close()
		c.closeBilling()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("end node sessions left open: %w", err)
	} else if n > 0 {
		c.log.Warn("ended node sessions left open by an unclean stop, at their last sighting", "sessions", n)
	}
	srv := c.server()
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	go c.Fleet.Run(bg)
	go c.Ledger.Run(bg, time.Minute)
	go c.Ledger.RunLease(bg)
	go c.sampleSlots(bg)
	if c.Mesh != nil {
		go c.sweepSessions(bg)
		go func() {
			if err := c.Mesh.Run(bg); err != nil {
				c.log.Error("mesh stopped: this replica neither shares its nodes nor sees the others'", "err", err)
			}
		}()
	}
	batches, stopBatches := context.WithCancel(bg)
	defer stopBatches()
	go c.Batches.Run(batches)
	pctx, stopProber := context.WithCancel(bg)
	defer stopProber()
	proberDone := make(chan struct{})
	go func() {
		defer close(proberDone)
		if err := c.Prober.Run(pctx); err != nil {
			c.log.Error("verification stopped: new nodes get no live traffic", "err", err)
		}
	}()

	errc := make(chan error, 1)
	go func() {
		if c.cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	c.closing.Store(true)
	if c.Mesh != nil {
		c.Mesh.Leave() // the other replicas stop sending it jobs, and wait for its nodes elsewhere
	}
	stopProber() // checks in flight end without counting against their nodes
	<-proberDone
	stopBatches() // no new batch line starts; those in flight finish within the drain
	dctx, cancel := context.WithTimeout(context.Background(), c.cfg.DrainTimeout)
	defer cancel()
	serr := srv.Shutdown(dctx)
	if serr == nil {
		// Shutdown waits for the connections net/http serves: streams that took their HTTP/1.1
		// connection over (the gateway's h1Stream) are waited for here.
		serr = c.Gateway.Wait(dctx)
	}
	if berr := c.Batches.Wait(dctx); berr != nil && serr == nil {
		c.log.Warn("batch lines still running after the drain timeout; ending them (each runs again at the next start)")
		c.Gateway.Abort()
	}
	if serr != nil {
		// The answers still running end with an error saying so, each billed for what it
		// delivered, rather than being cut off; connections that still linger are closed.
		c.log.Warn("answers still running after the drain timeout; ending them with an error", "err", serr)
		c.Gateway.Abort()
		actx, cancel := context.WithTimeout(context.Background(), abortGrace)
		if srv.Shutdown(actx) != nil {
			srv.Close()
		}
		c.Gateway.Wait(actx) // and the streams that took their connection over, before their nodes go
		cancel()
	}
	c.Fleet.Close() // ends the jobs still running: requests waiting on their nodes return
	wctx, cancel := context.WithTimeout(context.Background(), abortGrace)
	if err := c.Gateway.Wait(wctx); err != nil {
		c.log.Error("requests still running at shutdown: their holds are closed at the next start", "err", err)
	}
	if err := c.Batches.Wait(wctx); err != nil {
		c.log.Error("batch lines still running at shutdown: they run again at the next start", "err", err)
	}
	cancel()
	c.closeBilling()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
