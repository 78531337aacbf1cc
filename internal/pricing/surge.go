package pricing

import (
	"math"
	"time"
)

// Surge is the operator's surge multiplier of one model's asks, driven by its utilization u
// (slots running ÷ slots of its nodes that take jobs now), sampled periodically:
//
//	ū          = EWMA of u with time constant Smoothing: ū += (1 − e^(−Δt/Smoothing))·(u − ū)
//	raw(ū)     = Floor + (Ceiling − Floor) · max(0, ū − Target) / (1 − Target)
//	multiplier = the step (Floor + k·SurgeStep, or Ceiling) nearest raw(ū); it moves only when
//	             raw(ū) is at least a whole step from where it is (or within a quarter step
//	             of Ceiling), and at most once per Smoothing
//
// The smoothing absorbs bursts shorter than its time constant; the step's hysteresis keeps the
// price still while utilization wanders around a level, and the wait between moves bounds how
// often it can change whatever the noise: prices do not flap. At steady utilization the
// multiplier settles within one step of raw(u) (on the side it came from), exactly at Floor
// at or below the target and at Ceiling at full use.
type Surge struct {
	cfg    SurgeConfig
	primed bool
	avg    float64       // ū
	level  int64         // the multiplier, basis points
	since  time.Duration // since it last moved
}

// SurgeConfig configures surge. The zero value is off: the multiplier is always ×1. The
// configuration's package checks it (config.validateSurge); a Surge stays within
// [Floor, Ceiling] whatever it is fed.
type SurgeConfig struct {
	Enabled bool
	// Floor and Ceiling bound the multiplier (1 and 2: up to twice the ask), with
	// 0 < Floor ≤ Ceiling ≤ MaxSurge.
	Floor, Ceiling float64
	// Target is the utilization above which the multiplier rises from Floor, in [0, 1).
	Target float64
	// Smoothing is the time constant of the utilization's moving average; 0: DefaultSmoothing.
	Smoothing time.Duration
}

// Surge defaults and bounds.
const (
	DefaultSmoothing = 10 * time.Minute
	// SurgeStep is the multiplier's step, in basis points: ×0.1.
	SurgeStep = 1000
	// MaxSurge bounds the ceiling.
	MaxSurge = 10
	unitBP   = 10000
)

// NewSurge returns a model's surge at its floor (×1 when surge is off).
func NewSurge(cfg SurgeConfig) *Surge {
	if cfg.Smoothing <= 0 {
		cfg.Smoothing = DefaultSmoothing
	}
	return &Surge{cfg: cfg, level: cfg.Start(), since: cfg.Smoothing}
}

// Start is the multiplier before any sample, in basis points: the floor, or ×1 when surge is
// off.
func (c SurgeConfig) Start() int64 {
	if !c.Enabled {
		return unitBP
	}
	return bp(c.Floor)
}

// Multiplier returns the multiplier now, in basis points (10000: ×1).
func (s *Surge) Multiplier() int64 { return s.level }

// Utilization returns the smoothed utilization ū.
func (s *Surge) Utilization() float64 { return s.avg }

// Observe takes a sample u of the model's utilization, dt after the one before, and returns the
// multiplier in basis points. A u outside [0, 1] counts as the nearest bound; one that is not a
// number is ignored.
func (s *Surge) Observe(u float64, dt time.Duration) int64 {
	if !s.cfg.Enabled || math.IsNaN(u) {
		return s.level
	}
	u = min(max(u, 0), 1)
	if !s.primed {
		s.avg, s.primed = u, true
	} else if dt > 0 {
		s.avg += (1 - math.Exp(-float64(dt)/float64(s.cfg.Smoothing))) * (u - s.avg)
	}
	s.since += max(dt, 0)
	floor, ceiling := bp(s.cfg.Floor), bp(s.cfg.Ceiling)
	raw := s.cfg.Raw(s.avg) * unitBP
	// ū only nears 1, so raw(ū) only nears Ceiling: within a quarter step of it counts as there.
	if raw >= float64(ceiling)-SurgeStep/4 {
		raw = float64(ceiling)
	}
	if math.Abs(raw-float64(s.level)) >= SurgeStep && s.since >= s.cfg.Smoothing {
		steps := math.Round((raw - float64(floor)) / SurgeStep)
		s.level, s.since = floor+int64(steps)*SurgeStep, 0
	}
	s.level = min(max(s.level, floor), ceiling)
	return s.level
}

// Raw is the formula's multiplier at utilization u, before smoothing and steps.
func (c SurgeConfig) Raw(u float64) float64 {
	x := max(0, u-c.Target) / (1 - c.Target)
	return min(max(c.Floor+(c.Ceiling-c.Floor)*x, c.Floor), c.Ceiling)
}

// bp is a multiplier in basis points, rounded to the nearest.
func bp(f float64) int64 { return int64(math.Round(f * unitBP)) }
