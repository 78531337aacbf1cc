// Package store holds the coordinator's domain records and the interface to the database that
// keeps them. The sqlstore subpackage implements it.
//
// It imports only the standard library and money.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Errors the store returns; wrap-safe, compare with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Kinds of key.
const (
	KeyBuyer    = "buyer"    // an API key, "sk-…", used on /v1
	KeyProvider = "provider" // a provider token, "spt-…", used by agents to register nodes
)

// Account is a person or company.
type Account struct {
	ID        string
	Name      string // unique
	CreatedAt time.Time
}

// Key is an API key or provider token. Only a hash of the secret is stored.
type Key struct {
	ID        string
	AccountID string
	Kind      string // KeyBuyer or KeyProvider
	Name      string
	Prefix    string // the first characters of the secret, for display
	Hash      []byte // SHA-256 of the secret
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is valid
	// Routing holds the key's default routing preferences, as the JSON of a request's provider
	// object; nil when none.
	Routing []byte
	// Models lists the models the key may use, in order of preference; empty: any.
	Models []string
	// Limits are the key's rate limits; a zero field takes the coordinator's default.
	Limits RateLimits
	// ServiceTier is the tier of the key's requests that name none, by tier.Tier's String
	// (gold, silver or bronze); "" is silver.
	ServiceTier string
	// Split is the key's default model roulette, for its requests that set no split: the
	// JSON of a request's split object; nil when none.
	Split []byte
}

// RateLimits are an API key's rate limits, per coordinator process. In each field 0 means the
// coordinator's default and a negative value no limit at all.
type RateLimits struct {
	RequestsPerMinute int // requests admitted in any 60 s
	TokensPerMinute   int // tokens, reserved then billed, in any 60 s
	Concurrent        int // requests in flight at once, streaming or not
}

// Revoked reports whether the key no longer works.
func (k *Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// Node is a provider's machine as last registered.
type Node struct {
	ID        string
	AccountID string // the provider's account
	PublicKey []byte // ed25519
	Name      string
	Region    string
	Engine    string
	Agent     string // agent version
	Hardware  []byte // JSON of protocol.Hardware
	Offers    []byte // JSON of []protocol.Offer
	FirstSeen time.Time
	LastSeen  time.Time
	// Overclaims counts the requests whose usage the node claimed beyond what it delivered.
	Overclaims int
	// Fingerprint identifies the node's hardware (GPUs and driver); HardwareChangedAt is when
	// it last changed (zero if never), after which the node must be verified again.
	Fingerprint       string
	HardwareChangedAt time.Time
	// Windows and Timezone are the node's declared weekly availability; empty: always.
	Windows, Timezone string
	// Level is the node's trust level (LevelNew …), why it has it and since when; Score its
	// reputation score in [0, 1] as last computed. UpsertNode leaves these alone.
	Level          string
	LevelReason    string
	LevelChangedAt time.Time
	Score          float64
}

// Outcomes of a request.
const (
	OutcomeOK        = "ok"        // the answer was delivered whole
	OutcomeCancelled = "cancelled" // the buyer went away
	OutcomeError     = "error"     // the network failed the request
	OutcomeRejected  = "rejected"  // the engine refused the request as invalid
)

// Usage is one buyer request's record.
type Usage struct {
	RequestID        string
	AccountID        string
	KeyID            string
	Model            string
	NodeID           string // empty when no node took the request
	Endpoint         string // "chat" or "completion"
	Stream           bool
	PromptTokens     int
	CompletionTokens int
	TTFT             time.Duration // time to first token; 0 when none came
	Duration         time.Duration
	Outcome          string
	Error            string // why, when Outcome is not OutcomeOK
	FinishReason     string
	Region           string      // the serving node's region
	Cost             money.Nanos // what the buyer paid
	CreatedAt        time.Time
	// ServiceTier is the tier that served the request, by tier.Tier's String (gold, silver or
	// bronze); "" in records from before tiers, which were silver.
	ServiceTier string
	// QueueTime is how long the request waited in the admission queue for a slot, counted
	// apart from its time to first token; 0 when it waited for none.
	QueueTime time.Duration
	// Split is the model roulette the request's model was drawn under, in its written form
	// (api.Split's String: "llama-3.1-8b=0.8,qwen-2.5-7b=0.2"); "" when none.
	Split string
}

// Store is the coordinator's database.
type Store interface {
	Ledger
	Reports
	Activity
	Trust
	Users
	Roulette
	Pricing
	Batches

	// CreateAccount creates an account; ErrConflict if the name is taken.
	CreateAccount(ctx context.Context, a *Account) error
	// Account returns an account by id or name; ErrNotFound.
	Account(ctx context.Context, idOrName string) (*Account, error)
	// MarkProvider records that an account provides nodes. Idempotent.
	MarkProvider(ctx context.Context, accountID string) error

	// CreateKey stores a key; its ID and Hash must be set.
	CreateKey(ctx context.Context, k *Key) error
	// CreateKeyWithCaps stores a new key as CreateKey does, with its spend caps (each of Scope
	// KeyScope(k.ID)), and marks a provider token's account as a provider (MarkProvider), in
	// one transaction: the key never exists without its caps, and on an error nothing is
	// written.
	CreateKeyWithCaps(ctx context.Context, k *Key, caps []Cap) error
	// KeyByHash returns the key (revoked or not) with this hash; ErrNotFound.
	KeyByHash(ctx context.Context, hash []byte) (*Key, error)
	// Keys lists an account's keys of a kind, newest first, revoked included. An empty
	// accountID lists every account's.
	Keys(ctx context.Context, accountID, kind string) ([]*Key, error)
	// RevokeKey revokes a key by id or by its prefix; ErrNotFound.
	RevokeKey(ctx context.Context, idOrPrefix string, at time.Time) (*Key, error)
	// SetKeyLimits replaces the rate limits of a key given by id or by its prefix, and returns
	// the key; ErrNotFound.
	SetKeyLimits(ctx context.Context, idOrPrefix string, l RateLimits) (*Key, error)
	// SetKeyServiceTier replaces the default service tier (Key.ServiceTier) of a key given by
	// id or by its prefix, and returns the key; ErrNotFound.
	SetKeyServiceTier(ctx context.Context, idOrPrefix, tier string) (*Key, error)

	// UpsertNode records a node's registration: it inserts the node or updates everything but
	// ID, PublicKey and FirstSeen.
	UpsertNode(ctx context.Context, n *Node) error
	// Node returns a node by id; ErrNotFound.
	Node(ctx context.Context, id string) (*Node, error)
	// TouchNodes sets LastSeen of the nodes to at.
	TouchNodes(ctx context.Context, ids []string, at time.Time) error

	// InsertUsage records requests, in one transaction. Inserting a request id twice is not an
	// error and keeps the first record.
	InsertUsage(ctx context.Context, us []*Usage) error
	// UsageByRequest returns one request's record; ErrNotFound.
	UsageByRequest(ctx context.Context, requestID string) (*Usage, error)
	// Usages lists an account's records, newest first, at most limit.
	Usages(ctx context.Context, accountID string, limit int) ([]*Usage, error)

	// Ping checks the database answers.
	Ping(ctx context.Context) error
	Close() error
}
