// Package agent is the provider's side of ShareAI: it dials the coordinator outbound over
// WebSocket (so it works behind NAT), registers the node and its offers, sends heartbeats, and
// runs the jobs it is sent on a local engine, many at once on the one connection. When the
// connection drops it reconnects with backoff and jitter.
//
// It must not import the store, ledger, gateway, fleet or any other coordinator package.
package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/guard"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tracing"
)

// Log keys.
const (
	logJob   = "job"
	logNode  = "node"
	logModel = "model"
)

// Config configures an agent.
type Config struct {
	// Coordinator is the coordinator's base URL, such as http://coord.example:8080, or several,
	// comma-separated (the replicas of one network): the agent connects to /v1/agent/connect of
	// the first, and on every reconnect tries the next one, round-robin, with its backoff. A
	// DNS name that resolves to several replicas is resolved again on every reconnect.
	Coordinator string
	Token       string // provider token, "spt-…"
	DataDir     string // keeps the node key
	Name        string
	Region      string
	Engine      engine.Engine
	// Offers to make, each of a model the engine serves: settings left zero (context length,
	// slots, quantization) take the engine's or the node's; prices are taken as they are.
	// Empty: every model the engine serves, at the node's settings and prices.
	Offers []protocol.Offer
	// CheckFit says why a model cannot run in the node's GPU memory at a context length, or
	// nil; an offer that does not fit is refused at start. Nil: every offer fits.
	CheckFit      func(m engine.Model, contextLength int) error
	MaxConcurrent int // default 4
	// ContextLength is advertised for models whose engine does not say.
	ContextLength int
	// Ask is the provider's price for every offer, per million input and output tokens.
	InputPrice, OutputPrice money.Price
	// AskSchedule changes the ask of the offers not named in Offers by time windows (peak,
	// off-peak); nil: the ask above at all times. Offers carry their own.
	AskSchedule *protocol.AskSchedule
	// Quantization names the weights' quantization of every offer (Q4_K_M, fp8, …), if known.
	Quantization string
	// GoldShare of each offer's slots are kept for gold requests (rounded to the nearest
	// slot); NoBronze refuses bronze requests, NoBatch batch work.
	GoldShare float64
	NoBronze  bool
	NoBatch   bool
	Hardware  protocol.Hardware
	Version   string // the agent's build version
	// Chaos makes the node drop or stall mid-answer on purpose, for demos and tests.
	Chaos Chaos
	// WaitForEngine keeps retrying, with backoff, an engine that does not answer at start,
	// instead of failing: a provider's engine may start after its agent.
	WaitForEngine bool

	// Schedule is when the node takes jobs; nil: always. Windows and Timezone say the same to
	// the coordinator, for its provider reports.
	Schedule          Schedule
	Windows, Timezone string
	// Drain is how long running jobs may go on once the node stops taking new ones (a window
	// closes, the owner pauses it, it steps aside); then other nodes finish their answers.
	// Default DefaultDrain.
	Drain time.Duration
	// Telemetry reads the GPUs, for heartbeats and the guard; nil: no readings.
	Telemetry func(ctx context.Context) (*protocol.Telemetry, error)
	// Guard pauses the node while its owner uses the GPU or it runs too hot; nil: never.
	Guard *guard.Guard
	// CheckEvery is how often the node reads its GPUs and checks its windows. Default 5s.
	CheckEvery time.Duration
	Now        func() time.Time // default time.Now
	// Selftest connects only to have the coordinator check the node as it checks a new one:
	// Run returns once the results came (SelftestResult), and the node gets no live traffic.
	Selftest bool
	// TracerProvider records the spans of jobs (trace.go), children of the coordinator's when
	// a job frame carries its trace context; nil: none.
	TracerProvider trace.TracerProvider

	// Metrics is the registry the agent's metrics are registered on, served at /metrics by the
	// control API; nil: a registry of its own.
	Metrics *metrics.Registry
	Log     *slog.Logger
}

// DefaultDrain is how long running jobs may go on, by default, once the node stops taking new
// ones.
const DefaultDrain = 10 * time.Minute

// Agent is a running provider agent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	key   ed25519.PrivateKey
	urls  []string // the coordinators' connect URLs, tried in turn
	bases []string // their base URLs, as configured
	next  int      // the index in urls of the next dial; only Run's goroutine uses it

	mu      sync.Mutex
	nodeID  string
	running int
	conns   int // successful registrations so far
	ready   chan struct{}
	ws      *websocket.Conn // the connection now, nil between connections
	coord   string          // the base URL of the coordinator connected to now, "" between connections
	conn    *conn           // the same, registered

	// Whether the node takes jobs: see check.
	checkMu      sync.Mutex // one check at a time
	ownerPaused  bool
	guardReason  string
	ranSince     int    // the most jobs that ran since the last reading
	readingFails bool   // the last GPU reading failed
	paused       string // why the node takes no new jobs, "" when it does
	pausedAt     time.Time
	telemetry    *protocol.Telemetry
	kick         chan struct{} // asks the connection for a heartbeat now
	selftest     *protocol.Selftest
	tracer       trace.Tracer
	tracing      bool // whether tracer records: only then is a job's trace context read
	metrics      *metrics.Agent
}

