package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/schedule"
)

// Provider configures `shareai provider`: from its YAML file (--config), then the environment,
// then flags, each overriding the one before.
type Provider struct {
	Config         string // the YAML file read, if any
	Coordinator    string
	Token          string
	DataDir        string
	Name           string
	Region         string
	Engine         string // ollama, openai or sim
	Upstream       string // the engine's base URL
	UpstreamAPIKey string
	Continue       string // how the openai engine continues a partial answer
	Pull           string // ollama: comma-separated models to pull at start when missing
	Models         string // comma-separated; empty: what the engine serves
	// Offers are the models offered, each with its own settings (only a file sets them);
	// empty: every model in Models, or else every model the engine serves.
	Offers        []Offer
	MaxConcurrent int
	ContextLength int
	Quantization  string
	// GoldShare is the share of each model's slots kept for gold requests (service_tier
	// priority), 0..1; NoBronze refuses bronze requests (service_tier flex), which gold may
	// preempt. NoBatch refuses batch work (the Batch API's lines), which any live request
	// may preempt.
	GoldShare    float64
	NoBronze     bool
	NoBatch      bool
	Availability Availability
	Guard        Guard
	Control      string // the local control address, for pause and resume
	SimTTFT      time.Duration
	SimTPS       float64
	Ask          Ask
	// Price is the file's price setting, for its ask schedule (Timezone, Windows): the flat
	// ask is Ask's, which the flags and environment may set too.
	Price Price
	Trace Trace
	Log   Log

	file *fileSettings // what the YAML file set, to name its settings in errors
}

// Offer is one model a provider offers, with settings of its own. Zero settings take the
// node's.
type Offer struct {
	Model         string `yaml:"model"`
	Quantization  string `yaml:"quantization"`
	ContextLength int    `yaml:"context_length"`
	MaxConcurrent int    `yaml:"max_concurrent"`
	Price         Price  `yaml:"price"`
}

// Prices returns the offer's ask, or the node's for a price it does not set.
func (o *Offer) Prices(node Ask) (in, out money.Price, err error) {
	if o.Price.Input != "" {
		node.Input = o.Price.Input
	}
	if o.Price.Output != "" {
		node.Output = o.Price.Output
	}
	return node.Prices()
}

// Availability is when the node takes jobs.
type Availability struct {
	// Windows is the weekly schedule, such as "mon-fri 08:00-18:00, 22:30-01:00"; empty:
	// always.
	Windows string
	// Timezone is the schedule's IANA zone (Europe/Berlin); empty: the machine's.
	Timezone string
	// Drain is how long jobs running when a window closes (or the node is paused) may go on.
	Drain time.Duration
}

// Location returns the schedule's time zone: Timezone, or else the machine's, named by its IANA
// name where the machine tells it (TZ, or the /etc/localtime link), so that the coordinator
// reads the windows on the same clock.
func (a *Availability) Location() (*time.Location, error) {
	if a.Timezone == "" {
		if loc, err := time.LoadLocation(localZoneName()); err == nil && loc.String() != "" {
			return loc, nil
		}
		return time.Local, nil
	}
	loc, err := time.LoadLocation(a.Timezone)
	if err != nil {
		return nil, &FieldError{"timezone", fmt.Sprintf("%q is not an IANA time zone such as Europe/Berlin or America/New_York", a.Timezone)}
	}
	return loc, nil
}

// localZoneName is the IANA name of the machine's time zone, or "" when it cannot tell.
func localZoneName() string {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" && !strings.HasPrefix(tz, "/") {
		return tz
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			return name
		}
	}
	return ""
}

