// Package config holds one typed configuration per program (coordinator, provider agent, local
// network), filled from defaults, then the program's YAML file, then the environment, then
// flags, and checked by Validate. It also renders the settings tables of docs/configuration.md.
// Only this package and cmd/ read the environment.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// FieldError is one invalid setting.
type FieldError struct {
	Field string // the flag's name, or the YAML key of a setting only a file holds (offers[0].model)
	Msg   string
}

func (e *FieldError) Error() string {
	if strings.ContainsAny(e.Field, ".[") {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("--%s: %s", e.Field, e.Msg)
}

// Env documents every environment variable, with the flag it sets.
var Env = []struct{ Name, Flag, Doc string }{
	{"SHAREAI_ADDR", "addr", "coordinator listen address"},
	{"SHAREAI_DATA_DIR", "data-dir", "where the database, keys and node keys live"},
	{"SHAREAI_DB", "db", "the coordinator's PostgreSQL URL (default: SQLite in the data dir)"},
	{"SHAREAI_LOG_LEVEL", "log-level", "debug, info, warn or error"},
	{"SHAREAI_METRICS_ADDR", "metrics-addr", "where the coordinator serves Prometheus metrics at /metrics"},
	{"SHAREAI_LOG_FORMAT", "log-format", "text or json"},
	{"SHAREAI_OTLP_ENDPOINT", "otlp-endpoint", "the OpenTelemetry collector traces are sent to over OTLP/HTTP, e.g. http://127.0.0.1:4318"},
	{"SHAREAI_TRACE_SAMPLE", "trace-sample", "share of requests traced, from 0 to 1"},
	{"SHAREAI_TLS_CERT", "tls-cert", "coordinator TLS certificate file (PEM)"},
	{"SHAREAI_TLS_KEY", "tls-key", "coordinator TLS key file (PEM)"},
	{"SHAREAI_COORDINATOR", "coordinator", "the agent's coordinator URL"},
	{"SHAREAI_PROVIDER_TOKEN", "token", "the agent's provider token (spt-…)"},
	{"SHAREAI_ENGINE", "engine", "ollama, openai or sim"},
	{"SHAREAI_CONFIG", "config", "the program's YAML configuration file (coordinator, provider, up)"},
	{"SHAREAI_UPSTREAM", "upstream", "the engine's base URL, e.g. http://127.0.0.1:8000/v1 (openai) or http://127.0.0.1:11434 (ollama)"},
	{"SHAREAI_UPSTREAM_API_KEY", "upstream-api-key", "bearer key for the upstream engine"},
	{"SHAREAI_REGION", "region", "the node's region (ISO country code such as de, us)"},
	{"SHAREAI_NODE_NAME", "name", "the node's display name"},
	{"SHAREAI_WINDOWS", "windows", "the node's weekly availability windows, e.g. mon-fri 08:00-18:00"},
	{"SHAREAI_TIMEZONE", "timezone", "the time zone of the availability windows, e.g. Europe/Berlin"},
	{"SHAREAI_CONTROL", "control", "the agent's local control address, for pause and resume"},
}

// Bind registers the flags of fs to read their defaults from the environment variables named in
// Env. Call it after defining the flags and before fs.Parse.
func Bind(fs *flag.FlagSet, getenv func(string) string) error {
	errs := []error{bindOTel(fs, getenv)}
	for _, e := range Env {
		f := fs.Lookup(e.Flag)
		if f == nil {
			continue
		}
		if v := getenv(e.Name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %s", e.Name, maskSecret(e.Flag, v), valueHint(f, err)))
			}
			showDefault(f, v)
		}
	}
	return errors.Join(errs...)
}

// secretFlags hold credentials: never shown in --help or usage messages, which end up in logs.
// The coordinator's --db URL may hold a password: it is shown without it (maskURL).
var secretFlags = map[string]bool{"token": true, "upstream-api-key": true, "key": true}

// urlFlags are URLs that may hold a password (the coordinator's --db, a collector's
// user:pass@): they are shown without it (maskURL).
var urlFlags = map[string]bool{"db": true, "otlp-endpoint": true}

