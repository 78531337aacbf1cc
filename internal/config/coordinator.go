package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/batch"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/tier"
)

// Coordinator configures `shareai coordinator`.
type Coordinator struct {
	Config  string // the YAML file read, if any
	Addr    string
	DataDir string
	DB      string // PostgreSQL URL; empty: SQLite in DataDir
	// NATS is the NATS servers' URLs, comma-separated, that the network's replicas share;
	// empty: no bus, a network of this one coordinator.
	NATS            string
	TLSCert, TLSKey string
	MetricsAddr     string // where /metrics is served; empty: nowhere
	// Coordinator holds the coordinator's settings, its own and its components': Flags binds
	// each flag to the field it sets, so that a setting is declared once, in its component.
	// Build adds the settings written as text (Pricing); cmd/shareai adds the store, the
	// logger, TLS, the receipt key and the tracer.
	Coordinator coordinator.Config
	Pricing     Pricing
	Trace       Trace
	Log         Log
}

// Pricing is the coordinator's pricing, as written: Validate checks it and Build parses it
// into the ledger's and the gateway's configs, while --check-config prints it as given.
type Pricing struct {
	FeePercent string // platform fee, percent of the node's ask
	TierPrices string // gold=1.5,silver=1,bronze=0.5
	BatchPrice string // batch lines' multiplier on nodes' asks: 0.5
}

// FeeBasisPoints returns the fee in 1/100 of a percent.
func (p *Pricing) FeeBasisPoints() (int, error) {
	v, err := money.ParseUSD(p.FeePercent) // a decimal with up to 9 places, read exactly
	if err != nil || v < 0 || v > 100*money.USD || v%(money.USD/100) != 0 {
		return 0, &FieldError{"platform-fee", fmt.Sprintf("%q is not a percentage between 0 and 100 with at most 2 decimals", p.FeePercent)}
	}
	return int(v / (money.USD / 100)), nil
}

// apply sets the parsed pricing in c. Validate has checked it.
func (p *Pricing) apply(c *coordinator.Config) {
	c.Ledger.FeeBasisPoints, _ = p.FeeBasisPoints()
	c.Core.TierPrices, _ = tier.ParseMultipliers(p.TierPrices)
	c.Core.BatchPrice, _ = tier.ParseFactor(p.BatchPrice)
}

// DefaultMaxTokensLimit is the max_tokens ceiling by default: the largest completion the
// common open models' contexts leave room for.
const DefaultMaxTokensLimit = 32768

// Flags registers the coordinator's flags with their defaults.
func (c *Coordinator) Flags(fs *flag.FlagSet) {
	cc := &c.Coordinator
	configFlag(fs, &c.Config)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address for the buyer API and agents")
	fs.StringVar(&c.DataDir, "data-dir", "./.shareai", "directory of the SQLite database")
	fs.StringVar(&c.DB, "db", "", "database: a PostgreSQL URL (postgres://user@host:5432/db) instead of SQLite in --data-dir")
	natsFlags(fs, &c.NATS, cc)
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS certificate file (PEM); serve HTTPS when set with --tls-key")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.DurationVar(&cc.DrainTimeout, "drain-timeout", 30*time.Second, "how long shutdown waits for streams in flight")
	fs.DurationVar(&cc.Fleet.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "how often agents send heartbeats")
	fs.Int64Var(&cc.Gateway.MaxBodyBytes, "max-body-bytes", 16<<20, "largest request body accepted")
	fs.DurationVar(&cc.BodyTimeout, "body-timeout", time.Minute, "the longest a request's body may take to arrive (then 408 and the connection closes); it never bounds an answer")
	fs.DurationVar(&cc.Core.StallTimeout, "stall-timeout", 30*time.Second, "the most a node may stay silent mid-answer before another node continues the answer")
	fs.DurationVar(&cc.Prober.ProbeEvery, "probe-every", 10*time.Minute, "mean time between two canary probes of a node, at random times; probes are paid from the platform's fees")
	fs.BoolVar(&cc.Fleet.TrustNewNodes, "trust-new-nodes", false, "let new nodes serve without onboarding checks: only for a private network of your own machines")
	fs.IntVar(&cc.Fleet.MaxNodesPerAccount, "max-nodes-per-account", 256, "the most nodes one provider account may have connected at once; more are refused")
	metricsFlag(fs, &c.MetricsAddr)
	c.Trace.Flags(fs)
	marketFlags(fs, cc, &c.Pricing)
	c.Log.Flags(fs)
}

