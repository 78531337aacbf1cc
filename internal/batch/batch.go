// Package batch is OpenAI's Files and Batch APIs behind the gateway's handlers: it stores
// files (in the database, or above a threshold in a directory), validates a batch's input
// lines as the live endpoints validate requests, and runs batches: each line through the one
// request core (core.Serve, Request.Batch) as bronze work in idle capacity, billed like a
// request, its result written in its settlement's transaction. A batch is run by one replica
// at a time (its runner, whose lease is the ledger's replica lease), and survives restarts:
// its state is all in the database. See docs/architecture.md, "Batches".
//
// It must not be imported by the agent, the core or the store.
package batch

import (
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// Endpoints a batch may run.
const (
	EndpointChat        = "/v1/chat/completions"
	EndpointCompletions = "/v1/completions"
)

// Limits, as OpenAI's.
const (
	// MaxLines is the most lines a batch's input may have.
	MaxLines = 50_000
	// DefaultMaxFileBytes is the largest file accepted by default (--max-file-bytes).
	DefaultMaxFileBytes = 200 << 20
	// Window is the only completion window: a batch not done 24 hours after its creation
	// expires.
	Window = 24 * time.Hour
	// maxMetadata bounds a batch's metadata: pairs, key and value lengths.
	maxMetadata, maxMetadataKey, maxMetadataValue = 16, 64, 512
	// maxErrors bounds the validation errors a failed batch keeps.
	maxErrors = 1000
)

// Config configures Batches.
type Config struct {
	Store  store.Store
	Core   *core.Core
	Fleet  *fleet.Fleet
	Ledger *ledger.Ledger // its Replica names this replica as a batch's runner
	Log    *slog.Logger
	Now    func() time.Time
	// Check is the live endpoints' check of a validated request beyond its decoding (the
	// gateway's max_tokens ceiling), by the parameter it names; nil: none.
	Check func(req *protocol.Request, param string) error

	// MaxFileBytes is the largest file accepted (413 above). Default DefaultMaxFileBytes.
	MaxFileBytes int64
	// FilesDir, when set, keeps the content of files larger than FilesDirAbove in this
	// directory instead of the database. Replicas must share it (a network file system).
	FilesDir string
	// FilesDirAbove is the size above which a file goes to FilesDir. Default 1 MiB.
	FilesDirAbove int64
	// Workers bounds the lines this replica runs, or waits to run, at once. Default 256.
	Workers int
	// Poll is how often the runner looks for batches to run and reads their status (a cancel
	// made through another replica). Default 1s.
	Poll time.Duration
	// MaxTries bounds the attempts of a line that nodes fail, before it fails. Default 5.
	MaxTries int
}

// Batches serves the Files and Batch APIs' operations and runs batches.
type Batches struct {
	cfg Config
	log *slog.Logger

	started time.Time // when New made it: see joinGrace

	mu     sync.Mutex
	active map[string]bool // batches this replica runs now
	lines  sync.WaitGroup  // lines in flight
	slots  chan struct{}   // Workers tokens
	freed  chan struct{}   // a token for each line ended: a slot one waiting line may take
}

// New returns Batches over cfg's store and core.
func New(cfg Config) *Batches {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.FilesDirAbove <= 0 {
		cfg.FilesDirAbove = 1 << 20
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 256
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = 5
	}
	return &Batches{cfg: cfg, log: cfg.Log, active: map[string]bool{}, started: cfg.Now(),
		slots: make(chan struct{}, cfg.Workers), freed: make(chan struct{}, cfg.Workers)}
}

// MaxFileBytes is the largest file accepted.
func (b *Batches) MaxFileBytes() int64 { return b.cfg.MaxFileBytes }

// newID returns a fresh id with a prefix (file-, batch_, batch_req_).
func newID(prefix string) string { return prefix + rand.Text() }