// showDefault makes v, taken from the environment or a file, the default --help shows.
func showDefault(f *flag.Flag, v string) {
	f.DefValue = maskSecret(f.Name, v)
}

// maskSecret shows a credential by its first characters only, as keys are shown elsewhere, and
// a database URL without its password.
func maskSecret(flagName, v string) string {
	if v == "" {
		return v
	}
	if urlFlags[flagName] {
		return MaskURL(v)
	}
	if !secretFlags[flagName] {
		return v
	}
	return v[:min(len(v), 6)] + "…"
}

// Log is the logging configuration shared by every program.
type Log struct {
	Level  string
	Format string
}

// Flags registers the logging flags.
func (l *Log) Flags(fs *flag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
}

// Logger builds the logger, writing to stderr.
func (l *Log) Logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, &FieldError{"log-level", fmt.Sprintf("%q is not debug, info, warn or error", l.Level)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.Format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, &FieldError{"log-format", fmt.Sprintf("%q is not text or json", l.Format)}
}

// Coordinator configures `shareai coordinator`.
type Coordinator struct {
	Config             string // the YAML file read, if any
	Addr               string
	DataDir            string
	DB                 string // PostgreSQL URL; empty: SQLite in DataDir
	TLSCert, TLSKey    string
	DrainTimeout       time.Duration
	HeartbeatInterval  time.Duration
	MaxBodyBytes       int64
	BodyTimeout        time.Duration // how long a request's body may take to arrive
	StallTimeout       time.Duration
	ProbeEvery         time.Duration // mean time between canary probes of a node
	TrustNewNodes      bool          // skip onboarding checks
	MaxNodesPerAccount int           // nodes one provider account may have connected at once
	MetricsAddr        string        // where /metrics is served; empty: nowhere
	Trace              Trace
	Money              Money
	Limits             Limits
	Capacity           Capacity
	Log                Log
}

// Money is the coordinator's billing configuration.
type Money struct {
	FeePercent       string // platform fee, percent of the node's ask
	SettlementDelay  time.Duration
	DefaultMaxTokens int
}

// Flags registers the billing flags.
func (m *Money) Flags(fs *flag.FlagSet) {
	fs.StringVar(&m.FeePercent, "platform-fee", "5", "platform fee in percent, added to the serving node's ask")
	fs.DurationVar(&m.SettlementDelay, "settlement-delay", 72*time.Hour, "how long providers' earnings stay pending before they can be paid out")
	fs.IntVar(&m.DefaultMaxTokens, "default-max-tokens", 4096, "completion bound, for holds and bills, of requests without max_tokens")
}

// FeeBasisPoints returns the fee in 1/100 of a percent.
func (m *Money) FeeBasisPoints() (int, error) {
	p, err := money.ParseUSD(m.FeePercent) // a decimal with up to 9 places, read exactly
	if err != nil || p < 0 || p > 100*money.USD || p%(money.USD/100) != 0 {
		return 0, &FieldError{"platform-fee", fmt.Sprintf("%q is not a percentage between 0 and 100 with at most 2 decimals", m.FeePercent)}
	}
	return int(p / (money.USD / 100)), nil
}

// Validate checks the settings.
func (m *Money) Validate() error {
	var errs []error
	if _, err := m.FeeBasisPoints(); err != nil {
		errs = append(errs, err)
	}
	if m.SettlementDelay < 0 {
		errs = append(errs, &FieldError{"settlement-delay", "must not be negative"})
	}
	if m.DefaultMaxTokens < 1 {
		errs = append(errs, &FieldError{"default-max-tokens", "must be at least 1"})
	}
	return errors.Join(errs...)
}

// Limits are the buyer API's limits: the rate limits of API keys that set none of their own,
// and the max_tokens ceiling.
type Limits struct {
	KeyRPM, KeyTPM, KeyConcurrent int // 0: unlimited
	MaxTokens                     int // the most max_tokens a request may ask for
}

// DefaultMaxTokensLimit is the max_tokens ceiling by default: the largest completion the
// common open models' contexts leave room for.
const DefaultMaxTokensLimit = 32768

