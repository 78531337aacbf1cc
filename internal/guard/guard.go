// Package guard decides when a provider's node must take no new jobs so that the GPU stays
// its owner's: while another program uses the GPU (the owner games or trains a model), and
// while a GPU runs too hot or draws too much power.
//
// The rules, with a Config's names:
//
//   - Step aside (StepAside): at once when a GPU process other than the node's engine shows
//     up, or when a GPU has been busier than BusyUtilizationPct for BusyFor while the node
//     ran no job (a game does not show up as a GPU process). Take jobs again once no reading
//     has shown either, nor any GPU that busy, for QuietPeriod.
//   - Heat and power: no new jobs while any GPU is at or above MaxTemperatureC or MaxPowerW;
//     such a GPU holds the pause until it reads below ResumeTemperatureC or ResumePowerW.
//   - A reading the node could not take (a nil field, nil processes, no telemetry) never
//     starts a pause. It does not end a pause for heat, and it counts as quiet for stepping
//     aside.
//
// A Guard is a state machine fed with the node's telemetry readings and the instants they
// were taken. It reads no clock and starts no goroutine, so a recorded sequence of readings
// always replays the same. It only decides: the caller stops offering jobs while it says
// paused, and decides what happens to the jobs already running.
//
// This package imports only the standard library and internal/protocol.
package guard

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// Defaults for a Config's zero fields.
const (
	DefaultBusyUtilizationPct = 30
	DefaultBusyFor            = 10 * time.Second
	DefaultQuietPeriod        = 5 * time.Minute
	// DefaultResumeMarginC is how far below the temperature limit a GPU must cool.
	DefaultResumeMarginC = 8
	// DefaultResumePowerShare is the share of the power limit a GPU must fall below.
	DefaultResumePowerShare = 0.9
)

// Config is what the provider allows. Its zero value guards nothing.
type Config struct {
	// StepAside makes the node step aside while another program uses the GPU, and come back
	// once the GPU has been free of it for QuietPeriod.
	StepAside bool
	// BusyUtilizationPct is the GPU utilization, in percent, above which a GPU that runs none
	// of the node's jobs counts as used by another program: games are graphics programs,
	// which GPU process lists do not show. 0: DefaultBusyUtilizationPct; 100: never.
	BusyUtilizationPct float64
	// BusyFor is how long a GPU must stay that busy while the node runs no job before the
	// node steps aside, so that the tail of a job that just ended does not count.
	// 0: DefaultBusyFor.
	BusyFor time.Duration
	// QuietPeriod is how long the GPU must be free of other programs before the node takes
	// jobs again. 0: DefaultQuietPeriod.
	QuietPeriod time.Duration
	// EngineProcesses name the node's own engine's GPU processes, such as ollama, which are
	// not the owner's. Names match by file name, ignoring case, folders and ".exe".
	EngineProcesses []string

	// MaxTemperatureC stops new jobs while any GPU is at least this hot; 0: no limit.
	MaxTemperatureC float64
	// ResumeTemperatureC is the temperature every GPU that was too hot must cool below before
	// jobs resume. 0: DefaultResumeMarginC below MaxTemperatureC.
	ResumeTemperatureC float64
	// MaxPowerW stops new jobs while any GPU draws at least this many watts; 0: no limit.
	MaxPowerW float64
	// ResumePowerW is the draw every GPU that drew too much must fall below before jobs
	// resume. 0: DefaultResumePowerShare of MaxPowerW.
	ResumePowerW float64
}

// Validate reports the settings that make no sense, each in its own error.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("guard: "+format, args...)) }
	if !finite(c.BusyUtilizationPct) || c.BusyUtilizationPct < 0 || c.BusyUtilizationPct > 100 {
		add("busy utilization %s%% must be between 0 and 100", num(c.BusyUtilizationPct))
	}
	if c.BusyFor < 0 {
		add("busy time %v must not be negative", c.BusyFor)
	}
	if c.QuietPeriod < 0 {
		add("quiet period %v must not be negative", c.QuietPeriod)
	}
	errs = append(errs, validateLimit("temperature", "°C", c.MaxTemperatureC, c.ResumeTemperatureC)...)
	if c.MaxTemperatureC > 0 && c.MaxTemperatureC <= DefaultResumeMarginC && c.ResumeTemperatureC == 0 {
		add("temperature limit %s °C leaves no room to cool %d °C below it: set a resume temperature",
			num(c.MaxTemperatureC), DefaultResumeMarginC)
	}
	errs = append(errs, validateLimit("power", "W", c.MaxPowerW, c.ResumePowerW)...)
	return errors.Join(errs...)
}

