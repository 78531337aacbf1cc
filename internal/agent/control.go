package agent

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// The control API lets the node's owner pause and resume it while it runs (`shareai provider
// pause|resume|status`). It listens on a loopback address only, and every request carries the
// token kept in the data directory, so that only a user who can read that directory controls
// the node.

// controlTokenFile holds the control API's token in the data directory.
const controlTokenFile = "control.token"

// Status is what the control API's GET /v1/status says of the node.
type Status struct {
	NodeID    string `json:"node_id"`
	Connected bool   `json:"connected"`
	// Coordinator is the base URL of the coordinator the node is connected to, one of those
	// it was given; "" while it is not connected.
	Coordinator string              `json:"coordinator,omitempty"`
	Paused      string              `json:"paused,omitempty"` // why the node takes no new jobs
	Running     int                 `json:"running"`
	Windows     string              `json:"windows,omitempty"`
	Timezone    string              `json:"timezone,omitempty"`
	Telemetry   *protocol.Telemetry `json:"telemetry,omitempty"`
	// Drain is how long running jobs may go on once the node stops taking new ones, such as
	// "10m0s".
	Drain string `json:"drain,omitempty"`
	// Changed, in the answer to POST /v1/pause or /v1/resume, says whether it changed the
	// owner's pause: false when the owner had already paused the node, or had not paused it.
	// Absent from an older agent's answer.
	Changed *bool `json:"changed,omitempty"`
}

// Status returns the node's state now.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Status{NodeID: a.nodeID, Connected: a.conn != nil, Coordinator: a.coord, Paused: a.paused, Running: a.running,
		Windows: a.cfg.Windows, Timezone: a.cfg.Timezone, Telemetry: a.telemetry, Drain: a.cfg.Drain.String()}
}

// ownerPause pauses (pause true) or resumes the node for its owner, and returns its state then,
// saying whether that changed the owner's pause. The caller serializes the calls.
func (a *Agent) ownerPause(pause bool) Status {
	a.mu.Lock()
	changed := a.ownerPaused != pause
	a.mu.Unlock()
	if pause {
		a.Pause()
	} else {
		a.Resume()
	}
	st := a.Status()
	st.Changed = &changed
	return st
}

// MetricsHandler serves the agent's Prometheus metrics, as the control API does at /metrics.
func (a *Agent) MetricsHandler() http.Handler { return a.cfg.Metrics.Handler() }

// ServeControl serves the control API on ln, which listens on a loopback address, until ctx
// is done.
func (a *Agent) ServeControl(ctx context.Context, ln net.Listener) error {
	token, err := controlToken(a.cfg.DataDir, true)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) { writeStatus(w, a.Status()) })
	var pauseMu sync.Mutex // one pause or resume at a time, so that each says truly what it changed
	for path, pause := range map[string]bool{"POST /v1/pause": true, "POST /v1/resume": false} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			pauseMu.Lock()
			st := a.ownerPause(pause)
			pauseMu.Unlock()
			writeStatus(w, st)
		})
	}
	// Metrics are read-only and the address is loopback: Prometheus scrapes them without the
	// token.
	root := http.NewServeMux()
	root.Handle("GET /metrics", a.cfg.Metrics.Handler())
	root.Handle("/", requireToken(token, mux))
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	a.log.Info("control API listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("control API: %w", err)
	}
	return nil
}

func writeStatus(w http.ResponseWriter, s Status) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s)
}

func requireToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if len(token) < minTokenLen || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			http.Error(w, "the control token in the node's data directory is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// controlToken reads the control token from the data directory, making one first if create
// says so.
// A token shorter than minTokenLen (an empty or truncated file) is never accepted: it is made
// again.
func controlToken(dataDir string, create bool) (string, error) {
	path := filepath.Join(dataDir, controlTokenFile)
	b, err := os.ReadFile(path)
	if token := strings.TrimSpace(string(b)); err == nil && len(token) >= minTokenLen {
		return token, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("control token: %w", err)
	}
	if !create {
		return "", fmt.Errorf("control token: %s is missing or damaged; the agent makes it again when it starts", path)
	}
	var raw [24]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("control token: %w", err)
	}
	// Write then rename, so that a crash never leaves an empty token behind.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("control token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("control token: %w", err)
	}
	return token, nil
}

// minTokenLen is the shortest control token accepted: ours are 48 hex digits.
const minTokenLen = 32

// Control asks a running agent's control API at addr, with the token in dataDir: action is
// "status", "pause" or "resume".
func Control(ctx context.Context, addr, dataDir, action string) (Status, error) {
	var st Status
	token, err := controlToken(dataDir, false)
	if err != nil {
		return st, fmt.Errorf("%w (is --data-dir the running agent's?)", err)
	}
	method := http.MethodPost
	if action == "status" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/v1/"+action, nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("no agent answers at %s (is it running, with --control %s?): %w", addr, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("the agent at %s answered %s", addr, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("the agent's answer: %w", err)
	}
	return st, nil
}
