// Package gateway serves the buyers' OpenAI-compatible API (/v1/...): it authenticates API
// keys, decodes and validates requests, admits them within their keys' rate limits, and runs
// them through the request core (internal/core), which matches, holds, relays and bills; it
// writes the answer's headers and errors. It also serves the market, reporting, provider and
// receipt endpoints.
//
// It must not be imported by the agent.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/batch"
	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tracing"
)

// Log keys.
const (
	logRequestID = "request_id"
	logAccount   = "account"
	logKey       = "key"
	logNode      = "node"
)

// Headers on every response.
const (
	HeaderRequestID = requestid.Header
	HeaderNode      = "X-Shareai-Node"
	// HeaderModel is the model that serves the answer, as its body's model: the requested
	// one, a fallback, or the arm a split drew.
	HeaderModel = "X-Shareai-Model"
	// HeaderQueueTime is how long the request waited in the queue for a free node before
	// its answer started, as a Go duration ("0s", "1.2s").
	HeaderQueueTime = "X-Shareai-Queue-Time"
)

// Config configures a Gateway.
type Config struct {
	// Core runs the requests the gateway has authenticated, decoded and admitted.
	Core *core.Core
	// Reputation explains a node's score to its provider; nil: reports show none.
	Reputation   func(ctx context.Context, nodeID string) (reputation.Score, error)
	Store        store.Store
	Fleet        *fleet.Fleet
	Ledger       *ledger.Ledger
	Log          *slog.Logger
	MaxBodyBytes int64         // default 16 MiB
	KeyCacheTTL  time.Duration // how long a valid key is trusted without asking the store; default 10s
	// Metrics counts requests and rate limits; nil: counted nowhere.
	Metrics *metrics.Coordinator
	// TracerProvider records the server spans of buyers' requests (trace.go); nil: none.
	TracerProvider trace.TracerProvider
	// Limits are the rate limits of API keys that set none of their own (limits.go); a zero
	// field: unlimited. They are counted in this process, or with Bus across the replicas.
	Limits store.RateLimits
	// Bus, when set, counts rate limits across the network's replicas in NATS
	// (limits_shared.go); nil: in this process only.
	Bus *bus.Bus
	// MaxTokensLimit is the most max_tokens a request may ask for. Default 32768.
	MaxTokensLimit int
	// Batches serves the Files and Batch APIs (batches.go); nil: not served.
	Batches *batch.Batches
	Now     func() time.Time
}

// Gateway is the buyer API.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	core    *core.Core
	keys    keyCache
	limits  limiter
	tracer  trace.Tracer
	tracing bool // whether tracer records: only then is a buyer's traceparent read
	// held are the HTTP/1.1 connections of ended streams waiting for their next request.
	held heldConns
}

// New returns a gateway over cfg.Core.
func New(cfg Config) *Gateway {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.KeyCacheTTL <= 0 {
		cfg.KeyCacheTTL = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = slog.New(requestid.LogHandler(cfg.Log.Handler())) // lines logged with a request's context carry its id
	if cfg.MaxTokensLimit <= 0 {
		cfg.MaxTokensLimit = 32768
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewCoordinator(nil)
	}
	g := &Gateway{cfg: cfg, log: cfg.Log, core: cfg.Core, tracing: tracing.Enabled(cfg.TracerProvider),
		tracer: tracing.Tracer(cfg.TracerProvider, "github.com/shareai/shareai/internal/gateway")}
	g.keys = keyCache{ttl: cfg.KeyCacheTTL, now: cfg.Now, m: make(map[[32]byte]cachedKey)}
	g.limits = limiter{defaults: cfg.Limits, now: cfg.Now}
	if cfg.Bus != nil {
		g.limits.shared = newSharedLimiter(cfg.Bus, cfg.Now, cfg.Log)
	}
	return g
}

// Register adds the gateway's routes to mux.
func (g *Gateway) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/chat/completions", g.handleInference(protocol.KindChat, g.chatCompletions))
	mux.Handle("POST /v1/completions", g.handleInference(protocol.KindCompletion, g.completions))
	mux.Handle("GET /v1/models", g.handle(g.listModels))
	mux.Handle("GET /v1/models/{id...}", g.handle(g.getModel))
	g.registerAccount(mux)
	g.registerRoulette(mux)
	g.registerProvider(mux)
	g.registerBatches(mux)
	mux.Handle("/v1/", g.handle(func(w http.ResponseWriter, r *http.Request, c *call) error {
		return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Code: "unknown_url",
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)}
	}))
}

// call is what a handler knows about the request it serves.
type call struct {
	// ctx is the request's context: r.Context(), or for an inference request the context a
	// shutdown's drain covers (handleInference), carried here rather than in a copy of the
	// request, which every stream held open would keep.
	ctx context.Context
	// cancel ends ctx, with its cause: set for an inference request (handleInference), whose
	// streamed answer over HTTP/1.1 ends it when the buyer goes away (h1stream.go).
	cancel context.CancelCauseFunc
	id     string
	key    *store.Key
	start  time.Time
	usage  *store.Usage // of an inference request, once it is served
	span   trace.Span   // the request's server span; a no-op one when not traced
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// handle serves a buyer API handler: it authenticates an API key (sk-…) and writes the
// handler's error in OpenAI's shape.
func (g *Gateway) handle(fn handlerFunc) http.Handler { return g.handleAs(store.KeyBuyer, fn) }

// handleAs is handle for the API of a kind of key: store.KeyBuyer or store.KeyProvider.
func (g *Gateway) handleAs(kind string, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.call(r.Context(), nil, w, r, kind, g.cfg.MaxBodyBytes, fn)
	})
}