// Guard is when the node steps aside for its owner or for heat.
type Guard struct {
	// StepAside stops new jobs while another program uses the GPU.
	StepAside bool `yaml:"step_aside"`
	// QuietPeriod is how long the GPU must be free of other programs before jobs resume.
	QuietPeriod time.Duration `yaml:"quiet_period"`
	// BusyUtilization is the GPU utilization, in percent, that counts as another program
	// using it while the node runs no job (games do not show up as GPU processes).
	BusyUtilization float64 `yaml:"busy_utilization_pct"`
	// EngineProcesses name the engine's own GPU processes, which are not the owner's.
	EngineProcesses []string `yaml:"engine_processes"`
	// Temperature and power limits: no new jobs at or above Max, again below Resume. Zero: no
	// limit, or (Resume) a default margin below the limit.
	MaxTemperatureC    float64 `yaml:"max_temperature_c"`
	ResumeTemperatureC float64 `yaml:"resume_temperature_c"`
	MaxPowerW          float64 `yaml:"max_power_w"`
	ResumePowerW       float64 `yaml:"resume_power_w"`
}

// DefaultControl is the agent's local control address.
const DefaultControl = "127.0.0.1:7071"

// Flags registers the agent's flags with their defaults.
func (p *Provider) Flags(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&p.Config, "config", "", "YAML configuration file; the environment and flags override what it says")
	fs.StringVar(&p.Coordinator, "coordinator", "http://127.0.0.1:8080", "the coordinator's URL, or several replicas' URLs comma-separated (tried in turn on every reconnect); a DNS name resolving to several replicas is resolved again on every reconnect")
	fs.StringVar(&p.Token, "token", "", "provider token (spt-…), made with: shareai keys create --provider")
	fs.StringVar(&p.DataDir, "data-dir", "./.shareai-node", "directory that keeps the node key (the node's identity)")
	fs.StringVar(&p.Name, "name", host, "the node's display name")
	fs.StringVar(&p.Region, "region", "", "the node's region: ISO country code such as de, us, jp")
	fs.StringVar(&p.Engine, "engine", "sim", "inference engine: ollama (Ollama's own API), openai (any OpenAI-compatible server) or sim (simulated GPU)")
	fs.StringVar(&p.Upstream, "upstream", "", "the engine's base URL: http://127.0.0.1:11434 for ollama (the default), http://127.0.0.1:8000/v1 for openai")
	fs.StringVar(&p.UpstreamAPIKey, "upstream-api-key", "", "openai engine: bearer key for the server, if it needs one")
	fs.StringVar(&p.Continue, "continue", "", "openai engine: how the server continues a partial answer, so this node can finish answers other nodes dropped: prefill (llama.cpp, Ollama, TGI, a ShareAI gateway) or vllm (vLLM, SGLang); empty: it does not")
	fs.StringVar(&p.Pull, "pull", "", "ollama engine: comma-separated models to pull at start when missing")
	fs.StringVar(&p.Models, "models", "", "comma-separated models to offer (default: every model the engine serves)")
	fs.IntVar(&p.MaxConcurrent, "max-concurrent", 4, "jobs run at once per model")
	fs.IntVar(&p.ContextLength, "context-length", 0, "context length to advertise when the engine does not say; for ollama, the window every request runs with (default 8192)")
	fs.Float64Var(&p.GoldShare, "gold-share", 0, "share of each model's slots kept for gold requests (service_tier priority), from 0 to 1: 0.25 of 4 slots keeps 1")
	fs.BoolVar(&p.NoBronze, "no-bronze", false, "refuse bronze requests (service_tier flex): the cheapest tier, which gold requests may preempt")
	fs.BoolVar(&p.NoBatch, "no-batch", false, "refuse batch work (the Batch API's lines, billed at the batch price), which any live request may preempt")
	fs.StringVar(&p.Quantization, "quantization", "", "the models' quantization to advertise (Q4_K_M, Q8_0, fp8, …), which buyers can require")
	fs.StringVar(&p.Availability.Windows, "windows", "", "weekly availability windows in --timezone, e.g. 'mon-fri 08:00-18:00, 22:30-01:00' (default: always)")
	fs.StringVar(&p.Availability.Timezone, "timezone", "", "time zone of --windows, e.g. Europe/Berlin (default: the machine's)")
	fs.DurationVar(&p.Availability.Drain, "drain", 10*time.Minute, "how long running jobs may go on once a window closes or the node is paused")
	fs.Float64Var(&p.Guard.MaxTemperatureC, "max-temperature", 0, "take no new jobs while a GPU is this hot (°C); 0: no limit")
	fs.StringVar(&p.Control, "control", DefaultControl, "local address of the agent's control API (pause, resume, status); empty: none")
	fs.DurationVar(&p.SimTTFT, "sim-ttft", 150*time.Millisecond, "sim engine: time to first token")
	fs.Float64Var(&p.SimTPS, "sim-tps", 60, "sim engine: tokens per second (0: no delay)")
	p.Ask.Flags(fs)
	p.Trace.Flags(fs)
	p.Log.Flags(fs)
	p.Guard.StepAside = true
	p.Guard.QuietPeriod = 5 * time.Minute
	p.Guard.BusyUtilization = 30
}

