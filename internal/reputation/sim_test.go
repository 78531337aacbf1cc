package reputation

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// The simulations run nodes through days of 6 slots of 4 hours. In each slot a live node runs
// its jobs; every node connected gets one check (an onboarding check while new, a probe
// after); then the coordinator scores it and applies the rules, as it would.

const slotsPerDay = 6

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// behaviour is how a node behaves in one slot.
type behaviour struct {
	online       bool    // connected; offline nodes run nothing and are not checked
	jobs         int     // jobs it would run if live
	failRate     float64 // the share of its jobs it fails (its fault)
	checkFail    float64 // the chance a check of it fails (false mismatch, or cheating)
	uptime       float64 // its uptime in windows, as the coordinator measures it
	latency      float64
	throughput   float64
	coordRestart bool // the coordinator restarted at the start of this slot
}

type simNode struct {
	level                    string
	levelSince               time.Time
	days                     []Day
	checks                   []Check
	live                     float64 // the fleet's moving average; -1 before the first job
	firstSeen                time.Time
	everQuarantined, demoted int
	changes                  []string
}

func newSimNode(at time.Time) *simNode {
	return &simNode{level: store.LevelNew, levelSince: at, live: -1, firstSeen: at}
}

// step runs one slot ending at end and returns the node's score.
func (n *simNode) step(rng *rand.Rand, end time.Time, b behaviour, ru Rules) Score {
	if b.coordRestart {
		n.live = -1 // the fleet's averages start again; jobs it cut short are not recorded
	}
	if b.online {
		if Live(n.level) && b.jobs > 0 {
			day := utcDate(end.Add(-time.Nanosecond))
			if len(n.days) == 0 || !n.days[len(n.days)-1].Day.Equal(day) {
				n.days = append(n.days, Day{Day: day})
			}
			d := &n.days[len(n.days)-1]
			for range b.jobs {
				ok := rng.Float64() >= b.failRate
				d.Jobs++
				v := 1.0
				if !ok {
					d.Failed++
					v = 0
				}
				if n.live < 0 {
					n.live = 1 // as fleet.Offer.Observe: a new node starts at 1
				}
				n.live += 0.2 * (v - n.live)
			}
		}
		kind := store.CheckProbe
		if n.level == store.LevelNew {
			kind = store.CheckOnboarding
		}
		n.checks = append(n.checks, Check{At: end, Kind: kind, Passed: rng.Float64() >= b.checkFail})
	}
	// Keep what the caller would load: the last 30 days, and at least the last 5 checks.
	if i := slices.IndexFunc(n.checks, func(c Check) bool { return end.Sub(c.At) < HistoryDays*24*time.Hour }); i > 0 && len(n.checks)-i >= 5 {
		n.checks = n.checks[i:]
	}
	if len(n.days) > HistoryDays {
		n.days = n.days[len(n.days)-HistoryDays:]
	}
	r := Record{Now: end, FirstSeen: n.firstSeen, LevelSince: n.levelSince, Days: n.days, Checks: n.checks,
		UptimeInWindows: b.uptime, Reliability: n.live, LatencyRatio: b.latency, ThroughputRatio: b.throughput}
	if b.coordRestart {
		r.LatencyRatio, r.ThroughputRatio = 0, 0
	}
	s := Compute(r)
	if lvl, reason, changed := ru.Next(n.level, r, s); changed {
		if lvl == store.LevelQuarantined {
			n.everQuarantined++
		}
		if n.level == store.LevelTrusted && lvl == store.LevelVerified {
			n.demoted++
		}
		n.changes = append(n.changes, end.Format("Jan 2 15:04")+" "+n.level+" → "+lvl+": "+reason)
		n.level, n.levelSince = lvl, end
	}
	return s
}

func slotEnd(day, slot int) time.Time {
	return simStart.AddDate(0, 0, day).Add(time.Duration(slot+1) * 4 * time.Hour)
}

// honest is a node that serves the model it is asked for, with ordinary troubles.
type honest struct {
	jobsPerSlot         float64 // 0.2 … 40
	failRate            float64 // 0 … 2%
	uptime              float64
	latency, throughput float64
	offlineUntil        int // day
	badDay              int // a day its connection is poor: 10% of its jobs fail
}

func newHonest(rng *rand.Rand) *honest {
	return &honest{
		jobsPerSlot:  0.2 + rng.Float64()*40,
		failRate:     rng.Float64() * 0.02,
		uptime:       0.6 + rng.Float64()*0.4,
		latency:      0.6 + rng.Float64()*1.9,
		throughput:   0.4 + rng.Float64()*1.2,
		offlineUntil: -1,
		badDay:       -1,
	}
}

