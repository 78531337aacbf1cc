package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Bench configures `shareai bench`.
type Bench struct {
	URL         string // the API's base URL; empty: start an in-process network
	APIKey      string
	Requests    int // 0: 1000, or no limit with Duration
	Concurrency int
	Duration    time.Duration
	Model       string // empty: the first model GET /v1/models lists
	Stream      bool
	MaxTokens   int
	Prompt      string
	JSON        bool
	Timeout     time.Duration
	H2C         bool // HTTP/2 without TLS, many requests on one connection

	// Hold mode.
	Hold bool
	// Metrics is the coordinator's Prometheus endpoint, in hold and batch modes; in compare
	// mode with URL, the network's processes' endpoints, comma-separated.
	Metrics string
	Settle  time.Duration

	// Batch mode: one batch of Batch lines beside the live load; 0: off.
	Batch int

	// Compare mode: the same load straight to the upstream Compare (a URL, or CompareMock)
	// and through a network on it (URL's, or one started in this process); "": off.
	Compare string
	// UpstreamMetrics is the upstream's Prometheus endpoint, for its own CPU.
	UpstreamMetrics string
	Tries           int // runs of both paths; the one the network added the least CPU in is reported
	// Warm is how many requests go through the network before the first try, not counted:
	// a store that has settled that many, as a running coordinator's has.
	Warm int
	// Baseline is a file of figures the comparison is held to (or, with UpdateBaseline,
	// recorded in) for this machine class.
	Baseline       string
	UpdateBaseline bool
	// Against is another shareai binary, the reference build (the baseline's commit, built):
	// each try runs the same load through it too, and this build is held to what it added
	// in the same run instead of to a figure recorded on another day.
	Against string

	// MockUpstream, when set, is the address bench serves the mock upstream on, instead of
	// sending any load.
	MockUpstream string

	// The in-process network, without URL.
	Providers     int
	SimTTFT       time.Duration
	SimTPS        float64
	MaxConcurrent int // slots per agent and model; 0: Concurrency
	// SimWindows, when set, gives the simulated providers availability windows of this
	// length: each is open one window in two, half of them at a time.
	SimWindows time.Duration
}

// BenchEnv documents the environment variables `shareai bench` reads, with the flag each
// sets: the ones OpenAI's SDKs read, so that bench works after `shareai up`'s exports.
var BenchEnv = []struct{ Name, Flag, Doc string }{
	{"OPENAI_BASE_URL", "url", "the API's base URL, with or without /v1"},
	{"OPENAI_API_KEY", "key", "the buyer's API key (sk-…)"},
}

// CompareMock is the --compare value for the mock upstream that bench runs in its own
// process.
const CompareMock = "mock"

// DefaultBenchRequests is how many requests bench sends without -n or --duration.
const DefaultBenchRequests = 1000

