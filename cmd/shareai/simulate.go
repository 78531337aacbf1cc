package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/simulate"
)

const simulateAbout = `Simulate the market in virtual time: buyers' requests and batches over providers' GPUs,
matched, queued, priced and billed by the coordinator's own code, for --days of traffic in
seconds of wall time. It reports utilization per GPU class and hour, the fill of each node's
windows, queue waits, time to first token, 503s, preemptions and failovers, buyers' cost per
1M tokens by tier against dedicated 24/7 GPUs, providers' earnings and the platform's fees.

  shareai simulate                                   # the built-in market, a week
  shareai simulate --fleet fleet.yaml --demand demand.yaml --days 7 --html report.html
  shareai simulate --compare-policies                # the auction against other policies and an offline bound
  shareai simulate --provider my-node.yaml --gpu rtx3080
  shareai simulate --provider my-node.yaml --windows 'daily 00:00-24:00' --ask 0.04,0.08

--provider reads a provider's configuration file (shareai provider's --config) and forecasts
the node's weekly earnings and fill in the market (--fleet, or the built-in one) over --seeds
runs, as p10, p50 and p90; --windows, --ask and --model ask what if the node had other windows,
another ask or another model. The GPU's speed comes from the market's class --gpu.
The report goes to stdout (text, or --json); --html also writes a page with charts. Wall time
and peak heap go to stderr, and so does each market's progress, day by day, once a run has
taken 10 s; ^C stops a run. docs/architecture.md ("Simulation") says what is simulated how.`

// simulateFlags are simulate's settings.
type simulateFlags struct {
	fleet, demand  string
	days           float64
	weight         int
	seed           uint64
	scale, workers int
	policy         string
	compare, json  bool
	html           string
	provider, gpu  string
	seeds          int
	windows, zone  string
	ask, model     string
	duration       time.Duration
	policyParsed   simulate.Policy
	askIn, askOut  string
	whatIf         bool
	fleetIn        *simulate.Fleet
	demandIn       *simulate.Demand
	marketName     string
}

func (s *simulateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.fleet, "fleet", "", "fleet file: the market's settings and its GPU classes (default: the built-in market)")
	fs.StringVar(&s.demand, "demand", "", "demand file: streams of requests and batches (default: the built-in demand)")
	fs.Float64Var(&s.days, "days", 7, "days of traffic to simulate")
	fs.Uint64Var(&s.seed, "seed", 1, "random seed: the same seed gives the same report")
	fs.IntVar(&s.scale, "scale", 1, "multiply every class's nodes, every stream's rate and every batch's lines")
	fs.IntVar(&s.weight, "weight", 1, "each simulated request stands for this many like requests, for fleets too large to simulate one by one: rates, batch lines and every class's max_concurrent (which it must divide) are divided by it, and every count and amount multiplied")
	fs.StringVar(&s.policy, "policy", "auction", "how requests' nodes are picked: auction (the coordinator's), cheapest, least-loaded or random")
	fs.BoolVar(&s.compare, "compare-policies", false, "run every policy on the same seed and compare them with an offline bound")
	fs.BoolVar(&s.json, "json", false, "write the report as JSON")
	fs.StringVar(&s.html, "html", "", "also write the report to this file as an HTML page with charts")
	fs.IntVar(&s.workers, "workers", 0, "independent markets (models no fallback joins) simulated at once; 0: one per CPU")
	fs.StringVar(&s.provider, "provider", "", "a provider's configuration file: forecast its node's earnings and fill in the market")
	fs.StringVar(&s.gpu, "gpu", "rtx3080", "--provider: the market's GPU class whose speed, memory and reliability the node has")
	fs.IntVar(&s.seeds, "seeds", 8, "--provider: runs with successive seeds, for the forecast's ranges")
	fs.StringVar(&s.windows, "windows", "", "--provider, what if: other availability windows, such as 'daily 00:00-24:00'")
	fs.StringVar(&s.zone, "timezone", "", "--provider, what if: the time zone of the windows")
	fs.StringVar(&s.ask, "ask", "", "--provider, what if: another ask, USD per 1M input and output tokens, such as 0.04,0.08")
	fs.StringVar(&s.model, "model", "", "--provider, what if: another model to offer instead")
}