// natsFlags registers the settings of a replica of a network of several coordinators: the
// NATS servers they share, and the replica's name.
func natsFlags(fs *flag.FlagSet, urls *string, c *coordinator.Config) {
	fs.StringVar(urls, "nats", "", "NATS servers (JetStream enabled, 2.9 or newer) shared by the network's coordinator replicas, comma-separated: nats://host:4222,tls://host:4222; empty: a network of this one coordinator")
	fs.StringVar(&c.Replica, "replica", "", "this coordinator's replica name, unique in the network (letters, digits, - and _); empty: rep_ and a random suffix, new at every start")
}

// validateNATS checks a list of NATS URLs and a replica name.
func validateNATS(urls, replica string) error {
	var errs []error
	if urls != "" {
		for u := range strings.SplitSeq(urls, ",") {
			u = strings.TrimSpace(u)
			pu, err := url.Parse(u)
			if err != nil || pu.Host == "" || (pu.Scheme != "nats" && pu.Scheme != "tls") {
				errs = append(errs, &FieldError{"nats", fmt.Sprintf("%q is not a NATS URL: want nats://host:4222 or tls://host:4222, several comma-separated", MaskURL(u))})
			}
		}
	}
	if replica != "" && !validReplica(replica) {
		errs = append(errs, &FieldError{"replica", fmt.Sprintf("%q: want at most 64 letters, digits, - and _", replica)})
	}
	return errors.Join(errs...)
}

// validReplica reports whether s can name a replica: it appears in NATS subjects and keys.
func validReplica(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// NewReplicaName returns a replica name for a replica started without one: rep_ and 12
// random hex digits.
func NewReplicaName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "rep_" + hex.EncodeToString(b)
}

// marketFlags registers the settings `coordinator` and `up` share, each bound to the field it
// sets: billing (the ledger's), the buyer API's limits, the queue and the tiers' prices (the
// gateway's). The fee and the tiers' prices are written as text, in p.
func marketFlags(fs *flag.FlagSet, c *coordinator.Config, p *Pricing) {
	billingFlags(fs, &c.Ledger, p)
	limitsFlags(fs, &c.Gateway)
	capacityFlags(fs, &c.Core, p)
	batchFlags(fs, &c.Batch, p)
	surgeFlags(fs, &c.Fleet.Surge)
}

// batchFlags registers the Files and Batch APIs' settings and the batch price.
func batchFlags(fs *flag.FlagSet, b *batch.Config, p *Pricing) {
	fs.StringVar(&p.BatchPrice, "batch-price", "0.5", "batch lines' price multiplier on nodes' asks, as a --tier-prices factor: the buyer pays ask × it + the fee, the node earns ask × it")
	fs.Int64Var(&b.MaxFileBytes, "max-file-bytes", batch.DefaultMaxFileBytes, "largest file a buyer may upload (POST /v1/files)")
	fs.StringVar(&b.FilesDir, "files-dir", "", "directory for files larger than 1 MiB (batch inputs and outputs), which every replica must share; empty: every file in the database")
	fs.IntVar(&b.Workers, "batch-workers", 256, "batch lines this coordinator runs, or waits to run, at once")
}

// surgeFlags registers the operator's surge multiplier of the asks (package pricing).
func surgeFlags(fs *flag.FlagSet, s *pricing.SurgeConfig) {
	fs.BoolVar(&s.Enabled, "surge", false, "multiply the nodes' asks by a surge multiplier that rises with a model's utilization (see --surge-floor, --surge-ceiling, --surge-target); off: asks as the providers set them")
	fs.Float64Var(&s.Floor, "surge-floor", 1, "surge: the lowest multiplier, at or below --surge-target's utilization")
	fs.Float64Var(&s.Ceiling, "surge-ceiling", 2, "surge: the highest multiplier, at full utilization (at most 10)")
	fs.Float64Var(&s.Target, "surge-target", 0.7, "surge: the utilization (slots running ÷ slots of the nodes that take jobs), from 0 to below 1, above which the multiplier rises")
	fs.DurationVar(&s.Smoothing, "surge-smoothing", pricing.DefaultSmoothing, "surge: the time constant of the utilization's moving average, and the least time between two changes of the multiplier")
}