// SelftestResult returns what the coordinator found in a selftest, or nil before it came.
func (a *Agent) SelftestResult() *protocol.Selftest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.selftest
}

// Drop closes the connection to the coordinator at once, as a network failure would; the agent
// reconnects as after any drop.
func (a *Agent) Drop() {
	a.mu.Lock()
	ws := a.ws
	a.mu.Unlock()
	if ws != nil {
		ws.CloseNow()
	}
}

// New checks the configuration and loads (or makes) the node key.
func New(cfg Config) (*Agent, error) {
	if cfg.Engine == nil {
		return nil, errors.New("agent: no engine")
	}
	if cfg.Token == "" {
		return nil, errors.New("agent: no provider token")
	}
	urls, bases, err := connectURLs(cfg.Coordinator)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 4
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Drain <= 0 {
		cfg.Drain = DefaultDrain
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Hardware.OS == "" {
		cfg.Hardware.OS, cfg.Hardware.Arch, cfg.Hardware.CPUs = runtime.GOOS, runtime.GOARCH, runtime.NumCPU()
	}
	key, err := LoadOrCreateNodeKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewRegistry()
	}
	a := &Agent{cfg: cfg, log: cfg.Log, key: key, urls: urls, bases: bases, ready: make(chan struct{}), kick: make(chan struct{}, 1)}
	a.tracer, a.tracing = tracing.Tracer(cfg.TracerProvider, "github.com/shareai/shareai/internal/agent"), tracing.Enabled(cfg.TracerProvider)
	a.metrics = metrics.NewAgent(cfg.Metrics, metrics.AgentView{
		Running: a.Running, Paused: a.Paused, GPUs: cfg.Hardware.GPUs,
		Connected: func() bool { return a.Status().Connected },
		Telemetry: func() *protocol.Telemetry { return a.Status().Telemetry },
	})
	if ownerPausedBefore(cfg.DataDir) {
		a.ownerPaused, a.paused, a.pausedAt = true, ownerPauseReason, cfg.Now()
	}
	return a, nil
}

// connectURLs returns the connect URLs of list, one coordinator's base URL or several,
// comma-separated, and the base URLs.
func connectURLs(list string) (urls, bases []string, err error) {
	for b := range strings.SplitSeq(list, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		u, err := connectURL(b)
		if err != nil {
			return nil, nil, err
		}
		urls, bases = append(urls, u), append(bases, b)
	}
	if len(urls) == 0 {
		return nil, nil, errors.New("agent: no coordinator address")
	}
	return urls, bases, nil
}

func connectURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("agent: coordinator address %q is not a URL like http://host:8080", base)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("agent: coordinator address %q: scheme must be http or https", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/agent/connect"
	return u.String(), nil
}

// NodeID returns the node's id once it has registered, or "".
func (a *Agent) NodeID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeID
}

// Running returns how many jobs run now.
func (a *Agent) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// Registrations returns how many times the node has registered (1 + reconnects).
func (a *Agent) Registrations() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns
}

// Ready is closed when the node first registers.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run connects and serves jobs until ctx is done, reconnecting whenever the connection drops.
// It returns nil when ctx is done, or an error the coordinator gave that retrying cannot fix
// (such as an invalid provider token).
func (a *Agent) Run(ctx context.Context) error {
	offers, err := a.waitForEngine(ctx)
	if err != nil || ctx.Err() != nil {
		return err
	}
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	a.check(wctx, true) // the node registers knowing whether it takes jobs
	go a.watch(wctx)
	var attempt int
	for {
		registered, err := a.session(ctx, offers)
		if ctx.Err() != nil || a.SelftestResult() != nil {
			return nil
		}
		if errors.Is(err, errFatal) {
			return err
		}
		if registered {
			attempt = 0
		}
		d := Backoff(attempt, rand.Float64)
		attempt++
		a.log.Warn("disconnected from coordinator; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// waitForEngine lists the engine's models as offers. When the engine does not answer (it may
// start after the agent) it retries with backoff if Config.WaitForEngine says so, and
// otherwise fails at once.
func (a *Agent) waitForEngine(ctx context.Context) ([]protocol.Offer, error) {
	for attempt := 0; ; attempt++ {
		offers, err := a.offers(ctx)
		if err == nil || !a.cfg.WaitForEngine || errors.Is(err, errFatal) {
			return offers, err
		}
		d := Backoff(attempt, rand.Float64)
		a.log.Warn("the engine does not answer yet; retrying", "err", err, "in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
	}
}

// Backoff is how long to wait before reconnect attempt n (0-based): exponential from 250ms to
// 30s, with the upper half jittered so that many agents don't return at the same instant.
// random returns a number in [0, 1).
func Backoff(n int, random func() float64) time.Duration {
	const (
		base    = 250 * time.Millisecond
		ceiling = 30 * time.Second
	)
	d := ceiling
	if n < 8 {
		d = min(base<<n, ceiling)
	}
	return d/2 + time.Duration(random()*float64(d/2))
}
