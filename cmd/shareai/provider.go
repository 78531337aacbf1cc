package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/ollama"
	"github.com/shareai/shareai/internal/guard"
	"github.com/shareai/shareai/internal/hw"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/schedule"
)

const providerHelp = `Run the provider agent: it dials the coordinator (outbound, so it works behind NAT),
registers this node and its models, and serves jobs on a local inference engine:
  --engine ollama  Ollama's own API at --upstream (default http://127.0.0.1:11434)
  --engine openai  any OpenAI-compatible server (vLLM, llama.cpp llama-server, SGLang,
                   LM Studio), given by --upstream
  --engine sim     a simulated GPU, for demos and tests
Settings come from the YAML file --config (see 'shareai provider init'), then the
environment, then these flags. The node key is kept in --data-dir; keep it to keep the
node's identity.

Also:
  shareai provider init       detect the hardware and write a commented configuration
  shareai provider pause      stop the running agent taking new jobs (resume undoes it)
  shareai provider status     show the running agent's state
  shareai provider selftest   have the coordinator check this node, without going live
  shareai provider earnings   a provider's earnings, from the coordinator's database`

// providerFlags is the agent's flag set.
func providerFlags(cfg *config.Provider) *flag.FlagSet {
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	cfg.Flags(fs)
	return fs
}

func runProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "earnings":
			return runProviderEarnings(ctx, args[1:], stdout, stderr)
		case "init":
			return runProviderInit(ctx, args[1:], stdout, stderr)
		case "pause", "resume", "status":
			return runProviderControl(ctx, args[0], args[1:], stdout, stderr)
		case "selftest":
			return runProviderSelftest(ctx, args[1:], stdout, stderr)
		}
	}
	var cfg config.Provider
	fs := providerFlags(&cfg)
	if err := cfg.LoadFile(fs, config.ConfigPath(args, os.Getenv)); err != nil {
		return err
	}
	if err := parse(fs, args, stderr, providerHelp); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	acfg, err := agentConfig(ctx, &cfg, log)
	if err != nil {
		return err
	}
	tp, stopTracing, err := startTracing(cfg.Trace, "shareai-provider", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	acfg.TracerProvider = tp
	a, err := agent.New(acfg)
	if err != nil {
		return err
	}
	if cfg.Control != "" {
		ln, err := net.Listen("tcp", cfg.Control)
		if err != nil {
			return fmt.Errorf("control API on %s: %w (set --control to another port, or empty for none)", cfg.Control, err)
		}
		go func() {
			if err := a.ServeControl(ctx, ln); err != nil {
				log.Error("control API", "err", err)
			}
		}()
	}
	return a.Run(ctx)
}

// agentConfig turns the provider's settings into the agent's: the engine, the hardware and its
// readings, the guard, the windows, the offers and what fits the GPUs.
func agentConfig(ctx context.Context, cfg *config.Provider, log *slog.Logger) (agent.Config, error) {
	eng, err := newProviderEngine(cfg, log)
	if err != nil {
		return agent.Config{}, err
	}
	in, out, _ := cfg.Ask.Prices()
	asks, err := cfg.AskSchedule(in, out)
	if err != nil {
		return agent.Config{}, err
	}
	acfg := agent.Config{
		Coordinator: cfg.Coordinator, Token: cfg.Token, DataDir: cfg.DataDir, Name: cfg.Name, Region: cfg.Region,
		Engine: eng, MaxConcurrent: cfg.MaxConcurrent, ContextLength: cfg.ContextLength, Quantization: cfg.Quantization,
		InputPrice: in, OutputPrice: out, AskSchedule: asks, WaitForEngine: true, Drain: cfg.Availability.Drain,
		GoldShare: cfg.GoldShare, NoBronze: cfg.NoBronze, NoBatch: cfg.NoBatch,
		Version: version, Log: log,
	}
	for i, o := range cfg.Offers {
		in, out, err := o.Prices(cfg.Ask)
		if err != nil {
			return acfg, err
		}
		asks, err := cfg.OfferAskSchedule(i, in, out)
		if err != nil {
			return acfg, err
		}
		acfg.Offers = append(acfg.Offers, protocol.Offer{Model: o.Model, Quantization: o.Quantization,
			ContextLength: o.ContextLength, MaxConcurrent: o.MaxConcurrent, InputPrice: int64(in), OutputPrice: int64(out),
			AskSchedule: asks})
	}
	if err := setSchedule(&acfg, cfg); err != nil {
		return acfg, err
	}
	if cfg.Engine == "sim" {
		acfg.Hardware = protocol.Hardware{Simulated: true, GPUs: []protocol.GPU{{Name: "Simulated GPU", VRAMMiB: 24576}}}
		log.Info("using the simulated engine: answers are simulated text, not a real model")
		return acfg, nil
	}
	return acfg, setHardware(ctx, &acfg, cfg, log)
}