// Flags registers the flags of `shareai bench`.
func (b *Bench) Flags(fs *flag.FlagSet) {
	fs.StringVar(&b.URL, "url", "", "the network's API, such as http://127.0.0.1:8080 or …/v1 (env OPENAI_BASE_URL); empty: start a network in this process")
	fs.StringVar(&b.APIKey, "key", "", "the buyer's API key, sk-… (env OPENAI_API_KEY)")
	fs.IntVar(&b.Requests, "n", 0, "requests to send (default 1000, or no limit with --duration)")
	fs.IntVar(&b.Concurrency, "c", 50, "requests in flight at once; in --hold mode, the streams to hold open")
	fs.DurationVar(&b.Duration, "duration", 0, "send requests for this long instead of -n of them (with -n: whichever ends first)")
	fs.StringVar(&b.Model, "model", "", "the model (default: the first one GET /v1/models lists)")
	fs.BoolVar(&b.Stream, "stream", true, "stream the answers (server-sent events, with usage); --stream=false for one JSON answer each")
	fs.IntVar(&b.MaxTokens, "max-tokens", 64, "each request's max_tokens")
	fs.StringVar(&b.Prompt, "prompt", "Tell me a short story about a lighthouse keeper.", "the user message of each request")
	fs.BoolVar(&b.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&b.H2C, "h2c", false, "speak HTTP/2 without TLS (prior knowledge), many requests on each connection, instead of HTTP/1.1 with one connection per request in flight")
	fs.DurationVar(&b.Timeout, "timeout", 2*time.Minute, "the most one request may take; in --hold mode, the most to wait for every stream's first token (0: no limit)")
	fs.BoolVar(&b.Hold, "hold", false, "memory mode: open -c slow streams at once, wait until each has its first token, read the coordinator's memory from --metrics, then close them")
	fs.StringVar(&b.Metrics, "metrics", "", "--hold, --batch: the coordinator's Prometheus endpoint, such as http://127.0.0.1:9464/metrics; --hold reads its memory, --batch its slot-time (without --url, the network's own); --compare with --url: the Prometheus endpoints of the network's processes, comma-separated, whose process_cpu_seconds_total is the network's CPU (shareai up's counts its providers too)")
	fs.DurationVar(&b.Settle, "settle", 2*time.Second, "--hold: how long all streams stay open before the memory is read")
	fs.IntVar(&b.Batch, "batch", 0, "batch mode: run one batch of this many lines through the Batch API, with the live load (-c, -n or --duration, streamed) run first alone and again beside the batch; report the batch's throughput and the live requests' time to first token both ways")
	fs.StringVar(&b.Compare, "compare", "", "compare mode: send the same load straight to this OpenAI-compatible upstream (a URL such as http://127.0.0.1:8000/v1, or mock: one that answers 20 chunks at once, run in this process), then through a network whose providers run the openai engine on it (without --url, one started in this process); report each path's CPU per request, requests per second and latency, their ratio and what the network added")
	fs.StringVar(&b.UpstreamMetrics, "upstream-metrics", "", "--compare URL: the upstream's Prometheus endpoint, such as a --mock-upstream's http://127.0.0.1:8000/metrics; its process_cpu_seconds_total is counted on both paths and reported as the upstream's own CPU")
	fs.IntVar(&b.Tries, "tries", 1, "--compare: run both paths this many times, one after the other, and report the try in which the network added the least CPU per request (with --baseline, stop at the first within it)")
	fs.IntVar(&b.Warm, "warm", 0, "--compare: send this many requests through the network before the first try, not counted, so that its store has settled as many as a running coordinator's has (an empty store's indexes fit in a few pages; a coordinator's store holds 100,000 requests after half a minute at 3,000 a second)")
	fs.StringVar(&b.Baseline, "baseline", "", "--compare mock: a JSON file of figures by machine class; exit 1 when the network adds more than 25% more CPU per request than the file's figure for this machine class and load (none recorded: say so and pass)")
	fs.BoolVar(&b.UpdateBaseline, "update-baseline", false, "--baseline: record this run's figures in the file, for this machine class and load, instead of checking them")
	fs.StringVar(&b.Against, "against", "", "--compare mock: a shareai binary of a reference build (scripts/bench-regress.sh builds the baseline file's commit); each try runs the same load through it before this one, and exit 1 when this build adds more than 25% more CPU per request than the reference did in the same run")
	fs.StringVar(&b.MockUpstream, "mock-upstream", "", "serve the mock upstream of --compare mock on this address, such as 127.0.0.1:8000, with this process's Prometheus metrics at /metrics, until Ctrl-C; no load is sent")
	fs.IntVar(&b.Providers, "providers", 2, "without --url: simulated providers of the network bench starts")
	fs.DurationVar(&b.SimTTFT, "sim-ttft", 150*time.Millisecond, "without --url: the simulated providers' time to first token")
	fs.Float64Var(&b.SimTPS, "sim-tps", 60, "without --url: the simulated providers' tokens per second (0: no delay; with --hold, default 1)")
	fs.DurationVar(&b.SimWindows, "sim-windows", 0, "without --url: give the simulated providers availability windows this long, each open one window in two and half of them at a time (0: always open)")
	fs.IntVar(&b.MaxConcurrent, "max-concurrent", 0, "without --url: jobs each provider runs at once (default -c, so that no request waits for a slot)")
}