// validateSurge checks the surge flags, when surge is on.
func validateSurge(s *pricing.SurgeConfig) error {
	if !s.Enabled {
		return nil
	}
	var errs []error
	if !(s.Floor > 0 && s.Floor <= pricing.MaxSurge) {
		errs = append(errs, &FieldError{"surge-floor", fmt.Sprintf("must be above 0 and at most %d", pricing.MaxSurge)})
	}
	if !(s.Ceiling >= s.Floor && s.Ceiling <= pricing.MaxSurge) {
		errs = append(errs, &FieldError{"surge-ceiling", fmt.Sprintf("must be at least --surge-floor and at most %d", pricing.MaxSurge)})
	}
	if !(s.Target >= 0 && s.Target < 1) {
		errs = append(errs, &FieldError{"surge-target", "must be at least 0 and below 1"})
	}
	if s.Smoothing < time.Second {
		errs = append(errs, &FieldError{"surge-smoothing", "must be at least 1s"})
	}
	return errors.Join(errs...)
}

func billingFlags(fs *flag.FlagSet, l *ledger.Config, p *Pricing) {
	fs.StringVar(&p.FeePercent, "platform-fee", "5", "platform fee in percent, added to the serving node's ask")
	fs.DurationVar(&l.SettlementDelay, "settlement-delay", 72*time.Hour, "how long providers' earnings stay pending before they can be paid out")
	fs.IntVar(&l.DefaultMaxTokens, "default-max-tokens", 4096, "completion bound, for holds and bills, of requests without max_tokens")
}

// limitsFlags registers the buyer API's limits: the rate limits of API keys that set none of
// their own, and the max_tokens ceiling.
func limitsFlags(fs *flag.FlagSet, g *gateway.Config) {
	fs.IntVar(&g.Limits.RequestsPerMinute, "key-rpm", 0, "requests per minute an API key may make, for keys without their own limit (0: unlimited); per coordinator process")
	fs.IntVar(&g.Limits.TokensPerMinute, "key-tpm", 0, "tokens per minute (prompt estimate + max_tokens at admission, then the tokens billed) an API key may use, for keys without their own limit (0: unlimited)")
	fs.IntVar(&g.Limits.Concurrent, "key-concurrent", 0, "requests an API key may have in flight at once, for keys without their own limit (0: unlimited)")
	fs.IntVar(&g.MaxTokensLimit, "max-tokens-limit", DefaultMaxTokensLimit, "the most max_tokens (or max_completion_tokens) a request may ask for; larger requests get 400")
}

// capacityFlags registers how requests wait for a free slot and what the service tiers cost.
func capacityFlags(fs *flag.FlagSet, g *core.Config, p *Pricing) {
	fs.DurationVar(&g.Queue.Timeout, "queue-timeout", queue.DefaultTimeout, "the longest a request waits in the queue for a free node when every node that fits it is busy; then 503 with Retry-After")
	fs.IntVar(&g.Queue.Length, "queue-length", queue.DefaultLength, "the most requests waiting for one model; more get 503 with Retry-After")
	fs.IntVar(&g.Queue.PerKey, "queue-per-key", queue.DefaultPerKey, "the most requests one API key may have waiting, for all models together")
	fs.StringVar(&p.TierPrices, "tier-prices", tier.DefaultMultipliers.String(), "the service tiers' price multipliers on nodes' asks: gold (service_tier priority), silver (default), bronze (flex)")
}