// call serves a request, in ctx, which cancel (when not nil) ends, with fn once its key is
// authenticated, writes fn's error, and returns the call and the error.
func (g *Gateway) call(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, r *http.Request, kind string, maxBody int64, fn handlerFunc) (_ *call, err error) {
	c := &call{ctx: ctx, cancel: cancel, id: requestid.From(ctx), start: g.cfg.Now()}
	r = g.startRequest(r, c)
	defer func() { endRequest(c, err) }()
	err = g.authenticate(r, c, kind)
	if err == nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		err = fn(w, r, c)
	}
	if err != nil {
		g.writeError(w, c, err)
	}
	return c, err
}

// writeError writes a handler's error in OpenAI's shape; an error that is not an *api.Error is
// logged and shown as a 500 with the request id.
func (g *Gateway) writeError(w http.ResponseWriter, c *call, err error) {
	var ae *api.Error
	switch {
	case !errors.As(err, &ae):
		g.log.Error("request failed", logRequestID, c.id, "err", err)
		ae = &api.Error{Status: http.StatusInternalServerError, Type: api.TypeServer,
			Message: "The server had an error while processing your request. Request id: " + c.id + "."}
	case ae.Cause != nil && ae.Status >= 500:
		g.log.Warn("request failed", logRequestID, c.id, "err", err, "cause", ae.Cause) // the cause the buyer is not shown
	}
	if (ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusTooManyRequests) && ae.RetryAfter >= 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(ae.RetryAfter, 1)))
	}
	ae.Write(w)
}

// bearer returns the secret of a Bearer Authorization header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		secret, ok = strings.CutPrefix(h, "bearer ")
	}
	secret = strings.TrimSpace(secret)
	return secret, ok && secret != ""
}

// authenticate checks the request's key is a valid key of the kind.
func (g *Gateway) authenticate(r *http.Request, c *call, kind string) error {
	a, what, example := "an", "API key", "YOUR_KEY"
	if kind == store.KeyProvider {
		a, what, example = "a", "provider token", "spt-…"
	}
	secret, ok := bearer(r)
	if !ok {
		return &api.Error{Status: http.StatusUnauthorized, Type: api.TypeInvalidRequest, Code: api.CodeMissingAPIKey,
			Message: fmt.Sprintf("You didn't provide %s %s. You need to provide your %s in an Authorization header using Bearer auth (i.e. Authorization: Bearer %s).",
				a, what, what, example)}
	}
	k, err := g.keys.lookup(r.Context(), g.cfg.Store, secret)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("look up %s: %w", what, err)
	}
	if k == nil || k.Revoked() || k.Kind != kind {
		msg := "Incorrect " + what + " provided: " + redact(secret) + "."
		switch {
		case k != nil && k.Revoked():
			msg = "The " + what + " " + k.Prefix + "… has been revoked."
		case k != nil && k.Kind == store.KeyProvider:
			msg = "A provider token cannot call the buyer API; use an API key (sk-…)."
		case k != nil:
			msg = "An API key cannot call the provider API; use a provider token (spt-…)."
		}
		return &api.Error{Status: http.StatusUnauthorized, Type: api.TypeInvalidRequest, Code: api.CodeInvalidAPIKey, Message: msg}
	}
	c.key = k
	return nil
}

// redact shows a secret the way OpenAI does: its first and last few characters.
func redact(secret string) string {
	if len(secret) <= 10 {
		return "****"
	}
	return secret[:6] + "****" + secret[len(secret)-4:]
}

// keyCache keeps valid keys for a short while so that most requests need no database read.
// A key revoked through another process stops working within the TTL.
type keyCache struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[[32]byte]cachedKey
}

type cachedKey struct {
	key     *store.Key
	expires time.Time
}

func (kc *keyCache) lookup(ctx context.Context, st store.Store, secret string) (*store.Key, error) {
	var h [32]byte
	copy(h[:], store.HashSecret(secret))
	now := kc.now()
	kc.mu.Lock()
	ck, ok := kc.m[h]
	kc.mu.Unlock()
	if ok && now.Before(ck.expires) {
		return ck.key, nil
	}
	k, err := st.KeyByHash(ctx, h[:])
	if err != nil {
		return nil, err
	}
	kc.mu.Lock()
	if len(kc.m) > 100_000 {
		clear(kc.m)
	}
	kc.m[h] = cachedKey{key: k, expires: now.Add(kc.ttl)}
	kc.mu.Unlock()
	return k, nil
}

// Forget drops a key from the cache, so a revocation made in this process applies at once.
func (g *Gateway) Forget(keyHash []byte) {
	var h [32]byte
	copy(h[:], keyHash)
	g.keys.mu.Lock()
	delete(g.keys.m, h)
	g.keys.mu.Unlock()
}