func newProviderEngine(cfg *config.Provider, log *slog.Logger) (engine.Engine, error) {
	var models []engine.Model
	for _, m := range cfg.ModelList() {
		models = append(models, engine.Model{Name: m, ContextLength: cfg.ContextLength})
	}
	if cfg.Engine == "ollama" {
		return newOllama(cfg, log)
	}
	return newEngine(cfg.Engine, cfg.Upstream, cfg.UpstreamAPIKey, cfg.Continue, models, cfg.SimTTFT, cfg.SimTPS)
}

// DefaultOllamaContext is the context window, in tokens, Ollama nodes run and offer when the
// provider sets none: Ollama's own default is smaller than most models' and differs between
// versions, and a node must run the window it offers.
const DefaultOllamaContext = 8192

// newOllama makes the Ollama engine. Every request runs with the largest context window the
// node offers (num_ctx), so that what a node offers is what Ollama runs, and the VRAM fit check
// is made at that size.
func newOllama(cfg *config.Provider, log *slog.Logger) (engine.Engine, error) {
	names := cfg.ModelList()
	numCtx := cfg.ContextLength
	for _, o := range cfg.Offers {
		names = append(names, o.Model)
		numCtx = max(numCtx, o.ContextLength)
	}
	if numCtx == 0 {
		numCtx = DefaultOllamaContext
	}
	e, err := ollama.New(ollama.Config{BaseURL: cfg.Upstream, Models: names, Pull: cfg.PullList(), NumCtx: numCtx})
	if err != nil {
		return nil, err
	}
	if len(cfg.PullList()) == 0 {
		return e, nil
	}
	return &pullingEngine{Engine: e, log: log}, nil
}

// pullingEngine pulls the provider's models before it first lists the engine's. While Ollama
// does not answer (it may start after the agent), listing fails and the agent retries, pulls
// included.
type pullingEngine struct {
	*ollama.Engine
	log    *slog.Logger
	pulled atomic.Bool
}

func (e *pullingEngine) Models(ctx context.Context) ([]engine.Model, error) {
	if !e.pulled.Load() {
		if _, err := e.Engine.Models(ctx); err != nil {
			return nil, err
		}
		if err := e.EnsurePulled(ctx, e.log); err != nil {
			e.log.Warn("could not pull every model asked for; offering those installed", "err", err)
		}
		e.pulled.Store(true)
	}
	return e.Engine.Models(ctx)
}

// setSchedule sets the node's availability windows.
func setSchedule(acfg *agent.Config, cfg *config.Provider) error {
	if cfg.Availability.Windows == "" {
		return nil
	}
	loc, err := cfg.Availability.Location()
	if err != nil {
		return err
	}
	sched, err := schedule.Parse(cfg.Availability.Windows, loc)
	if err != nil {
		return &config.FieldError{Field: "windows", Msg: err.Error()}
	}
	acfg.Schedule, acfg.Windows, acfg.Timezone = sched, sched.String(), loc.String()
	if acfg.Timezone == "Local" {
		acfg.Timezone = "" // the machine's zone has no name the coordinator could load
	}
	return nil
}