// providerFile is the YAML file's shape. Settings that also have a flag are strings here: the
// file sets the flag's value, which the environment and the command line then override.
type providerFile struct {
	Coordinator   string   `yaml:"coordinator"`
	Token         string   `yaml:"token"`
	DataDir       string   `yaml:"data_dir"`
	Name          string   `yaml:"name"`
	Region        string   `yaml:"region"`
	MaxConcurrent string   `yaml:"max_concurrent"`
	ContextLength string   `yaml:"context_length"`
	Quantization  string   `yaml:"quantization"`
	GoldShare     string   `yaml:"gold_share"`
	NoBronze      string   `yaml:"no_bronze"`
	NoBatch       string   `yaml:"no_batch"`
	Models        []string `yaml:"models"`
	Control       string   `yaml:"control"`
	Engine        struct {
		Kind     string   `yaml:"kind"`
		URL      string   `yaml:"url"`
		APIKey   string   `yaml:"api_key"`
		Continue string   `yaml:"continue"`
		Pull     []string `yaml:"pull"`
		SimTTFT  string   `yaml:"sim_ttft"`
		SimTPS   string   `yaml:"sim_tps"`
	} `yaml:"engine"`
	Price        Price   `yaml:"price"`
	Offers       []Offer `yaml:"offers"`
	Availability struct {
		Windows  string `yaml:"windows"`
		Timezone string `yaml:"timezone"`
		Drain    string `yaml:"drain"`
	} `yaml:"availability"`
	Guard struct {
		StepAside          *bool          `yaml:"step_aside"`
		QuietPeriod        *time.Duration `yaml:"quiet_period"`
		BusyUtilization    *float64       `yaml:"busy_utilization_pct"`
		EngineProcesses    []string       `yaml:"engine_processes"`
		MaxTemperatureC    string         `yaml:"max_temperature_c"`
		ResumeTemperatureC float64        `yaml:"resume_temperature_c"`
		MaxPowerW          float64        `yaml:"max_power_w"`
		ResumePowerW       float64        `yaml:"resume_power_w"`
	} `yaml:"guard"`
	Log struct {
		Level  string `yaml:"level"`
		Format string `yaml:"format"`
	} `yaml:"log"`
	Trace struct {
		OTLPEndpoint string `yaml:"otlp_endpoint"`
		Sample       string `yaml:"sample"`
	} `yaml:"trace"`
}