// Flags registers the limits' flags.
func (l *Limits) Flags(fs *flag.FlagSet) {
	fs.IntVar(&l.KeyRPM, "key-rpm", 0, "requests per minute an API key may make, for keys without their own limit (0: unlimited); per coordinator process")
	fs.IntVar(&l.KeyTPM, "key-tpm", 0, "tokens per minute (prompt estimate + max_tokens at admission, then the tokens billed) an API key may use, for keys without their own limit (0: unlimited)")
	fs.IntVar(&l.KeyConcurrent, "key-concurrent", 0, "requests an API key may have in flight at once, for keys without their own limit (0: unlimited)")
	fs.IntVar(&l.MaxTokens, "max-tokens-limit", DefaultMaxTokensLimit, "the most max_tokens (or max_completion_tokens) a request may ask for; larger requests get 400")
}

// KeyLimits are the default rate limits of API keys.
func (l *Limits) KeyLimits() store.RateLimits {
	return store.RateLimits{RequestsPerMinute: l.KeyRPM, TokensPerMinute: l.KeyTPM, Concurrent: l.KeyConcurrent}
}

// Validate checks the settings.
func (l *Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"key-rpm", l.KeyRPM}, {"key-tpm", l.KeyTPM}, {"key-concurrent", l.KeyConcurrent}} {
		if f.v < 0 {
			errs = append(errs, &FieldError{f.name, "must not be negative (0: unlimited)"})
		}
	}
	if l.MaxTokens < 1 {
		errs = append(errs, &FieldError{"max-tokens-limit", "must be at least 1"})
	}
	return errors.Join(errs...)
}

// Capacity is how requests wait for a free slot and what the service tiers cost.
type Capacity struct {
	QueueTimeout time.Duration // the longest a request waits for a slot
	QueueLength  int           // requests waiting for one model, at most
	QueuePerKey  int           // requests one API key has waiting, at most
	TierPrices   string        // gold=1.5,silver=1,bronze=0.5
}

// Flags registers the capacity flags.
func (c *Capacity) Flags(fs *flag.FlagSet) {
	fs.DurationVar(&c.QueueTimeout, "queue-timeout", queue.DefaultTimeout, "the longest a request waits in the queue for a free node when every node that fits it is busy; then 503 with Retry-After")
	fs.IntVar(&c.QueueLength, "queue-length", queue.DefaultLength, "the most requests waiting for one model; more get 503 with Retry-After")
	fs.IntVar(&c.QueuePerKey, "queue-per-key", queue.DefaultPerKey, "the most requests one API key may have waiting, for all models together")
	fs.StringVar(&c.TierPrices, "tier-prices", tier.DefaultMultipliers.String(), "the service tiers' price multipliers on nodes' asks: gold (service_tier priority), silver (default), bronze (flex)")
}

// Queue is the queue's configuration.
func (c *Capacity) Queue() queue.Config {
	return queue.Config{Timeout: c.QueueTimeout, Length: c.QueueLength, PerKey: c.QueuePerKey}
}

// Multipliers are the tiers' price multipliers.
func (c *Capacity) Multipliers() tier.Multipliers {
	m, _ := tier.ParseMultipliers(c.TierPrices)
	return m
}

// Validate checks the settings.
func (c *Capacity) Validate() error {
	var errs []error
	if c.QueueTimeout < 0 {
		errs = append(errs, &FieldError{"queue-timeout", "must not be negative"})
	}
	if c.QueueLength < 1 {
		errs = append(errs, &FieldError{"queue-length", "must be at least 1"})
	}
	if c.QueuePerKey < 1 {
		errs = append(errs, &FieldError{"queue-per-key", "must be at least 1"})
	}
	if _, err := tier.ParseMultipliers(c.TierPrices); err != nil {
		errs = append(errs, &FieldError{"tier-prices", err.Error()})
	}
	return errors.Join(errs...)
}

// Ask is a provider's price.
type Ask struct {
	Input, Output string // USD per million tokens
}

// Flags registers the price flags.
func (a *Ask) Flags(fs *flag.FlagSet) {
	fs.StringVar(&a.Input, "price-input", "0.05", "price asked in USD per 1M input (prompt) tokens; buyers pay it plus the platform fee")
	fs.StringVar(&a.Output, "price-output", "0.10", "price asked in USD per 1M output (completion) tokens")
}