// BindEnv sets the flags' defaults from the environment variables of BenchEnv. Call it
// after Flags and before fs.Parse, so that flags given win.
func (b *Bench) BindEnv(fs *flag.FlagSet, getenv func(string) string) {
	for _, e := range BenchEnv {
		if v := getenv(e.Name); v != "" {
			f := fs.Lookup(e.Flag)
			f.Value.Set(v)    // strings: never fails
			showDefault(f, v) // the key masked
		}
	}
}

// Count is how many requests to send: Requests, or its default; 0 means no limit.
func (b *Bench) Count() int {
	if b.Requests == 0 && b.Duration == 0 {
		return DefaultBenchRequests
	}
	return b.Requests
}

// Validate checks the settings.
func (b *Bench) Validate() error {
	var errs []error
	if b.URL != "" {
		if !isHTTPURL(b.URL) {
			errs = append(errs, &FieldError{"url", fmt.Sprintf("%q is not an http(s) URL such as http://127.0.0.1:8080/v1", b.URL)})
		}
		if b.APIKey == "" {
			errs = append(errs, &FieldError{"key", "an API key is needed with --url (or OPENAI_API_KEY)"})
		}
	}
	if b.Requests < 0 {
		errs = append(errs, &FieldError{"n", "must not be negative"})
	}
	if b.Duration < 0 {
		errs = append(errs, &FieldError{"duration", "must not be negative"})
	}
	if b.Concurrency < 1 || b.Concurrency > 1_000_000 {
		errs = append(errs, &FieldError{"c", "must be between 1 and 1000000, got " + strconv.Itoa(b.Concurrency)})
	}
	if b.MaxTokens < 1 {
		errs = append(errs, &FieldError{"max-tokens", "must be at least 1"})
	}
	if b.Timeout < 0 {
		errs = append(errs, &FieldError{"timeout", "must not be negative"})
	}
	if b.Metrics != "" {
		for _, u := range b.MetricsURLs() {
			if !isHTTPURL(u) {
				errs = append(errs, &FieldError{"metrics", fmt.Sprintf("%q is not an http(s) URL such as http://127.0.0.1:9464/metrics", u)})
			}
		}
		switch {
		case b.Compare != "" && b.URL == "":
			errs = append(errs, &FieldError{"metrics", "--compare without --url counts the network it starts in this process's CPU: --metrics is for a network elsewhere"})
		case b.Compare == "" && !b.Hold && b.Batch == 0:
			errs = append(errs, &FieldError{"metrics", "is read only in --hold, --batch and --compare modes"})
		case b.Compare == "" && len(b.MetricsURLs()) > 1:
			errs = append(errs, &FieldError{"metrics", "--hold and --batch read one endpoint, the coordinator's"})
		}
	}
	errs = append(errs, b.validateCompare()...)
	if b.Hold && !b.Stream {
		errs = append(errs, &FieldError{"hold", "holds streams open: it cannot be used with --stream=false"})
	}
	if b.Batch < 0 || b.Batch > 50_000 {
		errs = append(errs, &FieldError{"batch", "must be between 0 and 50000 lines, the most a batch holds"})
	}
	if b.Batch > 0 && b.Hold {
		errs = append(errs, &FieldError{"batch", "cannot be used with --hold"})
	}
	if b.Settle < 0 {
		errs = append(errs, &FieldError{"settle", "must not be negative"})
	}
	if b.Providers < 1 || b.Providers > 1000 {
		errs = append(errs, &FieldError{"providers", "must be between 1 and 1000, got " + strconv.Itoa(b.Providers)})
	}
	if b.MaxConcurrent < 0 {
		errs = append(errs, &FieldError{"max-concurrent", "must not be negative"})
	}
	if b.SimWindows < 0 || (b.SimWindows > 0 && b.SimWindows < time.Second) {
		errs = append(errs, &FieldError{"sim-windows", "must be 0 (always open) or at least 1s"})
	}
	if b.SimTTFT < 0 || b.SimTPS < 0 {
		errs = append(errs, &FieldError{"sim-tps", "sim timings must not be negative"})
	}
	return errors.Join(errs...)
}

