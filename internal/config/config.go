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
	"strings"

	"github.com/shareai/shareai/internal/money"
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
	{"SHAREAI_NATS", "nats", "the NATS servers the coordinator replicas share, e.g. nats://nats-1:4222,nats://nats-2:4222 (default: none, a network of one coordinator)"},
	{"SHAREAI_REPLICA", "replica", "the coordinator's replica name among the network's replicas (default: rep_ and a random suffix)"},
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
var urlFlags = map[string]bool{"db": true, "otlp-endpoint": true, "nats": true}

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
		var parts []string // --nats is a list
		for u := range strings.SplitSeq(v, ",") {
			parts = append(parts, MaskURL(strings.TrimSpace(u)))
		}
		return strings.Join(parts, ",")
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