// Prices parses the ask.
func (a *Ask) Prices() (in, out money.Price, err error) {
	if in, err = money.ParsePrice(a.Input); err != nil {
		return 0, 0, &FieldError{"price-input", err.Error()}
	}
	if out, err = money.ParsePrice(a.Output); err != nil {
		return 0, 0, &FieldError{"price-output", err.Error()}
	}
	return in, out, nil
}

// Flags registers the coordinator's flags with their defaults.
func (c *Coordinator) Flags(fs *flag.FlagSet) {
	configFlag(fs, &c.Config)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address for the buyer API and agents")
	fs.StringVar(&c.DataDir, "data-dir", "./.shareai", "directory of the SQLite database")
	fs.StringVar(&c.DB, "db", "", "database: a PostgreSQL URL (postgres://user@host:5432/db) instead of SQLite in --data-dir")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS certificate file (PEM); serve HTTPS when set with --tls-key")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "how long shutdown waits for streams in flight")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "how often agents send heartbeats")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 16<<20, "largest request body accepted")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", time.Minute, "the longest a request's body may take to arrive (then 408 and the connection closes); it never bounds an answer")
	fs.DurationVar(&c.StallTimeout, "stall-timeout", 30*time.Second, "the most a node may stay silent mid-answer before another node continues the answer")
	fs.DurationVar(&c.ProbeEvery, "probe-every", 10*time.Minute, "mean time between two canary probes of a node, at random times; probes are paid from the platform's fees")
	fs.BoolVar(&c.TrustNewNodes, "trust-new-nodes", false, "let new nodes serve without onboarding checks: only for a private network of your own machines")
	fs.IntVar(&c.MaxNodesPerAccount, "max-nodes-per-account", 256, "the most nodes one provider account may have connected at once; more are refused")
	metricsFlag(fs, &c.MetricsAddr)
	c.Trace.Flags(fs)
	c.Money.Flags(fs)
	c.Limits.Flags(fs)
	c.Capacity.Flags(fs)
	c.Log.Flags(fs)
}

// Validate checks the settings.
func (c *Coordinator) Validate() error {
	var errs []error
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
	if c.DrainTimeout < 0 {
		errs = append(errs, &FieldError{"drain-timeout", "must not be negative"})
	}
	if c.HeartbeatInterval < 100*time.Millisecond {
		errs = append(errs, &FieldError{"heartbeat-interval", "must be at least 100ms"})
	}
	if c.BodyTimeout < time.Second {
		errs = append(errs, &FieldError{"body-timeout", "must be at least 1s"})
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, &FieldError{"max-body-bytes", "must be at least 1024"})
	}
	errs = append(errs, validateMetricsAddr(c.MetricsAddr))
	errs = append(errs, c.Trace.Validate())
	errs = append(errs, c.Money.Validate())
	errs = append(errs, c.Limits.Validate())
	errs = append(errs, c.Capacity.Validate())
	return errors.Join(errs...)
}

// DefaultMetricsAddr is where the coordinator serves its Prometheus metrics: a port of its own,
// on loopback, so that they are not served to the public with the API.
const DefaultMetricsAddr = "127.0.0.1:9464"

func metricsFlag(fs *flag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-addr", DefaultMetricsAddr, "address of the Prometheus metrics endpoint (/metrics); empty: none")
}

func validateMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &FieldError{"metrics-addr", "want host:port, such as " + DefaultMetricsAddr + ", or empty for none"}
	}
	return nil
}

// ValidateEngine checks an engine choice and its upstream.
func ValidateEngine(engine, upstream string) error {
	switch engine {
	case "sim":
		return nil
	case "ollama":
		if upstream != "" && !isHTTPURL(upstream) {
			return &FieldError{"upstream", "the ollama engine's URL looks like http://127.0.0.1:11434"}
		}
		return nil
	case "openai":
		if !isHTTPURL(upstream) {
			return &FieldError{"upstream", "the openai engine needs the server's base URL, e.g. http://127.0.0.1:8000/v1"}
		}
		return nil
	}
	return &FieldError{"engine", fmt.Sprintf("%q is not ollama, openai or sim", engine)}
}