// MetricsURLs is Metrics split at its commas.
func (b *Bench) MetricsURLs() []string {
	var us []string
	for u := range strings.SplitSeq(b.Metrics, ",") {
		if u = strings.TrimSpace(u); u != "" {
			us = append(us, u)
		}
	}
	return us
}

// validateCompare checks the settings of compare mode and of the mock upstream.
func (b *Bench) validateCompare() []error {
	var errs []error
	if b.Compare != "" {
		if b.Compare != CompareMock && !isHTTPURL(b.Compare) {
			errs = append(errs, &FieldError{"compare", fmt.Sprintf("%q is neither mock nor an http(s) URL such as http://127.0.0.1:8000/v1", b.Compare)})
		}
		if b.Hold || b.Batch > 0 {
			errs = append(errs, &FieldError{"compare", "cannot be used with --hold or --batch"})
		}
		if b.Duration > 0 {
			errs = append(errs, &FieldError{"compare", "sends -n requests on each path, not for a --duration"})
		}
		if b.Compare == CompareMock && b.URL != "" {
			errs = append(errs, &FieldError{"compare", "mock runs in this process, on a port of its own, which a network elsewhere (--url, or OPENAI_BASE_URL) cannot serve from: serve it with shareai bench --mock-upstream ADDR and give --compare http://ADDR"})
		} else if b.URL != "" && b.Metrics == "" {
			errs = append(errs, &FieldError{"compare", "with --url (or OPENAI_BASE_URL), --metrics must name the network's Prometheus endpoints, to read its CPU; without --url bench starts a network in this process"})
		}
	}
	if b.UpstreamMetrics != "" {
		switch {
		case !isHTTPURL(b.UpstreamMetrics):
			errs = append(errs, &FieldError{"upstream-metrics", fmt.Sprintf("%q is not an http(s) URL such as http://127.0.0.1:8000/metrics", b.UpstreamMetrics)})
		case b.Compare == "":
			errs = append(errs, &FieldError{"upstream-metrics", "is read only with --compare"})
		case b.Compare == CompareMock:
			errs = append(errs, &FieldError{"upstream-metrics", "--compare mock runs the mock in this process, whose CPU is counted already"})
		}
	}
	if b.Tries < 1 || b.Tries > 100 {
		errs = append(errs, &FieldError{"tries", "must be between 1 and 100, got " + strconv.Itoa(b.Tries)})
	} else if b.Tries > 1 && b.Compare == "" {
		errs = append(errs, &FieldError{"tries", "is for --compare"})
	}
	if b.Warm < 0 {
		errs = append(errs, &FieldError{"warm", "must not be negative, got " + strconv.Itoa(b.Warm)})
	} else if b.Warm > 0 && b.Compare == "" {
		errs = append(errs, &FieldError{"warm", "is for --compare"})
	}
	if b.Baseline != "" && (b.Compare != CompareMock || b.URL != "") {
		errs = append(errs, &FieldError{"baseline", "holds --compare mock with the network bench starts (no --url): only that load is the same on every run"})
	}
	if b.Against != "" {
		switch {
		case b.Compare != CompareMock || b.URL != "":
			errs = append(errs, &FieldError{"against", "holds --compare mock with the network bench starts (no --url): only that load is the same in both builds"})
		case b.UpdateBaseline:
			errs = append(errs, &FieldError{"against", "checks this build against another; --update-baseline records this build's figures: give one of them"})
		}
	}
	if b.UpdateBaseline && b.Baseline == "" {
		errs = append(errs, &FieldError{"update-baseline", "needs --baseline, the file to record in"})
	}
	if b.MockUpstream != "" {
		if _, _, err := net.SplitHostPort(b.MockUpstream); err != nil {
			errs = append(errs, &FieldError{"mock-upstream", fmt.Sprintf("%q is not host:port, such as 127.0.0.1:8000", b.MockUpstream)})
		}
		if b.Compare != "" || b.Hold || b.Batch > 0 {
			errs = append(errs, &FieldError{"mock-upstream", "serves the mock and sends no load: it cannot be used with --compare, --hold or --batch"})
		}
	}
	return errs
}
