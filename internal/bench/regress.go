package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Tolerance is how much more CPU per request than its baseline a comparison's network may
// add before Check calls it a regression: 25%.
const Tolerance = 0.25

// MachineClass names the kind of machine this process runs on, as baselines are kept by:
// the OS and architecture, the CPU's model name and the CPUs this process may use, such as
// "linux/amd64, AMD EPYC 7B13, 2 CPUs". Figures measured on one class hold only on it.
var MachineClass = sync.OnceValue(func() string {
	info, _ := os.ReadFile("/proc/cpuinfo") // Linux; elsewhere the model is unknown
	return machineClass(runtime.GOOS, runtime.GOARCH, cpuModel(string(info)), runtime.NumCPU())
})

func machineClass(goos, goarch, model string, cpus int) string {
	return fmt.Sprintf("%s/%s, %s, %d CPUs", goos, goarch, model, cpus)
}

// cpuModel is the CPU's model from /proc/cpuinfo: its "model name" (x86), or else its
// "Hardware" or "CPU implementer" and "CPU part" (Arm); "unknown CPU" when it says none.
func cpuModel(cpuinfo string) string {
	fields := map[string]string{}
	for line := range strings.Lines(cpuinfo) {
		k, v, ok := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.Join(strings.Fields(v), " ")
		if _, seen := fields[k]; ok && !seen && v != "" {
			fields[k] = v
		}
	}
	switch {
	case fields["model name"] != "":
		return fields["model name"]
	case fields["Hardware"] != "":
		return fields["Hardware"]
	case fields["CPU implementer"] != "" && fields["CPU part"] != "":
		return "CPU implementer " + fields["CPU implementer"] + " part " + fields["CPU part"]
	}
	return "unknown CPU"
}

// Scenario names the load of a comparison, as baselines are kept by: streamed or not, the
// concurrency, requests, max_tokens and the providers of the network this process started.
func (c *Comparison) Scenario() string {
	mode := "json"
	if c.Stream {
		mode = "stream"
	}
	s := fmt.Sprintf("%s c=%d n=%d max_tokens=%d providers=%d", mode, c.Concurrency, c.Requests, c.MaxTokens, c.Providers)
	if c.Warm > 0 {
		s += fmt.Sprintf(" warm=%d", c.Warm)
	}
	return s
}

// Baseline is the figures later comparisons are held to (a JSON file, committed), by
// machine class and then scenario.
type Baseline struct {
	About string `json:"about"`
	// Commit is the build that measured the figures: its VCS revision, as `go build` stamps
	// it (BuildRevision). A check can build that commit and run it beside the build it
	// checks, in the same run (CheckAgainst), so that the machine's speed on the day cancels
	// out; "" when the figures came from uncommitted changes.
	Commit   string                       `json:"commit,omitempty"`
	Machines map[string]map[string]Figure `json:"machines"`
}

// BuildRevision is the VCS revision this binary was built from, as `go build` stamps it in
// a git checkout, and whether the checkout had uncommitted changes; "" when it was not
// stamped (go run, a build outside a checkout).
func BuildRevision() (revision string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}

// Figure is one comparison's figures, as a baseline keeps them. CPU is in microseconds per
// request.
type Figure struct {
	// AddedCPU is what the network added (Comparison.AddedCPU): the figure Check holds.
	AddedCPU   float64 `json:"added_cpu_us"`
	DirectCPU  float64 `json:"direct_cpu_us"`
	NetworkCPU float64 `json:"network_cpu_us"`
	Ratio      float64 `json:"ratio"`
	// RequestsPerSecond is the network path's: for the reader, not checked.
	RequestsPerSecond float64 `json:"network_requests_per_second"`
	Measured          string  `json:"measured"` // the day, 2006-01-02
}

// LoadBaseline reads a baseline file; a file that does not exist is an empty baseline.
func LoadBaseline(path string) (*Baseline, error) {
	b := &Baseline{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, b); err != nil {
			return nil, fmt.Errorf("baseline %s: %w", path, err)
		}
	}
	if b.Machines == nil {
		b.Machines = map[string]map[string]Figure{}
	}
	return b, nil
}

// Save writes the baseline to path, indented, its keys sorted.
func (b *Baseline) Save(path string) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Record keeps c's figures as the baseline of its machine class and scenario, measured on
// the day of now.
func (b *Baseline) Record(c *Comparison, now time.Time) {
	if b.Machines == nil {
		b.Machines = map[string]map[string]Figure{}
	}
	m := b.Machines[c.Machine]
	if m == nil {
		m = map[string]Figure{}
		b.Machines[c.Machine] = m
	}
	m[c.Scenario()] = Figure{
		AddedCPU: round1(c.AddedCPU), DirectCPU: round1(c.Direct.CPU), NetworkCPU: round1(c.Network.CPU),
		Ratio: round1(c.Ratio), RequestsPerSecond: round1(c.Network.Report.RequestsPerSecond),
		Measured: now.UTC().Format(time.DateOnly),
	}
}