// Up configures `shareai up`.
type Up struct {
	Config         string // the YAML file read, if any
	Addr           string
	DataDir        string
	Providers      int
	Engine         string
	Upstream       string
	UpstreamAPIKey string
	SimTTFT        time.Duration
	SimTPS         float64
	MaxConcurrent  int
	Ask            Ask
	Money          Money
	Credit         string // USD given to the local buyer on first start
	Chaos          string // drop=P,stall=P
	MetricsAddr    string // where the coordinator's /metrics is served; empty: nowhere
	Trace          Trace
	Limits         Limits
	Capacity       Capacity
	Log            Log
}

// Flags registers the flags of `shareai up`.
func (u *Up) Flags(fs *flag.FlagSet) {
	configFlag(fs, &u.Config)
	fs.StringVar(&u.Addr, "addr", "127.0.0.1:8080", "coordinator listen address")
	fs.StringVar(&u.DataDir, "data-dir", "./.shareai", "directory for the database, keys and node keys")
	fs.IntVar(&u.Providers, "providers", 2, "number of provider agents to run")
	fs.StringVar(&u.Engine, "engine", "sim", "the agents' engine: sim (simulated GPU), ollama (Ollama's own API at --upstream) or openai (an OpenAI-compatible server)")
	fs.StringVar(&u.Upstream, "upstream", "", "openai engine: the server's base URL, e.g. http://127.0.0.1:11434/v1")
	fs.StringVar(&u.UpstreamAPIKey, "upstream-api-key", "", "openai engine: bearer key for the server")
	fs.DurationVar(&u.SimTTFT, "sim-ttft", 150*time.Millisecond, "sim engine: time to first token")
	fs.Float64Var(&u.SimTPS, "sim-tps", 60, "sim engine: tokens per second (0: no delay)")
	fs.IntVar(&u.MaxConcurrent, "max-concurrent", 8, "jobs each agent runs at once per model")
	fs.StringVar(&u.Credit, "credit", "100", "USD credited to the local buyer's account on first start")
	fs.StringVar(&u.Chaos, "chaos", "", "make the simulated nodes misbehave mid-answer on a share of jobs, to watch failover: drop=0.3,stall=0.1")
	metricsFlag(fs, &u.MetricsAddr)
	u.Trace.Flags(fs)
	u.Ask.Flags(fs)
	u.Money.Flags(fs)
	u.Limits.Flags(fs)
	u.Capacity.Flags(fs)
	u.Log.Flags(fs)
}

// Validate checks the settings.
func (u *Up) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(u.Addr); err != nil {
		errs = append(errs, &FieldError{"addr", "want host:port, such as 127.0.0.1:8080"})
	}
	if u.DataDir == "" {
		errs = append(errs, &FieldError{"data-dir", "must not be empty"})
	}
	errs = append(errs, validateMetricsAddr(u.MetricsAddr))
	if u.Providers < 1 || u.Providers > 1000 {
		errs = append(errs, &FieldError{"providers", "must be between 1 and 1000, got " + strconv.Itoa(u.Providers)})
	}
	errs = append(errs, ValidateEngine(u.Engine, u.Upstream))
	if u.MaxConcurrent < 1 {
		errs = append(errs, &FieldError{"max-concurrent", "must be at least 1"})
	}
	if u.SimTTFT < 0 || u.SimTPS < 0 {
		errs = append(errs, &FieldError{"sim-tps", "sim timings must not be negative"})
	}
	if _, _, err := u.Ask.Prices(); err != nil {
		errs = append(errs, err)
	}
	if c, err := money.ParseUSD(u.Credit); err != nil || c < 0 {
		errs = append(errs, &FieldError{"credit", "want an amount of USD such as 100"})
	}
	errs = append(errs, u.Trace.Validate())
	errs = append(errs, u.Money.Validate())
	errs = append(errs, u.Limits.Validate())
	errs = append(errs, u.Capacity.Validate())
	return errors.Join(errs...)
}