func (h *honest) behave(rng *rand.Rand, day, slot int, noise float64) behaviour {
	if slot == 0 {
		switch {
		case rng.IntN(40) == 0: // away for 1 to 4 days, paused
			h.offlineUntil = day + 1 + rng.IntN(4)
		case rng.IntN(30) == 0:
			h.badDay = day
		}
	}
	b := behaviour{online: day >= h.offlineUntil, failRate: h.failRate, checkFail: noise,
		uptime: min(h.uptime+rng.Float64()*0.1-0.05, 1), latency: h.latency, throughput: h.throughput}
	if day == h.badDay {
		b.failRate = 0.10
	}
	b.jobs = int(h.jobsPerSlot * (0.5 + rng.Float64()))
	return b
}

// Over 1000 honest nodes × 30 days, with a false-mismatch rate of 0.5% on checks, 1 in 30
// days a bad connection (10% of jobs failed), 1 in 40 days away for 1 to 4 days, slow and
// fast hardware, and two coordinator restarts: no node is quarantined.
func TestHonestFleet(t *testing.T) {
	nodes, days := 1000, 30
	if testing.Short() {
		nodes = 200
	}
	for _, tt := range []struct {
		noise float64
		zero  bool // want no honest node quarantined
	}{
		{0.005, true},
		{0.02, false}, // a sensitivity run, for the record
	} {
		rng := rand.New(rand.NewPCG(7, uint64(tt.noise*1e4)))
		ru := DefaultRules()
		var quarantined, demoted, trusted, verified int
		lowest := 1.0
		for i := range nodes {
			h := newHonest(rng)
			n := newSimNode(simStart)
			for day := range days {
				for slot := range slotsPerDay {
					b := h.behave(rng, day, slot, tt.noise)
					b.coordRestart = (day == 10 || day == 20) && slot == 3
					s := n.step(rng, slotEnd(day, slot), b, ru)
					if Live(n.level) {
						lowest = min(lowest, s.Value)
					}
				}
			}
			if n.everQuarantined > 0 {
				quarantined++
				if tt.zero {
					t.Errorf("honest node %d quarantined: %v", i, n.changes)
				}
			}
			if n.demoted > 0 {
				demoted++
			}
			switch n.level {
			case store.LevelTrusted:
				trusted++
			case store.LevelVerified:
				verified++
			}
		}
		t.Logf("honest fleet, %.1f%% false check failures: %d of %d nodes quarantined in %d days (false-positive rate %.2f%%); "+
			"at the end %d trusted, %d verified; %d demoted from trusted at some time; lowest live score %.3f",
			100*tt.noise, quarantined, nodes, days, 100*float64(quarantined)/float64(nodes), trusted, verified, demoted, lowest)
	}
}

// A node serving a different model under the asked name fails every check: it is
// quarantined at its QuarantineFailed-th check, whatever its level and record.
func TestCheater(t *testing.T) {
	ru := DefaultRules()
	for _, tt := range []struct {
		name       string
		honestDays int    // days it behaves before it cheats
		level      string // its level when it starts to cheat
	}{
		{"from the start", 0, store.LevelNew},
		{"once verified", 3, store.LevelVerified},
		{"once trusted", 20, store.LevelTrusted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			n := newSimNode(simStart)
			b := behaviour{online: true, jobs: 20, failRate: 0.005, uptime: 0.98, latency: 1, throughput: 1}
			for day := range tt.honestDays {
				for slot := range slotsPerDay {
					n.step(rng, slotEnd(day, slot), b, ru)
				}
			}
			if n.level != tt.level {
				t.Fatalf("level %s before cheating, want %s: %v", n.level, tt.level, n.changes)
			}
			b.checkFail = 1
			for probe := 1; ; probe++ {
				n.step(rng, slotEnd(tt.honestDays+probe/slotsPerDay, probe%slotsPerDay), b, ru)
				if n.level == store.LevelQuarantined {
					t.Logf("quarantined at check %d: %s", probe, n.changes[len(n.changes)-1])
					if probe > ru.QuarantineFailed {
						t.Errorf("quarantined at check %d, want within %d", probe, ru.QuarantineFailed)
					}
					break
				}
				if probe > 100 {
					t.Fatalf("not quarantined after 100 checks")
				}
			}
			// It stays there while it cheats.
			for probe := range 60 {
				n.step(rng, slotEnd(tt.honestDays+10+probe/slotsPerDay, probe%slotsPerDay), b, ru)
				if n.level != store.LevelQuarantined {
					t.Fatalf("cheater released: %v", n.changes)
				}
			}
		})
	}
}

