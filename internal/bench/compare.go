package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// CompareConfig configures Compare: the same load sent straight to an upstream (an
// OpenAI-compatible engine), then through a network whose providers serve from it.
type CompareConfig struct {
	// Load is what each path gets: Requests, Concurrency, Stream, MaxTokens, Prompt and
	// Timeout. Its BaseURL, APIKey and Model are set from each path's Target; it must not
	// have a Duration, so that both paths serve as many requests.
	Load Config
	// Direct is the upstream itself; Network, the network in front of it.
	Direct, Network Target
	// Tries is how many times both paths are run, one after the other; the try whose
	// network added the least CPU per request is reported (a busy machine only ever adds).
	// Default 1.
	Tries int
	// Enough, if set, is told the best try so far after each try; true ends the tries.
	Enough func(*Comparison) bool
	// NetworkMetrics are the Prometheus endpoints of the processes that run the network
	// (process_cpu_seconds_total, summed), when it runs outside this process; empty: it runs
	// in this one, and this process's CPU counts it.
	NetworkMetrics []string
	// UpstreamMetrics, when set, is the upstream's Prometheus endpoint: its CPU is counted on
	// both paths, and reported as the upstream's own.
	UpstreamMetrics string
	// UpstreamInProcess says that the upstream runs in this process (the mock), so that the
	// report says its CPU is in this process's.
	UpstreamInProcess bool
	// Starting, if set, is told before each path's run (its warm-up, then its measured
	// requests): the path, PathDirect or PathNetwork, and the try, from 1.
	Starting func(path string, try int)
	// Client sends the load (default NewClient(Load.Concurrency)); Progress is told how each
	// measured run goes.
	Client   *http.Client
	Progress Progress
	// Settle, if set, is called before each reading of the network's CPU, after its warm-up and
	// after its run: the network in this process commits what its ledger holds back for a
	// group commit, so that the warm-up's settlements do not count in the run, and the run's,
	// whose commit could fall in the idle window that ends the reading, do.
	Settle func(context.Context) error
	// CPU reads this process's CPU time; default ProcessCPU.
	CPU func() (time.Duration, error)
	// Idle is the longest a run's CPU is read for after its last answer, until the
	// processes are idle again; default 5s.
	Idle time.Duration
}

// Target is one path of a comparison.
type Target struct {
	BaseURL, APIKey, Model string
	// About says what it is, for the report: "the mock upstream, in this process".
	About string
}

// Path names in a comparison, as Starting is told them.
const (
	PathDirect  = "direct"
	PathNetwork = "network"
)

// Comparison is what Compare measured: `shareai bench --compare --json` prints it. CPU is
// in microseconds per answered request, times in milliseconds.
type Comparison struct {
	Model       string `json:"model"` // the direct path's model; the network's is in its report
	Stream      bool   `json:"stream"`
	Concurrency int    `json:"concurrency"`
	MaxTokens   int    `json:"max_tokens"`
	Requests    int    `json:"requests"`            // per path and try
	Warm        int    `json:"warm,omitempty"`      // requests through the network before the first try (WarmUp)
	Providers   int    `json:"providers,omitempty"` // of the network this process started; 0: not started here
	Machine     string `json:"machine"`             // MachineClass
	// Method says how the CPU was counted.
	Method string `json:"method"`

	Direct  *PathRun `json:"direct"`
	Network *PathRun `json:"network"`
	// Ratio is Network.CPU / Direct.CPU.
	Ratio float64 `json:"ratio"`
	// AddedCPU is Network.CPU − Direct.CPU: what the coordinator and agents spent per request.
	AddedCPU float64 `json:"added_cpu_us"`
	// AddedLatency is the network's latency percentiles less the direct path's: p50 and p99;
	// AddedTTFT, the same of time to first token, for streams.
	AddedLatency Added  `json:"added_latency_ms"`
	AddedTTFT    *Added `json:"added_ttft_ms,omitempty"`
	// Try is the try reported, from 1; Tries, the AddedCPU of every try run, in order.
	Try   int       `json:"try"`
	Tries []float64 `json:"tries_added_cpu_us"`

	// Note, when set, says why the paths' figures may not compare: their answers differed in
	// length.
	Note string `json:"note,omitempty"`

	// Check is the comparison held to a baseline, when it was (Check).
	Check *Verdict `json:"check,omitempty"`
}