// LoadFile reads the YAML file at path (nothing when path is empty) into p: its settings become
// the defaults of fs's flags, so the environment and the command line still override them. A
// relative data_dir is the file's folder's, so that the node keeps its identity (the node key
// lives there) wherever the agent is started from. Errors, here and from Validate, name the
// file's settings as it writes them, with their line.
func (p *Provider) LoadFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	var f providerFile
	lines, err := decodeFile(path, &f)
	if lines == nil {
		return err // unreadable
	}
	errs := []error{err} // the settings it could not read; the others are checked too
	file := &fileSettings{path: path, lines: lines, flags: map[string]string{}, defaults: map[string]string{}, fs: fs}
	fs.VisitAll(func(fl *flag.Flag) { file.defaults[fl.Name] = fl.Value.String() })
	if f.DataDir != "" && !filepath.IsAbs(f.DataDir) {
		f.DataDir = filepath.Join(filepath.Dir(path), f.DataDir)
	}
	for _, s := range f.flagValues() {
		if s.value == "" {
			continue
		}
		fl := fs.Lookup(s.name)
		if err := fl.Value.Set(s.value); err != nil {
			errs = append(errs, file.errorf(yamlKey(s.name), "%q: %s", maskSecret(s.name, s.value), valueHint(fl, err)))
			continue
		}
		showDefault(fl, s.value)
		file.flags[s.name] = fl.Value.String()
	}
	p.Config, p.file = path, file
	p.Offers = f.Offers
	p.Price = f.Price
	g := &p.Guard
	g.EngineProcesses = f.Guard.EngineProcesses
	g.ResumeTemperatureC, g.MaxPowerW, g.ResumePowerW = f.Guard.ResumeTemperatureC, f.Guard.MaxPowerW, f.Guard.ResumePowerW
	if f.Guard.StepAside != nil {
		g.StepAside = *f.Guard.StepAside
	}
	if f.Guard.QuietPeriod != nil {
		g.QuietPeriod = *f.Guard.QuietPeriod
	}
	if f.Guard.BusyUtilization != nil {
		g.BusyUtilization = *f.Guard.BusyUtilization
	}
	return errors.Join(errs...)
}

// flagValues pairs each of the file's settings that has a flag with the flag's name.
func (f *providerFile) flagValues() []struct{ name, value string } {
	return []struct{ name, value string }{
		{"coordinator", f.Coordinator}, {"token", f.Token}, {"data-dir", f.DataDir}, {"name", f.Name},
		{"region", f.Region}, {"max-concurrent", f.MaxConcurrent}, {"context-length", f.ContextLength},
		{"quantization", f.Quantization}, {"models", strings.Join(f.Models, ",")}, {"control", f.Control},
		{"gold-share", f.GoldShare}, {"no-bronze", f.NoBronze}, {"no-batch", f.NoBatch},
		{"engine", f.Engine.Kind}, {"upstream", f.Engine.URL}, {"upstream-api-key", f.Engine.APIKey},
		{"continue", f.Engine.Continue}, {"pull", strings.Join(f.Engine.Pull, ",")},
		{"sim-ttft", f.Engine.SimTTFT}, {"sim-tps", f.Engine.SimTPS},
		{"price-input", f.Price.Input}, {"price-output", f.Price.Output},
		{"windows", f.Availability.Windows}, {"timezone", f.Availability.Timezone}, {"drain", f.Availability.Drain},
		{"max-temperature", f.Guard.MaxTemperatureC}, {"log-level", f.Log.Level}, {"log-format", f.Log.Format},
		{"otlp-endpoint", f.Trace.OTLPEndpoint}, {"trace-sample", f.Trace.Sample},
	}
}

// ProviderFileKey returns the key that sets the flag in the provider's YAML file (engine.kind
// for --engine), or "" for a flag the file does not set.
func ProviderFileKey(flagName string) string {
	for _, s := range (&providerFile{}).flagValues() {
		if s.name == flagName {
			return yamlKey(flagName)
		}
	}
	return ""
}

// providerFlagOf returns the flag that shares the file's setting key, or "".
func providerFlagOf(key string) string {
	for _, s := range (&providerFile{}).flagValues() {
		if yamlKey(s.name) == key {
			return s.name
		}
	}
	return ""
}

