package pricing_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/pricing"
)

var surgeCfg = pricing.SurgeConfig{Enabled: true, Floor: 1, Ceiling: 2, Target: 0.7, Smoothing: time.Minute}

// Whatever utilization it is fed, however often, the multiplier stays within its bounds.
func TestSurge_StaysWithinBounds(t *testing.T) {
	cfgs := []pricing.SurgeConfig{surgeCfg, {Enabled: true, Floor: 0.8, Ceiling: 3.3, Target: 0}, {Enabled: true, Floor: 1.5, Ceiling: 1.5, Target: 0.99}}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := cfgs[seed%uint64(len(cfgs))]
		s := pricing.NewSurge(cfg)
		lo, hi := int64(math.Round(cfg.Floor*10000)), int64(math.Round(cfg.Ceiling*10000))
		for range 2000 {
			u := rng.Float64()*3 - 1 // also outside [0, 1]
			switch rng.IntN(20) {
			case 0:
				u = math.NaN()
			case 1:
				u = math.Inf(1)
			case 2:
				u = math.Inf(-1)
			}
			dt := time.Duration(rng.Int64N(int64(10 * time.Minute)))
			if m := s.Observe(u, dt); m < lo || m > hi {
				t.Fatalf("seed %d: multiplier %d outside [%d, %d] after u=%v", seed, m, lo, hi, u)
			}
		}
	}
}

// Utilization wandering around the target, or around a level above it, moves the price at most
// once while the average settles, and then not again: it does not flap.
func TestSurge_DoesNotFlap(t *testing.T) {
	cfg := surgeCfg
	cfg.Smoothing = 0                                           // the default, 10 minutes
	for _, centre := range []float64{0.7, 0.715, 0.85, 0.865} { // 0.715 and 0.865: where raw is half-way between steps
		s := pricing.NewSurge(cfg)
		rng := rand.New(rand.NewPCG(7, 7))
		changes, last := 0, s.Multiplier()
		for i := range 20000 { // 15 s samples, three days and a half
			u := centre + (rng.Float64()-0.5)*0.1 // ±5 points of noise
			if m := s.Observe(u, 15*time.Second); m != last {
				if i > 200 { // after the average settles: five time constants
					changes++
				}
				last = m
			}
		}
		if changes > 0 {
			t.Errorf("around %v: the multiplier changed %d times once settled; want none", centre, changes)
		}
	}
}

// However wild the utilization, the multiplier moves at most once per smoothing time constant.
func TestSurge_MovesAtMostOncePerTimeConstant(t *testing.T) {
	s := pricing.NewSurge(surgeCfg)
	rng := rand.New(rand.NewPCG(3, 3))
	var changes int
	last, elapsed := s.Multiplier(), time.Duration(0)
	for range 10000 {
		u := float64(rng.IntN(2)) // 0 or 1, every second
		elapsed += time.Second
		if m := s.Observe(u, time.Second); m != last {
			changes, last = changes+1, m
		}
	}
	if most := int(elapsed/surgeCfg.Smoothing) + 1; changes > most {
		t.Errorf("%d changes in %s; want at most %d", changes, elapsed, most)
	}
}

// At steady utilization, the multiplier converges to the formula, within one step.
func TestSurge_ConvergesToTheFormula(t *testing.T) {
	for _, u := range []float64{0, 0.5, 0.7, 0.8, 0.85, 0.9, 0.97, 1} {
		s := pricing.NewSurge(surgeCfg)
		s.Observe(0, 0)
		var m int64
		for range 200 {
			m = s.Observe(u, 30*time.Second)
		}
		want := 10000 * surgeCfg.Raw(u) // 1 + (u − 0.7)/0.3 above the target
		if math.Abs(float64(m)-want) > pricing.SurgeStep {
			t.Errorf("u=%v: multiplier %d; want %v within one step", u, m, want)
		}
		if u == 1 && m != 20000 {
			t.Errorf("u=1: %d; want the ceiling exactly", m)
		}
		if u <= surgeCfg.Target && m != 10000 {
			t.Errorf("u=%v at or below the target: %d; want the floor exactly", u, m)
		}
	}
}

// A burst shorter than the time constant moves the price less than a long one.
func TestSurge_Smooths(t *testing.T) {
	s := pricing.NewSurge(surgeCfg)
	s.Observe(0.5, 0)
	if m := s.Observe(1, 5*time.Second); m != 10000 {
		t.Errorf("after a 5 s burst: %d; want the floor still", m)
	}
	off := pricing.NewSurge(pricing.SurgeConfig{})
	if m := off.Observe(1, time.Hour); m != 10000 {
		t.Errorf("surge off: %d; want ×1", m)
	}
}