// Added is a difference of two percentiles' p50 and p99.
type Added struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// PathRun is one path's measured run.
type PathRun struct {
	URL   string `json:"url"`
	About string `json:"about"`
	// CPU is everything counted: ThisProcess + Upstream + Remote.
	CPU float64 `json:"cpu_us"`
	// ThisProcess is this process's CPU per request: the client's, and whatever else runs in
	// it (an in-process network, the mock).
	ThisProcess float64 `json:"this_process_cpu_us"`
	// Upstream is the upstream's own, read from CompareConfig.UpstreamMetrics; nil without.
	Upstream *float64 `json:"upstream_cpu_us,omitempty"`
	// Remote is the network's processes', read from CompareConfig.NetworkMetrics; nil when
	// the network runs in this process (and on the direct path).
	Remote *float64 `json:"network_processes_cpu_us,omitempty"`
	Report *Report  `json:"report"`
}

func (c *CompareConfig) validate() error {
	switch {
	case c.Direct.BaseURL == "" || c.Network.BaseURL == "":
		return errors.New("bench: a comparison needs a direct and a network URL")
	case c.Direct.Model == "" || c.Network.Model == "":
		return errors.New("bench: a comparison needs each path's model")
	case c.Load.Duration != 0:
		return errors.New("bench: a comparison sends a number of requests, not for a duration")
	case c.Load.Requests < 1:
		return errors.New("bench: a comparison needs at least one request")
	case c.Tries < 0:
		return errors.New("bench: tries must not be negative")
	}
	return nil
}

// Compare runs cfg.Load straight against the upstream, then through the network, Tries
// times, and reports the try whose network added the least CPU per request.
//
// A path's run starts with a warm-up of max(20, 2×Concurrency) requests, not counted, so
// that connections are open and caches full. Its CPU is then read before the first request
// and after the last answer, once the processes are idle again (at most Idle later): work
// left after the answers (settlement, receipts written behind) counts in the run that caused
// it, while what the processes use when idle does not. Every request must succeed: a comparison of runs that failed compares nothing.
func Compare(ctx context.Context, cfg CompareConfig) (*Comparison, error) {
	if err := cfg.Load.validateLoad(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Tries = max(cfg.Tries, 1)
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Load.Concurrency)
	}
	if cfg.CPU == nil {
		cfg.CPU = ProcessCPU
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	scraper := &http.Client{Timeout: 10 * time.Second}
	self := meter{read: func(context.Context) (time.Duration, error) { return cfg.CPU() }}
	var upstream []meter
	if u := cfg.UpstreamMetrics; u != "" {
		upstream = []meter{{read: func(ctx context.Context) (time.Duration, error) { return ScrapeCPU(ctx, scraper, u) }}}
	}
	var remote []meter
	for _, u := range cfg.NetworkMetrics {
		remote = append(remote, meter{read: func(ctx context.Context) (time.Duration, error) { return ScrapeCPU(ctx, scraper, u) }})
	}
	var best *Comparison
	var tries []float64
	for try := 1; try <= cfg.Tries; try++ {
		if cfg.Starting != nil {
			cfg.Starting(PathDirect, try)
		}
		direct, err := cfg.measure(ctx, cfg.Direct, self, upstream, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("direct: %w", err)
		}
		if cfg.Starting != nil {
			cfg.Starting(PathNetwork, try)
		}
		network, err := cfg.measure(ctx, cfg.Network, self, upstream, remote, cfg.Settle)
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		c := newComparison(&cfg, direct, network)
		tries = append(tries, c.AddedCPU)
		if best == nil || c.AddedCPU < best.AddedCPU {
			c.Try, best = try, c
		}
		if cfg.Enough != nil && try < cfg.Tries && cfg.Enough(best) {
			break
		}
	}
	best.Tries = tries
	return best, nil
}

// WarmUp sends n requests of cfg's load through the network, not counted, with cfg's client
// and progress: a comparison run after it measures a network whose store has settled that
// many, as a running coordinator's has. An empty store's indexes fit in a few pages; a grown
// one's cost a page for each row whose key comes at random (as receipts' random job ids did).
// Every request must succeed.
func (cfg *CompareConfig) WarmUp(ctx context.Context, n int) error {
	load := cfg.Load
	load.BaseURL, load.APIKey, load.Model, load.Client = cfg.Network.BaseURL, cfg.Network.APIKey, cfg.Network.Model, cfg.Client
	load.Requests, load.Progress = n, cfg.Progress
	if load.Client == nil {
		load.Client = NewClient(load.Concurrency)
	}
	rep, err := Run(ctx, load)
	if err != nil {
		return fmt.Errorf("network warm-up: %w", err)
	}
	if err := complete(ctx, rep); err != nil {
		return fmt.Errorf("network warm-up: %w", err)
	}
	return nil
}

// validateLoad checks the load as Run would, without its URL and model.
func (c Config) validateLoad() error {
	c.BaseURL, c.Model = "-", "-"
	return c.validate()
}

// meter reads the CPU some process has used so far.
type meter struct {
	read func(context.Context) (time.Duration, error)
}