// yamlKey names a flag's setting in the YAML file.
func yamlKey(flagName string) string {
	switch flagName {
	case "engine":
		return "engine.kind"
	case "upstream":
		return "engine.url"
	case "upstream-api-key":
		return "engine.api_key"
	case "continue", "pull", "sim-ttft", "sim-tps":
		return "engine." + strings.ReplaceAll(flagName, "-", "_")
	case "price-input", "price-output":
		return "price." + strings.TrimPrefix(flagName, "price-")
	case "windows", "timezone", "drain":
		return "availability." + flagName
	case "max-temperature":
		return "guard.max_temperature_c"
	case "log-level", "log-format":
		return "log." + strings.TrimPrefix(flagName, "log-")
	case "otlp-endpoint":
		return "trace.otlp_endpoint"
	case "trace-sample":
		return "trace.sample"
	}
	return strings.ReplaceAll(flagName, "-", "_")
}

// ConfigPath finds the configuration file named by args (--config FILE or --config=FILE), or
// else by SHAREAI_CONFIG: it is read before the flags are parsed, since they override it.
func ConfigPath(args []string, getenv func(string) string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return getenv("SHAREAI_CONFIG")
}

// ModelList returns the --models list.
func (p *Provider) ModelList() []string { return splitList(p.Models) }

// PullList returns the --pull list.
func (p *Provider) PullList() []string { return splitList(p.Pull) }