// round1 rounds to one decimal, so that a baseline file reads as figures, not noise.
func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// Verdicts of Check.
const (
	VerdictOK         = "ok"          // within the tolerance of the baseline
	VerdictImproved   = "improved"    // better than the baseline by more than the tolerance: record it
	VerdictRegressed  = "regressed"   // worse than the baseline by more than the tolerance
	VerdictNoBaseline = "no_baseline" // nothing recorded for this machine class and scenario
)

// Verdict is a comparison held to a baseline.
type Verdict struct {
	Machine  string  `json:"machine"`
	Scenario string  `json:"scenario"`
	AddedCPU float64 `json:"added_cpu_us"` // measured
	// Baseline is the AddedCPU recorded; nil when none is.
	Baseline *float64 `json:"baseline_added_cpu_us,omitempty"`
	// Change is AddedCPU / Baseline − 1: 0.1 is 10% more CPU than the baseline.
	Change    float64 `json:"change"`
	Tolerance float64 `json:"tolerance"`
	Status    string  `json:"status"` // VerdictOK, VerdictImproved, VerdictRegressed or VerdictNoBaseline
	Message   string  `json:"message"`
}

// Failed reports whether the verdict is a regression.
func (v *Verdict) Failed() bool { return v.Status == VerdictRegressed }

// Check holds what c's network added, per request, to the baseline of c's machine class and
// scenario: more than tolerance above it is a regression. Without a baseline for them, the
// verdict says so and passes: figures from another kind of machine say nothing of this one.
func Check(b *Baseline, c *Comparison, tolerance float64) *Verdict {
	v := &Verdict{Machine: c.Machine, Scenario: c.Scenario(), AddedCPU: c.AddedCPU, Tolerance: tolerance}
	f, ok := b.Machines[c.Machine][v.Scenario]
	if !ok || f.AddedCPU <= 0 {
		v.Status = VerdictNoBaseline
		v.Message = fmt.Sprintf("No baseline for machine class %q, scenario %q: the network added %s of CPU per request, not checked. "+
			"Record it with --update-baseline (scripts/bench-regress.sh --update) and commit the file.", v.Machine, v.Scenario, micros(v.AddedCPU))
		return v
	}
	judge(v, f.AddedCPU, fmt.Sprintf("the %s recorded on %s for %q, %q", micros(f.AddedCPU), f.Measured, v.Machine, v.Scenario), tolerance)
	return v
}

// CheckAgainst holds what c's network added, per request, to what ref's added: the same
// load measured minutes apart on the same machine by another build, the reference, which
// about names ("the baseline's build, commit 1a2b3c4"). More than tolerance above it is a
// regression. The machine's speed on the day then cancels out: a figure recorded on another
// host of the same class (cloud machines' "AMD EPYC" are many CPUs) may differ from this
// one's by more than the tolerance.
func CheckAgainst(ref *Comparison, about string, c *Comparison, tolerance float64) *Verdict {
	v := &Verdict{Machine: c.Machine, Scenario: c.Scenario(), AddedCPU: c.AddedCPU, Tolerance: tolerance}
	if ref.AddedCPU <= 0 { // the reference's network cost less than the mock alone: noise, nothing to hold to
		v.Status = VerdictNoBaseline
		v.Message = fmt.Sprintf("The network of %s added no CPU per request in this run (%s): this build's %s is not checked.",
			about, micros(ref.AddedCPU), micros(v.AddedCPU))
		return v
	}
	judge(v, ref.AddedCPU, fmt.Sprintf("the %s that %s added in this run", micros(ref.AddedCPU), about), tolerance)
	return v
}

// judge sets v's verdict against base, the added CPU that than describes.
func judge(v *Verdict, base float64, than string, tolerance float64) {
	v.Baseline = &base
	v.Change = v.AddedCPU/base - 1
	pct := fmt.Sprintf("%.0f%%", 100*abs(v.Change))
	switch {
	case v.Change > tolerance:
		v.Status = VerdictRegressed
		v.Message = fmt.Sprintf("REGRESSION: the network added %s of CPU per request, %s more than %s (at most %.0f%% more passes). "+
			"Find the change that costs it; if the cost is wanted, record the new figure with --update-baseline (scripts/bench-regress.sh --update).",
			micros(v.AddedCPU), pct, than, 100*tolerance)
	case v.Change < -tolerance:
		v.Status = VerdictImproved
		v.Message = fmt.Sprintf("Improved: the network added %s of CPU per request, %s less than %s. "+
			"Record the new figure with --update-baseline (scripts/bench-regress.sh --update), so that later changes are held to it.",
			micros(v.AddedCPU), pct, than)
	default:
		v.Status = VerdictOK
		more := "more"
		if v.Change < 0 {
			more = "less"
		}
		v.Message = fmt.Sprintf("OK: the network added %s of CPU per request, %s %s than %s (within %.0f%%).",
			micros(v.AddedCPU), pct, more, than, 100*tolerance)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