// idleWindow and idleCPU define idle: at most idleCPU used over idleWindow by each process
// measured (5% of one CPU; the process collector counts in 10ms ticks).
const (
	idleWindow = 200 * time.Millisecond
	idleCPU    = 10 * time.Millisecond
)

// readAll reads every meter.
func readAll(ctx context.Context, ms []meter) ([]time.Duration, error) {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		v, err := m.read(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// measure runs the load against t, after a warm-up, and reads the meters around it: self
// (this process), upstream and remote (the network's processes, outside this one); settle, if
// set, before each reading, so that the warm-up's settlements are not the run's, and the
// run's are.
func (cfg *CompareConfig) measure(ctx context.Context, t Target, self meter, upstream, remote []meter, settle func(context.Context) error) (*PathRun, error) {
	load := cfg.Load
	load.BaseURL, load.APIKey, load.Model, load.Client = t.BaseURL, t.APIKey, t.Model, cfg.Client
	warm := load
	warm.Requests, warm.Progress = max(20, 2*load.Concurrency), nil
	if rep, err := Run(ctx, warm); err != nil {
		return nil, err
	} else if err := complete(ctx, rep); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if settle != nil {
		if err := settle(ctx); err != nil {
			return nil, fmt.Errorf("settle: %w", err)
		}
	}
	meters := append(append([]meter{self}, upstream...), remote...)
	before, err := readAll(ctx, meters)
	if err != nil {
		return nil, err
	}
	load.Progress = cfg.Progress
	rep, err := Run(ctx, load)
	if err != nil {
		return nil, err
	}
	if err := complete(ctx, rep); err != nil {
		return nil, err
	}
	if settle != nil {
		if err := settle(ctx); err != nil {
			return nil, fmt.Errorf("settle: %w", err)
		}
	}
	after, err := untilIdle(ctx, meters, cfg.Idle)
	if err != nil {
		return nil, err
	}
	perRequest := func(i int) float64 {
		return float64(after[i]-before[i]) / float64(time.Microsecond) / float64(rep.OK)
	}
	run := &PathRun{URL: t.BaseURL, About: t.About, Report: rep, ThisProcess: perRequest(0)}
	run.CPU = run.ThisProcess
	if len(upstream) > 0 {
		v := perRequest(1)
		run.Upstream, run.CPU = &v, run.CPU+v
	}
	if len(remote) > 0 {
		var v float64
		for i := range remote {
			v += perRequest(1 + len(upstream) + i)
		}
		run.Remote, run.CPU = &v, run.CPU+v
	}
	return run, nil
}

// complete says why a run's figures cannot be compared: it was interrupted, or some of its
// requests failed.
func complete(ctx context.Context, rep *Report) error {
	switch {
	case rep.Interrupted:
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	case rep.Failed > 0:
		return fmt.Errorf("%d of %d requests failed, such as: %w", rep.Failed, rep.Requests, &rep.Errors[0])
	case rep.OK == 0:
		return errors.New("no request was answered")
	}
	return nil
}

// untilIdle reads the meters every idleWindow until no process measured used more than
// idleCPU in a window, or limit has passed, and returns the reading taken at the start of
// that idle window (at the limit, the last one): what the processes used while idle is no
// run's.
func untilIdle(ctx context.Context, meters []meter, limit time.Duration) ([]time.Duration, error) {
	prev, err := readAll(ctx, meters)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(limit)
	t := time.NewTicker(idleWindow)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		cur, err := readAll(ctx, meters)
		if err != nil {
			return nil, err
		}
		idle := true
		for i := range cur {
			idle = idle && cur[i]-prev[i] <= idleCPU
		}
		if idle {
			return prev, nil
		}
		prev = cur
	}
	return prev, nil
}

// newComparison compares one try's runs.
func newComparison(cfg *CompareConfig, direct, network *PathRun) *Comparison {
	c := &Comparison{
		Model: cfg.Direct.Model, Stream: cfg.Load.Stream, Concurrency: cfg.Load.Concurrency, MaxTokens: cfg.Load.MaxTokens,
		Requests: cfg.Load.Requests, Machine: MachineClass(), Method: cfg.method(),
		Direct: direct, Network: network, AddedCPU: network.CPU - direct.CPU,
	}
	if direct.CPU > 0 {
		c.Ratio = network.CPU / direct.CPU
	}
	c.AddedLatency = Added{P50: network.Report.Latency.P50 - direct.Report.Latency.P50, P99: network.Report.Latency.P99 - direct.Report.Latency.P99}
	if d, n := direct.Report.TTFT, network.Report.TTFT; d != nil && n != nil {
		c.AddedTTFT = &Added{P50: n.P50 - d.P50, P99: n.P99 - d.P99}
	}
	if d, n := direct.Report, network.Report; d.OutputTokens*int64(n.OK) != n.OutputTokens*int64(d.OK) {
		c.Note = fmt.Sprintf("the paths' answers differ: %.1f output tokens each directly, %.1f through the network, so their loads differ too",
			float64(d.OutputTokens)/float64(d.OK), float64(n.OutputTokens)/float64(n.OK))
	}
	return c
}

// method says in words how cfg counts the CPU.
func (cfg *CompareConfig) method() string {
	s := "this process's CPU (the client's"
	if cfg.UpstreamInProcess {
		s += " and the mock upstream's"
	}
	if len(cfg.NetworkMetrics) == 0 {
		s += ", and on the network path the coordinator's and the agents' too: the added CPU is the network run's less the direct run's"
	}
	s += ")"
	if len(cfg.NetworkMetrics) > 0 {
		s += fmt.Sprintf(", plus on the network path the network's processes' (%s of %d endpoints)", ProcessCPUMetric, len(cfg.NetworkMetrics))
	}
	if cfg.UpstreamMetrics != "" {
		s += ", plus the upstream's own (" + ProcessCPUMetric + " of " + cfg.UpstreamMetrics + ")"
	}
	return s + ", from each run's first request until the processes are idle again after its last answer"
}

// WriteText writes the comparison for people.
func (c *Comparison) WriteText(w io.Writer) error {
	var b strings.Builder
	mode := "not streamed"
	if c.Stream {
		mode = "streamed"
	}
	fmt.Fprintf(&b, "%s: %s, max_tokens %d, concurrency %d, %d requests a path", c.Model, mode, c.MaxTokens, c.Concurrency, c.Requests)
	if c.Warm > 0 {
		fmt.Fprintf(&b, ", after %d through the network", c.Warm)
	}
	if n := len(c.Tries); n > 1 {
		fmt.Fprintf(&b, "; try %d of %d shown, the one the network added the least CPU in", c.Try, n)
	}
	fmt.Fprintf(&b, "\nmachine: %s\n", c.Machine)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, p := range []struct {
		name string
		run  *PathRun
	}{{PathDirect, c.Direct}, {PathNetwork, c.Network}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.name, p.run.URL, p.run.About)
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "\tCPU/request\treq/s\tlatency p50\tp99\t"
	if c.Stream {
		head += "ttft p50\tp99\t"
	}
	fmt.Fprintln(tw, head)
	for _, p := range []struct {
		name string
		run  *PathRun
	}{{PathDirect, c.Direct}, {PathNetwork, c.Network}} {
		r := p.run.Report
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t", p.name, micros(p.run.CPU), r.RequestsPerSecond, msec(r.Latency.P50), msec(r.Latency.P99))
		if c.Stream && r.TTFT != nil {
			fmt.Fprintf(tw, "%s\t%s\t", msec(r.TTFT.P50), msec(r.TTFT.P99))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nnetwork/direct %.1f×: the network added %s of CPU per request, latency p50 %s, p99 %s",
		c.Ratio, micros(c.AddedCPU), signedMsec(c.AddedLatency.P50), signedMsec(c.AddedLatency.P99))
	if t := c.AddedTTFT; t != nil {
		fmt.Fprintf(&b, ", ttft p50 %s, p99 %s", signedMsec(t.P50), signedMsec(t.P99))
	}
	b.WriteString("\n")
	if u := c.Direct.Upstream; u != nil && *u > 0 {
		fmt.Fprintf(&b, "the upstream's own CPU: %s per request; the network added %.1f× that\n", micros(*u), c.AddedCPU / *u)
	}
	if r := c.Network.Remote; r != nil {
		fmt.Fprintf(&b, "the network's processes: %s per request\n", micros(*r))
	}
	if len(c.Tries) > 1 {
		added := make([]string, len(c.Tries))
		for i, v := range c.Tries {
			added[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(&b, "added CPU per try: %s µs\n", strings.Join(added, ", "))
	}
	fmt.Fprintf(&b, "CPU counted: %s.\n", c.Method)
	if c.Note != "" {
		fmt.Fprintf(&b, "Note: %s.\n", c.Note)
	}
	if c.Check != nil {
		fmt.Fprintf(&b, "%s\n", c.Check.Message)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// micros shows microseconds of CPU.
func micros(us float64) string {
	if us < 10 && us > -10 {
		return fmt.Sprintf("%.1f µs", us)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// signedMsec shows a difference of milliseconds, with its sign.
func signedMsec(ms float64) string {
	if ms < 0 {
		return "-" + msec(-ms)
	}
	return "+" + msec(ms)
}