// Validate checks the settings.
func (c *Coordinator) Validate() error {
	var errs []error
	cc := &c.Coordinator
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, &FieldError{"addr", "want host:port, such as 127.0.0.1:8080"})
	}
	if c.DataDir == "" && c.DB == "" {
		errs = append(errs, &FieldError{"data-dir", "must not be empty"})
	}
	if c.DB != "" && !strings.HasPrefix(c.DB, "postgres://") && !strings.HasPrefix(c.DB, "postgresql://") {
		errs = append(errs, &FieldError{"db", "want a PostgreSQL URL such as postgres://user@host:5432/shareai"})
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, &FieldError{"tls-cert", "set both --tls-cert and --tls-key, or neither"})
	}
	if cc.DrainTimeout < 0 {
		errs = append(errs, &FieldError{"drain-timeout", "must not be negative"})
	}
	if cc.Fleet.HeartbeatInterval < 100*time.Millisecond {
		errs = append(errs, &FieldError{"heartbeat-interval", "must be at least 100ms"})
	}
	if cc.BodyTimeout < time.Second {
		errs = append(errs, &FieldError{"body-timeout", "must be at least 1s"})
	}
	if cc.Gateway.MaxBodyBytes < 1024 {
		errs = append(errs, &FieldError{"max-body-bytes", "must be at least 1024"})
	}
	errs = append(errs, validateNATS(c.NATS, cc.Replica))
	errs = append(errs, validateMetricsAddr(c.MetricsAddr))
	errs = append(errs, c.Trace.Validate())
	errs = append(errs, validateMarket(cc, &c.Pricing))
	return errors.Join(errs...)
}

// Build returns the coordinator's configuration, the pricing parsed in. Call it once Validate
// has passed.
func (c *Coordinator) Build() coordinator.Config {
	cc := c.Coordinator
	c.Pricing.apply(&cc)
	return cc
}

// validateMarket checks the settings marketFlags registers.
func validateMarket(c *coordinator.Config, p *Pricing) error {
	return errors.Join(validateBilling(&c.Ledger, p), validateLimits(&c.Gateway), validateCapacity(&c.Core, p), validateSurge(&c.Fleet.Surge), validateBatch(&c.Batch))
}

func validateBilling(l *ledger.Config, p *Pricing) error {
	var errs []error
	if _, err := p.FeeBasisPoints(); err != nil {
		errs = append(errs, err)
	}
	if l.SettlementDelay < 0 {
		errs = append(errs, &FieldError{"settlement-delay", "must not be negative"})
	}
	if l.DefaultMaxTokens < 1 {
		errs = append(errs, &FieldError{"default-max-tokens", "must be at least 1"})
	}
	return errors.Join(errs...)
}

func validateLimits(g *gateway.Config) error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"key-rpm", g.Limits.RequestsPerMinute}, {"key-tpm", g.Limits.TokensPerMinute}, {"key-concurrent", g.Limits.Concurrent}} {
		if f.v < 0 {
			errs = append(errs, &FieldError{f.name, "must not be negative (0: unlimited)"})
		}
	}
	if g.MaxTokensLimit < 1 {
		errs = append(errs, &FieldError{"max-tokens-limit", "must be at least 1"})
	}
	return errors.Join(errs...)
}

func validateCapacity(g *core.Config, p *Pricing) error {
	var errs []error
	if g.Queue.Timeout < 0 {
		errs = append(errs, &FieldError{"queue-timeout", "must not be negative"})
	}
	if g.Queue.Length < 1 {
		errs = append(errs, &FieldError{"queue-length", "must be at least 1"})
	}
	if g.Queue.PerKey < 1 {
		errs = append(errs, &FieldError{"queue-per-key", "must be at least 1"})
	}
	if _, err := tier.ParseMultipliers(p.TierPrices); err != nil {
		errs = append(errs, &FieldError{"tier-prices", err.Error()})
	}
	if _, err := tier.ParseFactor(p.BatchPrice); err != nil {
		errs = append(errs, &FieldError{"batch-price", err.Error()})
	}
	return errors.Join(errs...)
}

func validateBatch(b *batch.Config) error {
	var errs []error
	if b.MaxFileBytes < 1 {
		errs = append(errs, &FieldError{"max-file-bytes", "must be at least 1"})
	}
	if b.Workers < 1 {
		errs = append(errs, &FieldError{"batch-workers", "must be at least 1"})
	}
	return errors.Join(errs...)
}