// A node that cheats on some of its traffic fails that share of the probes, which cannot be
// told from buyers' requests: it is caught too, later the less it cheats.
func TestPartialCheater(t *testing.T) {
	ru := DefaultRules()
	for _, tt := range []struct {
		share       float64
		worst, mean float64 // the most probes it may take, in any trial and on average; 0 any
	}{
		{1, float64(ru.QuarantineFailed), 0},
		{0.5, 0, 15},
		{0.25, 0, 0}, // for the record
	} {
		rng := rand.New(rand.NewPCG(2, uint64(tt.share*100)))
		var total, worst int
		trials := 500
		for range trials {
			n := newSimNode(simStart)
			b := behaviour{online: true, jobs: 20, failRate: 0.005, uptime: 0.98, latency: 1, throughput: 1}
			for day := range 3 {
				for slot := range slotsPerDay {
					n.step(rng, slotEnd(day, slot), b, ru)
				}
			}
			b.checkFail = tt.share
			probe := 1
			for ; probe < 1000; probe++ {
				n.step(rng, slotEnd(3+probe/slotsPerDay, probe%slotsPerDay), b, ru)
				if n.level == store.LevelQuarantined {
					break
				}
			}
			total += probe
			worst = max(worst, probe)
		}
		t.Logf("cheating on %.0f%% of its traffic: quarantined after %.1f probes on average, %d at worst, over %d trials",
			100*tt.share, float64(total)/float64(trials), worst, trials)
		if mean := float64(total) / float64(trials); (tt.worst > 0 && float64(worst) > tt.worst) || (tt.mean > 0 && mean > tt.mean) {
			t.Errorf("cheating on %.0f%%: quarantined after %.1f probes on average, %d at worst; want at most %v on average, %v at worst",
				100*tt.share, mean, worst, tt.mean, tt.worst)
		}
	}
}

// A node that starts to flap (drops connections mid-job) falls at once below an honest twin,
// loses its trusted place in the auction within hours, and, flapping worse, all live traffic.
func TestFlapping(t *testing.T) {
	ru := DefaultRules()
	rng := rand.New(rand.NewPCG(5, 5))
	steady, flappy := newSimNode(simStart), newSimNode(simStart)
	b := behaviour{online: true, jobs: 20, failRate: 0.005, uptime: 0.98, latency: 1, throughput: 1}
	for day := range 20 {
		for slot := range slotsPerDay {
			steady.step(rng, slotEnd(day, slot), b, ru)
			flappy.step(rng, slotEnd(day, slot), b, ru)
		}
	}
	if steady.level != store.LevelTrusted || flappy.level != store.LevelTrusted {
		t.Fatalf("levels %s and %s after 20 honest days, want trusted", steady.level, flappy.level)
	}
	flap := b
	flap.failRate, flap.uptime = 0.15, 0.7 // 15% of its jobs dropped mid-stream
	for slot := range 3 * slotsPerDay {
		end := slotEnd(20+slot/slotsPerDay, slot%slotsPerDay)
		s1 := steady.step(rng, end, b, ru)
		s2 := flappy.step(rng, end, flap, ru)
		if !(s2.Value < s1.Value) {
			t.Errorf("slot %d of flapping: score %.3f, steady twin %.3f", slot, s2.Value, s1.Value)
		}
		if slot == 0 {
			t.Logf("first slot of flapping: score %.3f, steady twin %.3f", s2.Value, s1.Value)
		}
	}
	if Rank(flappy.level) >= Rank(steady.level) {
		t.Errorf("after 3 days of flapping: %s, steady twin %s; want it ranked lower: %v", flappy.level, steady.level, flappy.changes)
	}
	t.Logf("flapping 15%%: %v", flappy.changes)

	flap.failRate, flap.uptime = 0.4, 0.5 // worse
	for slot := range 3 * slotsPerDay {
		flappy.step(rng, slotEnd(23+slot/slotsPerDay, slot%slotsPerDay), flap, ru)
	}
	if flappy.level != store.LevelQuarantined {
		t.Errorf("flapping 40%%: %s, want quarantined: %v", flappy.level, flappy.changes)
	}
	t.Logf("flapping 40%%: %v", flappy.changes[len(flappy.changes)-1])
}