// validateLimit checks a limit and the level to resume below, either of them zero when unset.
func validateLimit(what, unit string, max, resume float64) []error {
	errs := []error{checkLevel(what+" limit", max, unit), checkLevel("resume "+what, resume, unit)}
	if errs[0] != nil || errs[1] != nil || resume == 0 {
		return errs
	}
	switch {
	case max == 0:
		errs = append(errs, fmt.Errorf("guard: resume %s %s %s is set, but no %s limit", what, num(resume), unit, what))
	case resume >= max:
		errs = append(errs, fmt.Errorf("guard: resume %s %s %s must be below the limit %s %s", what, num(resume), unit, num(max), unit))
	}
	return errs
}

// checkLevel checks a temperature or power setting.
func checkLevel(name string, v float64, unit string) error {
	switch {
	case !finite(v):
		return fmt.Errorf("guard: %s %s is not a number", name, num(v))
	case v < 0:
		return fmt.Errorf("guard: %s %s %s must not be negative", name, num(v), unit)
	}
	return nil
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.BusyUtilizationPct == 0 {
		c.BusyUtilizationPct = DefaultBusyUtilizationPct
	}
	if c.BusyFor == 0 {
		c.BusyFor = DefaultBusyFor
	}
	if c.QuietPeriod == 0 {
		c.QuietPeriod = DefaultQuietPeriod
	}
	if c.MaxTemperatureC > 0 && c.ResumeTemperatureC == 0 {
		c.ResumeTemperatureC = c.MaxTemperatureC - DefaultResumeMarginC
	}
	if c.MaxPowerW > 0 && c.ResumePowerW == 0 {
		c.ResumePowerW = c.MaxPowerW * DefaultResumePowerShare
	}
	return c
}

// State is what the guard decided last.
type State struct {
	// Paused says that the node must take no new jobs.
	Paused bool
	// Reason says why, for the provider, such as "GPU 1 is at 86 °C (limit 83 °C); resuming
	// below 75 °C"; several reasons are joined by "; ". It is "" when not paused.
	Reason string
	// Since is when the node last paused or resumed; zero before it first did.
	Since time.Time
}

// Guard decides, reading by reading, whether the node must take no new jobs. It is not safe
// for concurrent use.
type Guard struct {
	owner ownerWatch
	heat  heatWatch
	state State
}

// New returns a guard with cfg's settings, or cfg's errors. A new guard is not paused.
func New(cfg Config) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Guard{owner: newOwnerWatch(cfg), heat: newHeatWatch(cfg)}, nil
}

// Observe takes a telemetry reading taken at now, while the node ran running jobs, and
// returns the guard's state, and whether it changed (paused, resumed, or paused for other
// reasons) so the caller can log it. t may be nil when the node has no reading; readings
// the node could not take (nil fields, nil processes) never pause the node. Count in running
// a job that ended since the last reading, if the caller can: its work may still show.
func (g *Guard) Observe(now time.Time, t *protocol.Telemetry, running int) (State, bool) {
	var reasons []string
	for _, r := range []string{g.owner.observe(now, t, running), g.heat.observe(t)} {
		if r != "" {
			reasons = append(reasons, r)
		}
	}
	reason := strings.Join(reasons, "; ")
	paused := reason != ""
	if paused == g.state.Paused && reason == g.state.Reason {
		return g.state, false
	}
	if paused != g.state.Paused {
		g.state.Since = now
	}
	g.state.Paused, g.state.Reason = paused, reason
	return g.state, true
}

// State returns what the guard decided last.
func (g *Guard) State() State { return g.state }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num writes a reading or a setting in the shortest form, to a tenth: 86, 331.5.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}