// validate checks the flags and reads the files they name.
func (s *simulateFlags) validate(fs *flag.FlagSet) error {
	var errs []error
	if !(s.days > 0 && s.days <= 366) {
		errs = append(errs, &config.FieldError{Field: "days", Msg: "must be above 0 and at most 366"})
	}
	s.duration = time.Duration(s.days * float64(24*time.Hour))
	if s.scale < 1 {
		errs = append(errs, &config.FieldError{Field: "scale", Msg: "must be at least 1"})
	}
	if s.weight < 1 {
		errs = append(errs, &config.FieldError{Field: "weight", Msg: "must be at least 1"})
	}
	if s.workers < 0 {
		errs = append(errs, &config.FieldError{Field: "workers", Msg: "must not be negative"})
	}
	p, err := simulate.ParsePolicy(s.policy)
	if err != nil {
		errs = append(errs, &config.FieldError{Field: "policy", Msg: err.Error()})
	}
	s.policyParsed = p
	if s.seeds < 1 {
		errs = append(errs, &config.FieldError{Field: "seeds", Msg: "must be at least 1"})
	}
	for _, name := range []string{"windows", "timezone", "ask", "model"} {
		if isSet(fs, name) {
			s.whatIf = true
			if s.provider == "" {
				errs = append(errs, &config.FieldError{Field: name, Msg: "a what-if question about the node of --provider"})
			}
		}
	}
	if s.ask != "" {
		in, out, ok := strings.Cut(strings.ReplaceAll(s.ask, "/", ","), ",")
		_, e1 := money.ParsePrice(strings.TrimSpace(in))
		_, e2 := money.ParsePrice(strings.TrimSpace(out))
		if !ok || e1 != nil || e2 != nil {
			errs = append(errs, &config.FieldError{Field: "ask", Msg: "want USD per 1M input and output tokens, such as 0.04,0.08"})
		}
		s.askIn, s.askOut = strings.TrimSpace(in), strings.TrimSpace(out)
	}
	if s.compare && s.provider != "" {
		errs = append(errs, &config.FieldError{Field: "compare-policies", Msg: "compares the market's policies: not with --provider"})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.fleetIn, s.marketName = simulate.DefaultFleet(), "the built-in market"
	if s.fleet != "" {
		if s.fleetIn, err = simulate.LoadFleet(s.fleet); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		s.marketName = s.fleet
	}
	s.demandIn = simulate.DefaultDemand()
	if s.demand != "" {
		if s.demandIn, err = simulate.LoadDemand(s.demand); err != nil {
			return fmt.Errorf("demand: %w", err)
		}
		s.marketName += " with " + s.demand
	} else {
		s.marketName += " with the built-in demand"
	}
	return nil
}

// simulateFlagSet is simulate's flag set.
func simulateFlagSet(s *simulateFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	s.register(fs)
	return fs
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s simulateFlags
	fs := simulateFlagSet(&s)
	// No environment: the provider's SHAREAI_WINDOWS and SHAREAI_TIMEZONE, say, are the
	// agent's settings, not what-if questions.
	if err := parseArgs(fs, args, stderr, simulateAbout); err != nil {
		return err
	}
	if err := s.validate(fs); err != nil {
		return err
	}
	opts := simulate.Options{Seed: s.seed, Duration: s.duration, Scale: s.scale, Policy: s.policyParsed, Workers: s.workers, Weight: s.weight,
		Progress: stderr}
	peak := watchHeap()
	start := time.Now()
	var (
		out interface {
			WriteText(io.Writer) error
			WriteHTML(io.Writer) error
		}
		requests int64
		err      error
	)
	switch {
	case s.provider != "":
		var fr *simulate.ForecastReport
		if fr, err = s.forecast(ctx, opts); err == nil {
			out = fr
		}
	case s.compare:
		var rep *simulate.Report
		if rep, err = simulate.Compare(ctx, s.fleetIn, s.demandIn, opts); err == nil {
			out, requests = rep, rep.Requests.Total+rep.Requests.ByTier[3].Total
		}
	default:
		var rep *simulate.Report
		if rep, err = simulate.Run(ctx, s.fleetIn, s.demandIn, opts); err == nil {
			out, requests = rep, rep.Requests.Total+rep.Requests.ByTier[3].Total
		}
	}
	if err != nil {
		return err
	}
	wall := time.Since(start)
	heap := peak()
	if s.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := out.WriteText(stdout); err != nil {
		return err
	}
	if s.html != "" {
		f, err := os.Create(s.html)
		if err != nil {
			return err
		}
		if err := out.WriteHTML(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	rate := ""
	if requests > 0 {
		rate = fmt.Sprintf(", %s requests (%.2f µs each)", fmtCount(requests), float64(wall.Microseconds())/float64(requests))
	}
	fmt.Fprintf(stderr, "simulated %s days in %s of wall time%s; peak heap %d MiB\n", trimDays(s.days), wall.Round(time.Millisecond), rate, heap>>20)
	return nil
}

// forecast reads the provider's file as the agent reads it, makes its node a class of the
// market with the speed of the class --gpu, and forecasts it; with what-if flags, the
// changed node too.
func (s *simulateFlags) forecast(ctx context.Context, opts simulate.Options) (*simulate.ForecastReport, error) {
	var p config.Provider
	pfs := providerFlags(&p)
	if err := p.LoadFile(pfs, s.provider); err != nil {
		return nil, err
	}
	gi := slices.IndexFunc(s.fleetIn.Classes, func(c simulate.Class) bool { return strings.EqualFold(c.Name, s.gpu) })
	if gi < 0 {
		var names []string
		for _, c := range s.fleetIn.Classes {
			names = append(names, c.Name)
		}
		return nil, &config.FieldError{Field: "gpu", Msg: fmt.Sprintf("no class %q in %s: want one of %s", s.gpu, s.marketName, strings.Join(names, ", "))}
	}
	node, err := providerClass(&p, s.fleetIn.Classes[gi])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.provider, err)
	}
	var whatIf *simulate.Class
	var changes []string
	if s.whatIf {
		w := node
		if s.windows != "" {
			w.Windows = s.windows
			changes = append(changes, fmt.Sprintf("the windows were %q", s.windows))
		}
		if s.zone != "" {
			w.Timezone = s.zone
			changes = append(changes, "in "+s.zone)
		}
		if s.ask != "" {
			w.Price = simulate.Price{Input: s.askIn, Output: s.askOut}
			w.Schedule = nil
			changes = append(changes, fmt.Sprintf("the ask were %s in, %s out", s.askIn, s.askOut))
		}
		if s.model != "" {
			w.Models = []string{s.model}
			changes = append(changes, "the model were "+s.model)
		}
		whatIf = &w
	}
	fr, err := simulate.Forecast(ctx, s.fleetIn, s.demandIn, node, opts, s.seeds, whatIf, strings.Join(changes, ", "))
	if err != nil {
		return nil, err
	}
	fr.Market = s.marketName
	return fr, nil
}

// providerClass is the node a provider's settings describe, as a class of one, with the speed,
// memory and reliability of the market's class gpu.
func providerClass(p *config.Provider, gpu simulate.Class) (simulate.Class, error) {
	k := gpu
	k.Name = cmp.Or(strings.ToLower(strings.ReplaceAll(p.Name, " ", "-")), "my-node")
	k.Provider = "you"
	k.Count = 1
	k.Models = p.ModelList()
	offer := -1
	if len(p.Offers) > 0 {
		k.Models = nil
		for _, o := range p.Offers {
			k.Models = append(k.Models, o.Model)
		}
		offer = 0
	}
	if len(k.Models) == 0 {
		return k, errors.New("the file names no models: set models, or offers")
	}
	k.MaxConcurrent = p.MaxConcurrent
	if offer >= 0 && p.Offers[0].MaxConcurrent > 0 {
		k.MaxConcurrent = p.Offers[0].MaxConcurrent
	}
	k.GoldShare, k.NoBronze, k.NoBatch = p.GoldShare, p.NoBronze, p.NoBatch
	continues := p.Engine != "openai" || p.Continue != ""
	k.Continues = &continues
	k.Region, k.Regions = p.Region, nil
	if p.Quantization != "" {
		k.Quantization = p.Quantization
	}
	k.Windows = p.Availability.Windows
	k.Drain = p.Availability.Drain
	loc, err := p.Availability.Location()
	if err != nil {
		return k, err
	}
	k.Timezone = loc.String()
	if k.Timezone == "Local" {
		k.Timezone = "UTC"
	}
	in, out, err := p.Ask.Prices()
	if offer >= 0 {
		in, out, err = p.Offers[0].Prices(p.Ask)
	}
	if err != nil {
		return k, err
	}
	k.Price = simulate.Price{Input: in.String(), Output: out.String()}
	if offer >= 0 {
		k.Schedule, err = p.OfferAskSchedule(0, in, out)
	} else {
		k.Schedule, err = p.AskSchedule(in, out)
	}
	if err != nil {
		return k, err
	}
	k.AskSpread = 0
	return k, nil
}

// watchHeap samples the heap in use until the returned func is called, which returns the
// most it saw.
func watchHeap() func() uint64 {
	var (
		mu   sync.Mutex
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		peak = max(peak, m.HeapAlloc)
		mu.Unlock()
	}
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func fmtCount(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func trimDays(d float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", d), "0"), ".")
}