func splitList(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// Validate checks the settings. An invalid value from the file is a *FileError that names the
// setting as the file writes it, with its line; others are *FieldError naming the flag.
func (p *Provider) Validate() error { return p.file.name(p.validate()) }

func (p *Provider) validate() error {
	var errs []error
	if !isHTTPURLs(p.Coordinator) {
		errs = append(errs, &FieldError{"coordinator", "want a URL such as https://coordinator.example:8080, or several comma-separated"})
	}
	if p.Token == "" {
		errs = append(errs, &FieldError{"token", "required: a provider token (spt-…)"})
	}
	if p.DataDir == "" {
		errs = append(errs, &FieldError{"data-dir", "must not be empty"})
	}
	errs = append(errs, p.validateRegion())
	errs = append(errs, ValidateEngine(p.Engine, p.Upstream))
	if p.Continue != "" && p.Continue != "prefill" && p.Continue != "vllm" {
		errs = append(errs, &FieldError{"continue", fmt.Sprintf("%q is not prefill or vllm", p.Continue)})
	}
	if p.Pull != "" && p.Engine != "ollama" {
		errs = append(errs, &FieldError{"pull", "only the ollama engine pulls models"})
	}
	if p.MaxConcurrent < 1 {
		errs = append(errs, &FieldError{"max-concurrent", "must be at least 1"})
	}
	if !(p.GoldShare >= 0 && p.GoldShare <= 1) {
		errs = append(errs, &FieldError{"gold-share", "must be between 0 and 1"})
	}
	if p.ContextLength < 0 {
		errs = append(errs, &FieldError{"context-length", "must not be negative"})
	}
	if p.SimTTFT < 0 {
		errs = append(errs, &FieldError{"sim-ttft", "must not be negative"})
	}
	if p.SimTPS < 0 {
		errs = append(errs, &FieldError{"sim-tps", "must not be negative"})
	}
	if in, out, err := p.Ask.Prices(); err != nil {
		errs = append(errs, err)
	} else if _, err := p.AskSchedule(in, out); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.validateOffers()...)
	if loc, err := p.Availability.Location(); err != nil {
		errs = append(errs, err)
	} else if _, err := schedule.Parse(p.Availability.Windows, loc); p.Availability.Windows != "" && err != nil {
		errs = append(errs, &FieldError{"windows", err.Error()})
	}
	if p.Availability.Drain < 0 {
		errs = append(errs, &FieldError{"drain", "must not be negative"})
	}
	if p.Control != "" {
		if host, _, err := net.SplitHostPort(p.Control); err != nil {
			errs = append(errs, &FieldError{"control", "want host:port, such as " + DefaultControl})
		} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			errs = append(errs, &FieldError{"control", "must be a loopback address (127.0.0.1 or ::1): anyone who reaches it can pause the node"})
		}
	}
	errs = append(errs, p.Guard.validate())
	errs = append(errs, p.Trace.Validate())
	if _, err := p.Log.Logger(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateRegion checks the region as the coordinator does when the node registers, which
// refuses one it does not take (after dialling, for good): its ASCII letters lower-cased, it
// must be a [protocol.ValidRegion]. A valid region is kept lower-cased, as the coordinator
// keeps it; an invalid one is left as written, so that the error names where it came from.
func (p *Provider) validateRegion() error {
	region := protocol.NormalRegion(p.Region)
	if !protocol.ValidRegion(region) {
		return &FieldError{"region", fmt.Sprintf("%q is not a region: want an ISO country code such as de or us, "+
			"or lower-case letters and digits in words joined by hyphens, beginning with a letter, such as eu or eu-west "+
			"(at most %d bytes)", p.Region, protocol.MaxRegionBytes)}
	}
	p.Region = region
	return nil
}

func (p *Provider) validateOffers() []error {
	var errs []error
	seen := map[string]bool{}
	for i, o := range p.Offers {
		field := func(name string) string { return fmt.Sprintf("offers[%d].%s", i, name) }
		switch {
		case o.Model == "":
			errs = append(errs, &FieldError{field("model"), "required: the model's name as the engine knows it"})
		case seen[o.Model]:
			errs = append(errs, &FieldError{field("model"), fmt.Sprintf("%q is offered twice", o.Model)})
		}
		seen[o.Model] = true
		if o.MaxConcurrent < 0 {
			errs = append(errs, &FieldError{field("max_concurrent"), "must not be negative"})
		}
		if o.ContextLength < 0 {
			errs = append(errs, &FieldError{field("context_length"), "must not be negative"})
		}
		if _, err := money.ParsePrice(o.Price.Input); o.Price.Input != "" && err != nil {
			errs = append(errs, &FieldError{field("price.input"), err.Error()})
		}
		if _, err := money.ParsePrice(o.Price.Output); o.Price.Output != "" && err != nil {
			errs = append(errs, &FieldError{field("price.output"), err.Error()})
		}
		if in, out, err := o.Prices(p.Ask); err == nil && len(o.Price.Windows) > 0 {
			if _, err := p.OfferAskSchedule(i, in, out); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(p.Offers) > 0 && p.Models != "" {
		errs = append(errs, &FieldError{"models", "set either models or the file's offers, not both: offers list the models with their own settings"})
	}
	return errs
}

func (g *Guard) validate() error {
	var errs []error
	if g.QuietPeriod < 0 {
		errs = append(errs, &FieldError{"guard.quiet_period", "must not be negative"})
	}
	if g.BusyUtilization < 0 || g.BusyUtilization > 100 {
		errs = append(errs, &FieldError{"guard.busy_utilization_pct", "must be a percentage between 0 and 100"})
	}
	for _, l := range []struct {
		key   string
		value float64
	}{
		{"max-temperature", g.MaxTemperatureC}, {"guard.resume_temperature_c", g.ResumeTemperatureC},
		{"guard.max_power_w", g.MaxPowerW}, {"guard.resume_power_w", g.ResumePowerW},
	} {
		if l.value < 0 {
			errs = append(errs, &FieldError{l.key, "must not be negative"})
		}
	}
	if g.ResumeTemperatureC > 0 && g.ResumeTemperatureC >= g.MaxTemperatureC {
		errs = append(errs, &FieldError{"guard.resume_temperature_c", fmt.Sprintf("%g °C must be below max_temperature_c (%g °C)", g.ResumeTemperatureC, g.MaxTemperatureC)})
	}
	if g.ResumePowerW > 0 && g.ResumePowerW >= g.MaxPowerW {
		errs = append(errs, &FieldError{"guard.resume_power_w", fmt.Sprintf("%g W must be below max_power_w (%g W)", g.ResumePowerW, g.MaxPowerW)})
	}
	return errors.Join(errs...)
}
