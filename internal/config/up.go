package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/money"
)

// Up configures `shareai up`.
type Up struct {
	Config         string // the YAML file read, if any
	Engine         string
	Upstream       string
	UpstreamAPIKey string
	SimTTFT        time.Duration
	SimTPS         float64
	MetricsAddr    string // where the coordinator's /metrics is served; empty: nowhere
	// Net holds the network's settings, its coordinator's and its agents' included: Flags
	// binds each flag to the field it sets. Build adds the settings written as text (Pricing,
	// Ask, Credit, Chaos); cmd/shareai adds the engines, the logger and the tracer.
	Net     localnet.Config
	Pricing Pricing
	Ask     Ask
	Credit  string // USD given to the local buyer on first start
	Chaos   string // drop=P,stall=P
	Trace   Trace
	Log     Log
}

// Flags registers the flags of `shareai up`.
func (u *Up) Flags(fs *flag.FlagSet) {
	configFlag(fs, &u.Config)
	fs.StringVar(&u.Net.Addr, "addr", "127.0.0.1:8080", "coordinator listen address")
	fs.StringVar(&u.Net.DataDir, "data-dir", "./.shareai", "directory for the database, keys and node keys")
	fs.IntVar(&u.Net.Providers, "providers", 2, "number of provider agents to run")
	fs.IntVar(&u.Net.Replicas, "replicas", 1, "number of coordinators, replicas of one network on consecutive ports from --addr's, sharing the database and an embedded NATS server (or --nats); the providers are spread over them")
	fs.StringVar(&u.Net.NATS, "nats", "", "NATS servers (JetStream, 2.9 or newer) for the replicas instead of an embedded one, comma-separated: nats://127.0.0.1:4222")
	fs.StringVar(&u.Net.DB, "db", "", "database: a PostgreSQL URL (postgres://user@host:5432/db) instead of SQLite in --data-dir")
	fs.StringVar(&u.Engine, "engine", "sim", "the agents' engine: sim (simulated GPU), ollama (Ollama's own API at --upstream) or openai (an OpenAI-compatible server)")
	fs.StringVar(&u.Upstream, "upstream", "", "openai engine: the server's base URL, e.g. http://127.0.0.1:11434/v1")
	fs.StringVar(&u.UpstreamAPIKey, "upstream-api-key", "", "openai engine: bearer key for the server")
	fs.DurationVar(&u.SimTTFT, "sim-ttft", 150*time.Millisecond, "sim engine: time to first token")
	fs.Float64Var(&u.SimTPS, "sim-tps", 60, "sim engine: tokens per second (0: no delay)")
	fs.IntVar(&u.Net.Agent.MaxConcurrent, "max-concurrent", 8, "jobs each agent runs at once per model")
	fs.StringVar(&u.Credit, "credit", "100", "USD credited to the local buyer's account on first start")
	fs.StringVar(&u.Chaos, "chaos", "", "make the simulated nodes misbehave mid-answer on a share of jobs, to watch failover: drop=0.3,stall=0.1")
	metricsFlag(fs, &u.MetricsAddr)
	u.Trace.Flags(fs)
	u.Ask.Flags(fs)
	marketFlags(fs, &u.Net.Coordinator, &u.Pricing)
	u.Log.Flags(fs)
}

// Validate checks the settings.
func (u *Up) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(u.Net.Addr); err != nil {
		errs = append(errs, &FieldError{"addr", "want host:port, such as 127.0.0.1:8080"})
	}
	if u.Net.DataDir == "" {
		errs = append(errs, &FieldError{"data-dir", "must not be empty"})
	}
	errs = append(errs, validateMetricsAddr(u.MetricsAddr))
	if u.Net.Providers < 1 || u.Net.Providers > 1000 {
		errs = append(errs, &FieldError{"providers", "must be between 1 and 1000, got " + strconv.Itoa(u.Net.Providers)})
	}
	if u.Net.Replicas < 1 || u.Net.Replicas > 64 {
		errs = append(errs, &FieldError{"replicas", "must be between 1 and 64, got " + strconv.Itoa(u.Net.Replicas)})
	}
	errs = append(errs, validateNATS(u.Net.NATS, ""))
	if u.Net.DB != "" && !strings.HasPrefix(u.Net.DB, "postgres://") && !strings.HasPrefix(u.Net.DB, "postgresql://") {
		errs = append(errs, &FieldError{"db", "want a PostgreSQL URL such as postgres://user@host:5432/shareai"})
	}
	errs = append(errs, ValidateEngine(u.Engine, u.Upstream))
	if u.Net.Agent.MaxConcurrent < 1 {
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
	errs = append(errs, validateMarket(&u.Net.Coordinator, &u.Pricing))
	return errors.Join(errs...)
}

// Build returns the network's configuration, with the settings written as text parsed in: the
// pricing, the agents' ask and chaos, the buyer's credit. Call it once Validate has passed.
func (u *Up) Build() (localnet.Config, error) {
	n := u.Net
	u.Pricing.apply(&n.Coordinator)
	n.Agent.InputPrice, n.Agent.OutputPrice, _ = u.Ask.Prices()
	n.Credit, _ = money.ParseUSD(u.Credit)
	chaos, err := agent.ParseChaos(u.Chaos)
	if err != nil {
		return n, fmt.Errorf("--chaos: %w", err)
	}
	n.Agent.Chaos = chaos
	return n, nil
}
