package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/money"
)

const benchAbout = `Load a network with chat completions and report throughput, time to first token, latency
percentiles, tokens per second and errors: -n requests (or --duration), -c at a time.

  shareai bench                                  # starts a network in this process, then loads it
  shareai bench --url http://127.0.0.1:8080 --key sk-… -n 5000 -c 50 --json

--url and --key default to OPENAI_BASE_URL and OPENAI_API_KEY, so bench works right after
pasting the exports 'shareai up' prints. Without a URL, bench starts a coordinator and
--providers simulated providers in this process (data in a temporary directory, removed
afterwards); they share this machine's CPUs with the load.

--hold measures the coordinator's memory per open stream: it opens -c streams at once against
a slow network, waits until each has its first token, reads the memory from --metrics (the
coordinator's Prometheus endpoint), and closes them.

--batch N runs one batch of N lines through the Batch API (/v1/files, /v1/batches) and
reports its throughput and whether every line was answered exactly once; the live load (-c,
-n or --duration, streamed) runs first alone and then again beside the batch, so that the
report shows what the batch costs live requests' time to first token. It also reads the
coordinator's slot-time from --metrics (without --url, the network's own) and reports the
share of idle slot-time the batch filled; --sim-windows gives the simulated providers
availability windows, so that the run has some.

--compare URL sends the same load (-n, -c, --stream, --max-tokens) straight to an
OpenAI-compatible upstream, then through a network whose providers run the openai engine on
it, and reports each path's CPU per request, requests per second and latency, their ratio
and what the network added. Without --url the network runs in this process, and its CPU is
this process's during the network run less what the direct run used (the client's, and the
mock's); with --url, --metrics names its processes' Prometheus endpoints. --compare mock runs
a mock upstream in this process that answers 20 chunks at once; --mock-upstream ADDR serves
it alone, for a network elsewhere. --baseline FILE holds the figure to the one recorded for
this machine class; --against BIN holds it instead to what another build of shareai (the
baseline's commit) adds on the same load in the same run, each try running that build first
(scripts/bench-regress.sh does both). --warm N first sends N requests through the network,
not counted, so that its store holds what a running coordinator's does (an empty store's
indexes fit in a few pages; at 3,000 requests a second a coordinator's holds 100,000 after
half a minute).

A progress bar goes to stderr when it is a terminal; the report goes to stdout. Ctrl-C stops
early and reports what finished.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Bench
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.Flags(fs)
	cfg.BindEnv(fs, os.Getenv)
	if err := parse(fs, args, stderr, benchAbout); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	switch {
	case cfg.MockUpstream != "":
		return serveMockUpstream(ctx, cfg.MockUpstream, stderr)
	case cfg.Compare != "":
		return runCompare(ctx, &cfg, stdout, stderr)
	}
	base, key, network, metricsURL := cfg.URL, cfg.APIKey, "", ""
	if base == "" {
		if cfg.Hold && !isSet(fs, "sim-tps") {
			cfg.SimTPS = 1 // streams that stay open while they are counted
		}
		n, err := startBenchNet(ctx, &cfg, stderr)
		if err != nil {
			return err
		}
		defer n.close()
		base, key, network, metricsURL = n.URL, n.APIKey, n.about, n.metricsURL
		fmt.Fprintf(stderr, "Started a network in this process: %s.\n", network)
	}
	baseURL, err := bench.BaseURL(base)
	if err != nil {
		return &config.FieldError{Field: "url", Msg: err.Error()}
	}
	client := bench.NewClient(cfg.Concurrency)
	if cfg.H2C {
		client = bench.NewH2CClient()
	}
	model := cfg.Model
	if model == "" {
		if model, err = bench.FirstModel(ctx, client, baseURL, key); err != nil {
			return err
		}
	}
	progress := bench.NewBar(stderr, isTerminal(stderr))
	var rep *bench.Report
	switch {
	case cfg.Batch > 0:
		rep, err = bench.RunBatch(ctx, bench.BatchConfig{
			BaseURL: baseURL, APIKey: key, Model: model, Lines: cfg.Batch, MaxTokens: cfg.MaxTokens, Prompt: cfg.Prompt,
			MetricsURL: cmp.Or(cfg.Metrics, metricsURL),
			Live:       bench.Config{Requests: cfg.Count(), Duration: cfg.Duration, Concurrency: cfg.Concurrency, Stream: true, Timeout: cfg.Timeout},
			Client:     client, Progress: progress,
		})
	case cfg.Hold:
		rep, err = bench.RunHold(ctx, bench.HoldConfig{
			BaseURL: baseURL, APIKey: key, Model: model, Streams: cfg.Concurrency, MaxTokens: cfg.MaxTokens,
			Prompt: cfg.Prompt, MetricsURL: cfg.Metrics, Settle: cfg.Settle, Timeout: cfg.Timeout,
			Client: client, Progress: progress,
		})
	default:
		rep, err = bench.Run(ctx, bench.Config{
			BaseURL: baseURL, APIKey: key, Model: model, Requests: cfg.Count(), Duration: cfg.Duration,
			Concurrency: cfg.Concurrency, Stream: cfg.Stream, MaxTokens: cfg.MaxTokens, Prompt: cfg.Prompt,
			Timeout: cfg.Timeout, Client: client, Progress: progress,
		})
	}
	if err != nil {
		return err
	}
	rep.Network = network
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if b := rep.Batch; b != nil && (b.Status != "completed" || b.Duplicates+b.Missing > 0) {
		return fmt.Errorf("batch %s ended %s, with %d duplicate and %d missing answers", b.ID, b.Status, b.Duplicates, b.Missing)
	}
	if rep.OK == 0 && rep.Failed > 0 {
		return errors.New("every request failed")
	}
	return nil
}

// benchNet is the network bench starts when it is given no URL.
type benchNet struct {
	*localnet.Net
	dir        string
	about      string
	metricsURL string // the coordinator's metrics, served on loopback
	metrics    *http.Server
}

func (n *benchNet) close() {
	n.metrics.Close()
	n.Close()
	os.RemoveAll(n.dir)
}

// startBenchNet starts a coordinator and simulated providers in this process, on a free
// loopback port, with a temporary data directory.
func startBenchNet(ctx context.Context, cfg *config.Bench, stderr io.Writer) (*benchNet, error) {
	return startNet(ctx, cfg, "", stderr)
}

// startNet starts a coordinator and providers in this process, on a free loopback port,
// with a temporary data directory: simulated providers, or with upstream set, providers on
// the openai engine at that base URL.
func startNet(ctx context.Context, cfg *config.Bench, upstream string, stderr io.Writer) (*benchNet, error) {
	dir, err := os.MkdirTemp("", "shareai-bench-")
	if err != nil {
		return nil, err
	}
	slots := cfg.MaxConcurrent
	if slots == 0 {
		slots = cfg.Concurrency
	}
	nc := localnet.Config{DataDir: dir, Addr: "127.0.0.1:0", Providers: cfg.Providers, Credit: 1_000_000 * money.USD,
		NewEngine: func(int) (engine.Engine, error) {
			if upstream != "" {
				return newEngine("openai", upstream, "", "", nil, 0, 0)
			}
			return sim.New(sim.Config{TTFT: cfg.SimTTFT, TokensPerSecond: cfg.SimTPS}), nil
		},
	}
	// Prices and fee as `up` has them, so that requests are held and billed.
	nc.Agent.MaxConcurrent, nc.Agent.Version = slots, version
	nc.Agent.InputPrice, nc.Agent.OutputPrice = 50_000_000, 100_000_000
	nc.Coordinator.Ledger.FeeBasisPoints = 500
	nc.Coordinator.Fleet.TrustNewNodes = true
	nc.Coordinator.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	windows := ""
	if w := cfg.SimWindows; w > 0 {
		nc.EachAgent = func(i int, a *agent.Config) {
			a.Schedule, a.CheckEvery = alternating{window: w, phase: i % 2}, min(w/20, time.Second)
		}
		windows = fmt.Sprintf(", each open one %s window in two", w)
	}
	n, err := localnet.Start(ctx, nc)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start a network: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	metricsSrv := &http.Server{Handler: n.Coordinator().MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go metricsSrv.Serve(ln)
	speed := fmt.Sprintf("%g tokens/s", cfg.SimTPS)
	if cfg.SimTPS == 0 {
		speed = "no delay"
	}
	about := fmt.Sprintf("coordinator at %s, %d simulated providers (%d jobs at once each, first token after %s, then %s%s)",
		n.URL, cfg.Providers, slots, cfg.SimTTFT, speed, windows)
	if upstream != "" {
		about = fmt.Sprintf("coordinator at %s, %d providers on the openai engine at %s (%d jobs at once each), in this process",
			n.URL, cfg.Providers, upstream, slots)
	}
	return &benchNet{Net: n, dir: dir, about: about, metricsURL: "http://" + ln.Addr().String() + "/metrics", metrics: metricsSrv}, nil
}

// runCompare runs compare mode: the load straight to the upstream, then through a network
// on it, and the comparison held to the baseline, when given.
func runCompare(ctx context.Context, cfg *config.Bench, stdout, stderr io.Writer) error {
	upstream, upstreamAbout := cfg.Compare, "the upstream"
	mock := cfg.Compare == config.CompareMock
	if mock {
		srv, addr, err := listenMock()
		if err != nil {
			return err
		}
		defer srv.Close()
		upstream, upstreamAbout = "http://"+addr, fmt.Sprintf("the mock upstream, in this process (%d chunks, at once)", bench.MockChunks)
	}
	upstream, err := bench.BaseURL(upstream)
	if err != nil {
		return &config.FieldError{Field: "compare", Msg: err.Error()}
	}
	var baseline *bench.Baseline
	if cfg.Baseline != "" {
		if baseline, err = bench.LoadBaseline(cfg.Baseline); err != nil {
			return err
		}
	}
	client := bench.NewClient(cfg.Concurrency)
	if cfg.H2C {
		client = bench.NewH2CClient()
	}
	base, key, about, providers := cfg.URL, cfg.APIKey, "", 0
	var settle func(context.Context) error
	if base == "" {
		n, err := startNet(ctx, cfg, upstream, stderr)
		if err != nil {
			return err
		}
		defer n.close()
		base, key, about, providers = n.URL, n.APIKey, n.about, cfg.Providers
		settle = n.Coordinator().Ledger.Flush
		fmt.Fprintf(stderr, "Started a network in this process: %s.\n", about)
	} else {
		about = "the network at " + base
	}
	network, err := bench.BaseURL(base)
	if err != nil {
		return &config.FieldError{Field: "url", Msg: err.Error()}
	}
	direct := bench.Target{BaseURL: upstream, Model: cfg.Model, About: upstreamAbout}
	via := bench.Target{BaseURL: network, APIKey: key, Model: cfg.Model, About: about}
	for _, t := range []*bench.Target{&direct, &via} {
		if t.Model == "" {
			if t.Model, err = bench.FirstModel(ctx, client, t.BaseURL, t.APIKey); err != nil {
				return fmt.Errorf("%s: %w", t.BaseURL, err)
			}
		}
	}
	cc := bench.CompareConfig{
		Load: bench.Config{Requests: cfg.Count(), Concurrency: cfg.Concurrency, Stream: cfg.Stream, MaxTokens: cfg.MaxTokens,
			Prompt: cfg.Prompt, Timeout: cfg.Timeout},
		Direct: direct, Network: via, Tries: cfg.Tries, UpstreamMetrics: cfg.UpstreamMetrics, UpstreamInProcess: mock, Settle: settle,
		Client: client, Progress: bench.NewBar(stderr, isTerminal(stderr)),
		Starting: func(path string, try int) {
			if cfg.Tries > 1 {
				fmt.Fprintf(stderr, "%s, try %d of %d:\n", path, try, cfg.Tries)
			} else {
				fmt.Fprintf(stderr, "%s:\n", path)
			}
		},
	}
	if cfg.URL != "" {
		cc.NetworkMetrics = cfg.MetricsURLs()
	}
	if cfg.Warm > 0 {
		fmt.Fprintf(stderr, "network, warm-up of %d requests:\n", cfg.Warm)
		if err := cc.WarmUp(ctx, cfg.Warm); err != nil {
			return err
		}
	}
	var c *bench.Comparison
	if cfg.Against != "" {
		if c, err = compareAgainst(ctx, cfg, cc, providers, stderr); err != nil {
			return err
		}
	} else {
		if baseline != nil && !cfg.UpdateBaseline {
			cc.Enough = func(best *bench.Comparison) bool {
				best.Providers, best.Warm = providers, cfg.Warm
				return !bench.Check(baseline, best, bench.Tolerance).Failed()
			}
		}
		if c, err = bench.Compare(ctx, cc); err != nil {
			return err
		}
		c.Providers, c.Warm = providers, cfg.Warm
	}
	if baseline != nil {
		switch {
		case cfg.UpdateBaseline:
			if err := recordBaseline(baseline, cfg.Baseline, c, stderr); err != nil {
				return err
			}
		case c.Check == nil: // with --against, the check is against the reference build
			c.Check = bench.Check(baseline, c, bench.Tolerance)
		}
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(c)
	} else {
		err = c.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if c.Check != nil && c.Check.Failed() {
		against := cmp.Or(cfg.Against, cfg.Baseline)
		return fmt.Errorf("the network's CPU per request regressed by %.0f%%, more than %.0f%%, against %s", 100*c.Check.Change, 100*bench.Tolerance, against)
	}
	return nil
}

// recordBaseline records c's figures in the baseline file at path, with the commit this
// binary was built from, so that later checks can build it and run it beside theirs.
func recordBaseline(b *bench.Baseline, path string, c *bench.Comparison, stderr io.Writer) error {
	b.Record(c, time.Now())
	if b.About == "" {
		b.About = baselineAbout
	}
	switch rev, modified := bench.BuildRevision(); {
	case rev == "":
		b.Commit = ""
		fmt.Fprintf(stderr, "This binary names no commit (go run, or built outside a git checkout): checks will hold later builds to these figures as recorded, not to a reference build run beside them.\n")
	case modified:
		b.Commit = ""
		fmt.Fprintf(stderr, "This binary was built with uncommitted changes, so no commit builds what was measured: checks will hold later builds to these figures as recorded. Commit the changes and record again to name a reference build.\n")
	default:
		b.Commit = rev
	}
	if err := b.Save(path); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Recorded in %s for %q, %q: the network added %.0f µs of CPU per request.\n", path, c.Machine, c.Scenario(), c.AddedCPU)
	return nil
}

// compareAgainst runs cfg.Tries tries of the comparison cc, each first through the reference
// build cfg.Against (a shareai binary, which starts its own network) and then through this
// one, and holds this build's best try to the reference's best (bench.CheckAgainst). The
// tries stop at the first within the tolerance: a busy machine only ever adds.
func compareAgainst(ctx context.Context, cfg *config.Bench, cc bench.CompareConfig, providers int, stderr io.Writer) (*bench.Comparison, error) {
	about := "the reference build " + cfg.Against
	var best, ref *bench.Comparison
	var tries, refTries []float64
	for try := 1; try <= cfg.Tries; try++ {
		fmt.Fprintf(stderr, "%s, try %d of %d:\n", about, try, cfg.Tries)
		r, err := runReference(ctx, cfg, providers)
		if err != nil {
			return nil, fmt.Errorf("--against %s: %w", cfg.Against, err)
		}
		refTries = append(refTries, r.AddedCPU)
		if ref == nil || r.AddedCPU < ref.AddedCPU {
			ref = r
		}
		cc.Tries, cc.Enough = 1, nil
		cc.Starting = func(path string, _ int) { fmt.Fprintf(stderr, "this build, %s, try %d of %d:\n", path, try, cfg.Tries) }
		c, err := bench.Compare(ctx, cc)
		if err != nil {
			return nil, err
		}
		c.Providers, c.Warm = providers, cfg.Warm
		tries = append(tries, c.AddedCPU)
		if best == nil || c.AddedCPU < best.AddedCPU {
			c.Try, best = try, c
		}
		if !bench.CheckAgainst(ref, about, best, bench.Tolerance).Failed() {
			break
		}
	}
	best.Tries = tries
	best.Check = bench.CheckAgainst(ref, about, best, bench.Tolerance)
	added := make([]string, len(refTries))
	for i, v := range refTries {
		added[i] = fmt.Sprintf("%.0f", v)
	}
	fmt.Fprintf(stderr, "%s: the network added %s µs of CPU per request in its tries\n", about, strings.Join(added, ", "))
	return best, nil
}

// runReference runs the reference build's comparison of the same load (one try, its JSON
// report) and returns it, refusing one of another load.
func runReference(ctx context.Context, cfg *config.Bench, providers int) (*bench.Comparison, error) {
	args := []string{"bench", "--compare", config.CompareMock, "--json", "--tries", "1",
		"-n", strconv.Itoa(cfg.Count()), "-c", strconv.Itoa(cfg.Concurrency), "--stream=" + strconv.FormatBool(cfg.Stream),
		"--max-tokens", strconv.Itoa(cfg.MaxTokens), "--providers", strconv.Itoa(providers),
		"--prompt", cfg.Prompt, "--timeout", cfg.Timeout.String()}
	if cfg.Model != "" {
		args = append(args, "--model", cfg.Model)
	}
	if cfg.MaxConcurrent > 0 {
		args = append(args, "--max-concurrent", strconv.Itoa(cfg.MaxConcurrent))
	}
	if cfg.H2C {
		args = append(args, "--h2c")
	}
	if cfg.Warm > 0 { // a build from before --warm refuses it: the loads would differ
		args = append(args, "--warm", strconv.Itoa(cfg.Warm))
	}
	cmd := exec.CommandContext(ctx, cfg.Against, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { // its own network, as this one's
		return strings.HasPrefix(kv, "OPENAI_BASE_URL=") || strings.HasPrefix(kv, "OPENAI_API_KEY=")
	})
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, lastLines(errb.String(), 5))
	}
	var c bench.Comparison
	if err := json.Unmarshal(out, &c); err != nil || c.Direct == nil || c.Network == nil {
		return nil, fmt.Errorf("its report is not a comparison (%v): %.200q", err, out)
	}
	want := bench.Comparison{Stream: cfg.Stream, Concurrency: cfg.Concurrency, Requests: cfg.Count(), MaxTokens: cfg.MaxTokens, Providers: providers, Warm: cfg.Warm}
	if c.Scenario() != want.Scenario() {
		return nil, fmt.Errorf("it ran %q, not %q", c.Scenario(), want.Scenario())
	}
	return &c, nil
}

// lastLines is the last n lines of s, for an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// baselineAbout is the note a baseline file that bench creates starts with.
const baselineAbout = "CPU per request that `shareai bench --compare mock` measured, by machine class and load: " +
	"what the network (coordinator + agents, in one process as `shareai up` runs them) added over calling the mock upstream directly. " +
	"scripts/bench-regress.sh builds the commit named here and fails when a build adds more than 25% more than it on the same load in the same run (more than 25% more than these figures where that commit cannot be built); scripts/bench-regress.sh --update records this build's figures and commit."

// listenMock serves the mock upstream on a free loopback port.
func listenMock() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: bench.Mock(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// serveMockUpstream serves the mock upstream on addr, and this process's metrics at
// /metrics, until ctx is done.
func serveMockUpstream(ctx context.Context, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &config.FieldError{Field: "mock-upstream", Msg: err.Error()}
	}
	mux := http.NewServeMux()
	mux.Handle("/", bench.Mock())
	mux.Handle("GET /metrics", metrics.NewRegistry().Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "Mock upstream at http://%s/v1 (model %s, %d chunks at once), its process metrics at http://%s/metrics. Ctrl-C stops it.\n",
		ln.Addr(), bench.MockModel, bench.MockChunks, ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// alternating is the availability of a simulated provider of --sim-windows: open one window
// in two, those of phase 1 while those of phase 0 are closed.
type alternating struct {
	window time.Duration
	phase  int
}

func (a alternating) Open(t time.Time) bool {
	return (int(t.UnixNano()/int64(a.window))+a.phase)%2 == 0
}

func (a alternating) String() string { return fmt.Sprintf("open one %s window in two", a.window) }

// isTerminal reports whether w is a terminal, where a progress bar can redraw its line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