// setHardware discovers the GPUs, reads them for heartbeats and the guard, and refuses offers
// that cannot fit their memory.
func setHardware(ctx context.Context, acfg *agent.Config, cfg *config.Provider, log *slog.Logger) error {
	probe := hw.Local(hw.Exec)
	probe.Log = log
	machine, err := probe.Discover(ctx)
	if err != nil {
		return err
	}
	acfg.Hardware = machine
	vendor := hw.Vendor(machine)
	var vram int64
	for _, g := range machine.GPUs {
		vram += g.VRAMMiB
	}
	log.Info("hardware", "vendor", vendor, "gpus", len(machine.GPUs), "vram_mib", vram, "fingerprint", machine.Fingerprint)
	acfg.CheckFit = func(m engine.Model, contextLength int) error {
		if cfg.Engine == "ollama" {
			// Ollama runs every request at one window, the largest offered: check at that.
			contextLength = max(contextLength, m.ContextLength)
		}
		return hw.Check(hw.ModelSpec{Name: m.Name, Parameters: m.Parameters, Quantization: m.Quantization,
			SizeBytes: m.SizeBytes, ContextLength: contextLength}, vram)
	}
	if len(machine.GPUs) == 0 {
		return nil
	}
	processes := cmpOr(cfg.Guard.EngineProcesses, engineProcesses[cfg.Engine])
	acfg.Telemetry = func(ctx context.Context) (*protocol.Telemetry, error) {
		t, err := hw.Sample(ctx, hw.Exec, vendor)
		if t == nil || err != nil {
			return t, err
		}
		t.Processes, err = hw.Processes(ctx, hw.Exec, vendor, processes)
		for i := range t.Processes {
			t.Processes[i].Name = baseName(t.Processes[i].Name) // the owner's paths stay on the machine
		}
		return t, err
	}
	g, err := guard.New(guard.Config{
		StepAside: cfg.Guard.StepAside, BusyUtilizationPct: cfg.Guard.BusyUtilization, QuietPeriod: cfg.Guard.QuietPeriod,
		EngineProcesses: processes, MaxTemperatureC: cfg.Guard.MaxTemperatureC, ResumeTemperatureC: cfg.Guard.ResumeTemperatureC,
		MaxPowerW: cfg.Guard.MaxPowerW, ResumePowerW: cfg.Guard.ResumePowerW,
	})
	if err != nil {
		return err
	}
	acfg.Guard = g
	return nil
}

// baseName is a program's file name without its directories, from a Unix or Windows path.
func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

// engineProcesses name the GPU processes of each kind of engine, which are not the owner's.
var engineProcesses = map[string][]string{
	"ollama": {"ollama", "ollama_llama_server"},
	"openai": {"llama-server", "vllm", "sglang", "text-generation-launcher", "text-generation-server", "lm studio", "lmstudio"},
}

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// runProviderSelftest is 'shareai provider selftest': the node connects as it would to serve,
// but only to be checked as a new node is, and prints the results; it gets no live traffic and
// nothing is recorded of it.
func runProviderSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Provider
	fs := flag.NewFlagSet("provider selftest", flag.ContinueOnError)
	cfg.Flags(fs)
	if err := cfg.LoadFile(fs, config.ConfigPath(args, os.Getenv)); err != nil {
		return err
	}
	if err := parse(fs, args, stderr, `Have the coordinator check this node as it checks a new one before it gets live traffic:
known-answer checks of the models it offers, compared with the known answer or with other
verified nodes serving the same model. The node gets no live traffic and nothing is recorded
of it. Give the agent's --config (or its flags). Exits 1 if a check fails.`); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	acfg, err := agentConfig(ctx, &cfg, log)
	if err != nil {
		return err
	}
	acfg.Selftest, acfg.WaitForEngine = true, false
	a, err := agent.New(acfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		return err
	}
	res := a.SelftestResult()
	if res == nil {
		return errors.New("the coordinator sent no selftest results (is it older than this agent?)")
	}
	for _, c := range res.Checks {
		mark := "PASS"
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(stdout, "%s  %-28s %s\n", mark, c.Model, c.Detail)
	}
	if !res.Passed {
		return fmt.Errorf("the node did not pass its checks (%d made): it would not get live traffic", len(res.Checks))
	}
	fmt.Fprintf(stdout, "The node passed %d checks: it would be verified and get live traffic.\n", len(res.Checks))
	return nil
}

