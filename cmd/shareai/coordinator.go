package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

func runCoordinator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Coordinator
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	cfg.Flags(fs)
	if err := parse(fs, args, stderr, `Run the coordinator: the buyers' OpenAI-compatible API (/v1/...), the endpoint agents
connect to (/v1/agent/connect), and health checks (/healthz, /readyz). State lives in
SQLite in --data-dir, beside coordinator.key, the key receipts are countersigned with (its
public half: GET /v1/receipts/key). Create keys with 'shareai keys' on this machine.`); err != nil {
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
	fee, _ := cfg.Money.FeeBasisPoints()
	c := coordinator.New(coordinator.Config{
		Store: st, Log: log, DrainTimeout: cfg.DrainTimeout, HeartbeatInterval: cfg.HeartbeatInterval,
		MaxBodyBytes: cfg.MaxBodyBytes, TLS: tlsCfg,
		FeeBasisPoints: fee, SettlementDelay: cfg.Money.SettlementDelay, DefaultMaxTokens: cfg.Money.DefaultMaxTokens,
		StallTimeout: cfg.StallTimeout, ReceiptKey: key, ProbeEvery: cfg.ProbeEvery, TrustNewNodes: cfg.TrustNewNodes,
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	log.Info("coordinator listening", "url", scheme+"://"+ln.Addr().String(), "store", st.String())
	return c.Serve(ctx, ln)
}

// openStore opens the coordinator's database in dataDir, creating the directory if needed.
func openStore(ctx context.Context, dataDir string) (*sqlstore.DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return sqlstore.Open(ctx, filepath.Join(dataDir, "coordinator.db"))
}
