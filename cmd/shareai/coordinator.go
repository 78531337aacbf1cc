package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

func runCoordinator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Coordinator
	fs, check := coordinatorFlags(&cfg)
	if err := parseFile(fs, args, stderr, `Run the coordinator: the buyers' OpenAI-compatible API (/v1/...), the endpoint agents
connect to (/v1/agent/connect), and health checks (/healthz, /readyz). State lives in
SQLite in --data-dir, beside coordinator.key, the key receipts are countersigned with (its
public half: GET /v1/receipts/key), or in PostgreSQL (--db). Create keys with 'shareai keys'
on this machine. Several coordinators with the same --db and --nats are replicas of one
network, behind a load balancer: see "Running several coordinators" in the README.
Settings come from the YAML file --config (keys are the flags' names: addr: 0.0.0.0:8080),
then the environment, then these flags; see docs/configuration.md.`); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if *check {
		return printSettings(stdout, fs)
	}
	var st *sqlstore.DB
	if cfg.DB != "" {
		st, err = sqlstore.Open(ctx, cfg.DB)
	} else {
		st, err = openStore(ctx, cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	var key ed25519.PrivateKey // nil without a data dir: the coordinator makes one and warns
	if cfg.DataDir != "" {
		if key, err = coordinator.LoadOrCreateKey(cfg.DataDir); err != nil {
			return err
		}
	}
	tp, stopTracing, err := startTracing(cfg.Trace, "shareai-coordinator", log)
	if err != nil {
		return err
	}
	defer stopTracing() // after Serve has drained the requests in flight
	cc := cfg.Build()
	cc.Store, cc.Log, cc.TLS, cc.ReceiptKey, cc.TracerProvider = st, log, tlsCfg, key, tp
	if cc.Replica == "" {
		cc.Replica = config.NewReplicaName()
	}
	if cfg.NATS != "" {
		b, err := bus.Connect(ctx, bus.Config{URL: cfg.NATS, Name: cc.Replica, Log: log})
		if err != nil {
			return err
		}
		defer b.Close() // after Serve has drained the requests in flight
		cc.Bus = b
		log.Info("replica connected to NATS", "replica", cc.Replica, "server", b.Conn.ConnectedUrlRedacted())
	}
	c := coordinator.New(cc)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	log.Info("coordinator listening", "url", scheme+"://"+ln.Addr().String(), "store", st.String())
	if err := serveMetrics(ctx, cfg.MetricsAddr, c.MetricsHandler(), log, true); err != nil {
		ln.Close()
		return err
	}
	return c.Serve(ctx, ln)
}

// serveMetrics serves Prometheus metrics at addr (none when empty) until ctx is done. When
// addr cannot be listened on, it fails if required, else it warns and serves none.
func serveMetrics(ctx context.Context, addr string, h http.Handler, log *slog.Logger, required bool) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && !required {
		log.Warn("no metrics endpoint: its address is taken (set --metrics-addr)", "addr", addr, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w (set another address, or --metrics-addr= for none)", err)
	}
	log.Info("metrics at http://" + ln.Addr().String() + "/metrics")
	go func() {
		if err := metrics.Serve(ctx, ln, h); err != nil {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	return nil
}

// coordinatorFlags is the coordinator's flag set: its settings, and --check-config.
func coordinatorFlags(cfg *config.Coordinator) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	cfg.Flags(fs)
	return fs, checkFlag(fs)
}

// openStore opens the coordinator's database in dataDir, creating the directory if needed.
func openStore(ctx context.Context, dataDir string) (*sqlstore.DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return sqlstore.Open(ctx, filepath.Join(dataDir, "coordinator.db"))
}