// runProviderControl is 'shareai provider pause|resume|status': it asks the running agent,
// over its local control API, with the token kept in its data directory.
func runProviderControl(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	var cfg config.Provider
	fs := flag.NewFlagSet("provider "+action, flag.ContinueOnError)
	cfg.Flags(fs)
	if err := cfg.LoadFile(fs, config.ConfigPath(args, os.Getenv)); err != nil {
		return err
	}
	about := map[string]string{
		"pause":  "Stop the running agent taking new jobs, until 'shareai provider resume'. Its running jobs go\non for the drain deadline (--drain), then other nodes finish their answers.",
		"resume": "Let the running agent take jobs again, unless something else still stops it: outside its\nwindows, its GPU in use by another program, too hot.",
		"status": "Show the running agent's state: connected or not, whether it takes jobs and why not, its\nrunning jobs and its latest GPU readings.",
	}[action]
	if err := parse(fs, args, stderr, about+"\n\nIt asks the agent at --control with the token in --data-dir: give the agent's --config\n(or the same --control and --data-dir)."); err != nil {
		return err
	}
	if cfg.Control == "" {
		return errors.New("--control is empty: the agent serves no control API")
	}
	st, err := agent.Control(ctx, cfg.Control, cfg.DataDir, action)
	if err != nil {
		return err
	}
	if action != "status" {
		fmt.Fprintln(stdout, controlDone(action, st))
	}
	printStatus(stdout, st)
	return nil
}

// controlDone says what a pause or a resume did, from the agent's answer.
func controlDone(action string, st agent.Status) string {
	changed := st.Changed == nil || *st.Changed // an older agent does not say
	if action == "pause" {
		done := "paused"
		if !changed {
			done = "already paused"
		}
		return done + ": the node takes no new jobs until 'shareai provider resume'; " + drained(st)
	}
	switch {
	case changed && st.Paused == "":
		return "resumed: the node takes jobs again"
	case changed:
		return "resumed, but the node still takes no new jobs: " + st.Paused
	case st.Paused == "":
		return "not paused: the node already takes jobs"
	}
	return "not paused by its owner, nothing to resume: the node takes no new jobs: " + st.Paused
}

// drained says what becomes of a paused node's running jobs.
func drained(st agent.Status) string {
	jobs := fmt.Sprintf("its %d running jobs go on", st.Running)
	switch st.Running {
	case 0:
		return "no jobs are running"
	case 1:
		jobs = "its running job goes on"
	}
	d, err := time.ParseDuration(st.Drain)
	if err != nil {
		return jobs + " for the drain time (--drain), then other nodes finish the answers"
	}
	return jobs + " for up to " + shortDuration(d) + " (the drain time), then other nodes finish the answers"
}

// shortDuration writes 10m for 10m0s and 1h for 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func printStatus(w io.Writer, st agent.Status) {
	state := "taking jobs"
	if st.Paused != "" {
		state = "taking no new jobs: " + st.Paused
	}
	conn := "connected"
	if !st.Connected {
		conn = "not connected to the coordinator"
	}
	fmt.Fprintf(w, "node     %s (%s)\nstate    %s\nrunning  %d jobs\n", st.NodeID, conn, state, st.Running)
	if st.Windows != "" {
		fmt.Fprintf(w, "windows  %s (%s)\n", st.Windows, st.Timezone)
	}
	if st.Telemetry != nil {
		for _, g := range st.Telemetry.GPUs {
			fmt.Fprintf(w, "gpu %d    %s\n", g.Index, reading(g))
		}
		for _, p := range st.Telemetry.Processes {
			fmt.Fprintf(w, "other    pid %d %s (%d MiB)\n", p.PID, p.Name, p.UsedMiB)
		}
	}
}

// reading reads like "63 °C, 212/350 W, 87% busy, 18000/24576 MiB".
func reading(g protocol.GPUStat) string {
	s := ""
	add := func(part string) {
		if s != "" {
			s += ", "
		}
		s += part
	}
	if g.TemperatureC != nil {
		add(fmt.Sprintf("%.0f °C", *g.TemperatureC))
	}
	if g.PowerW != nil {
		if g.PowerLimitW != nil {
			add(fmt.Sprintf("%.0f/%.0f W", *g.PowerW, *g.PowerLimitW))
		} else {
			add(fmt.Sprintf("%.0f W", *g.PowerW))
		}
	}
	if g.UtilizationPct != nil {
		add(fmt.Sprintf("%.0f%% busy", *g.UtilizationPct))
	}
	if g.MemoryUsedMiB != nil && g.MemoryTotalMiB != nil {
		add(fmt.Sprintf("%d/%d MiB", *g.MemoryUsedMiB, *g.MemoryTotalMiB))
	}
	if s == "" {
		return "no readings"
	}
	return s
}
