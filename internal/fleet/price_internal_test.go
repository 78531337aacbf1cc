package fleet

import (
	"testing"
	"time"

	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// priceFleet is a fleet of one node offering "m" on 4 slots at $0.10 / $0.20, on a clock the
// test moves.
func priceFleet(surge pricing.SurgeConfig) (*Fleet, *Offer, *time.Time) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	f := New(Config{Surge: surge, Now: func() time.Time { return now }})
	n := (&Node{ID: "n1"}).WithLevel(store.LevelVerified)
	o := &Offer{Offer: protocol.Offer{Model: "m", MaxConcurrent: 4, InputPrice: 100_000_000, OutputPrice: 200_000_000}, Node: n, fleet: f}
	n.Offers = []*Offer{o}
	f.nodes[n.ID], f.byModel["m"] = n, []*Offer{o}
	return f, o, &now
}

// Surge prices a busy model up, within its ceiling, in what the offer asks (and so in its
// candidates and the hold); the rankings hear of each change; an idle model goes back to the
// floor; a paused node's slots are not the model's capacity.
func TestSampleSurge(t *testing.T) {
	f, o, now := priceFleet(pricing.SurgeConfig{Enabled: true, Floor: 1, Ceiling: 2, Target: 0.5, Smoothing: time.Minute})
	sample := func(running int, times int) {
		for range times {
			o.mu.Lock()
			o.running = running
			o.mu.Unlock()
			*now = now.Add(15 * time.Second)
			f.SampleSurge()
		}
	}
	sample(0, 1)
	if p := o.Price(); p.Surge != 10000 || p.Input != 100_000_000 {
		t.Fatalf("idle: %+v; want ×1", p)
	}
	changed := f.Changed()
	sample(4, 40) // every slot busy for 10 minutes
	if p := o.Price(); p.Surge != 20000 || p.Input != 200_000_000 || p.Output != 400_000_000 {
		t.Errorf("full: %+v; want the ceiling, ×2, in the price", p)
	}
	if c := o.Candidate(); c.InputPrice != 200_000_000 || c.Surge != 20000 {
		t.Errorf("candidate %+v; want the surged price", c)
	}
	select {
	case <-changed:
	default:
		t.Error("the surge changed and the rankings were not told")
	}
	sample(3, 40) // 75%: half-way up, ×1.5, reached from above: within a step of it
	half := o.Price().Surge
	if half < 15000 || half > 16000 {
		t.Errorf("at 75%%: ×%v; want ×1.5 within one step", float64(half)/10000)
	}
	o.Node.state.Store(&nodeState{paused: "outside its windows"})
	sample(0, 40)
	if p := o.Price(); p.Surge != half {
		t.Errorf("all nodes paused: ×%v; want the multiplier kept, ×%v", float64(p.Surge)/10000, float64(half)/10000)
	}
	o.Node.state.Store(&nodeState{})
	sample(0, 40)
	if p := o.Price(); p.Surge != 10000 {
		t.Errorf("idle again: ×%v; want the floor", float64(p.Surge)/10000)
	}

	off, o2, _ := priceFleet(pricing.SurgeConfig{})
	o2.running = 4
	off.SampleSurge()
	if p := o2.Price(); p.Surge != 10000 || p.Input != 100_000_000 {
		t.Errorf("surge off: %+v; want the ask as it is", p)
	}
}

// A schedule set for a node in the console replaces its offers' own at once; clearing it
// brings their own back; a node another replica holds is not this one's to change.
func TestSetAskSchedule(t *testing.T) {
	f, o, now := priceFleet(pricing.SurgeConfig{})
	o.own, _ = pricing.Compile(&protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "own", When: "daily 00:00-24:00", InputPrice: 1, OutputPrice: 1}}})
	o.asks.Store(o.own)
	console := &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "lunch", When: "daily 11:00-13:00", InputPrice: 300_000_000, OutputPrice: 600_000_000}}}
	changed := f.Changed()
	if ok, err := f.SetAskSchedule("n1", console); !ok || err != nil {
		t.Fatalf("SetAskSchedule = %v, %v", ok, err)
	}
	if p := o.Price(); p.Window != "lunch" || p.Input != 300_000_000 || !p.Until.Equal(now.Add(time.Hour)) {
		t.Errorf("console's schedule at noon: %+v; want lunch's ask until 13:00", p)
	}
	if s := o.AskSchedule(); s == nil || s.Windows[0].Name != "lunch" {
		t.Errorf("the schedule shown: %+v; want the console's", s)
	}
	if pub := o.Published(); pub.AskSchedule == nil || pub.AskSchedule.Windows[0].Name != "lunch" || o.Offer.AskSchedule != nil {
		t.Errorf("published %+v; want the console's schedule for the other replicas, the offer as registered kept", pub.AskSchedule)
	}
	select {
	case <-changed:
	default:
		t.Error("the rankings were not told")
	}
	if _, err := f.SetAskSchedule("n1", &protocol.AskSchedule{Timezone: "Nowhere/Land", Windows: console.Windows}); err == nil {
		t.Error("a bad schedule was taken")
	}
	if _, err := f.SetAskSchedule("n1", nil); err != nil || o.Price().Window != "own" {
		t.Errorf("cleared: %v, %+v; want the offer's own schedule back", err, o.Price())
	}
	if ok, _ := f.SetAskSchedule("elsewhere", console); ok {
		t.Error("a node not here was changed")
	}
}

// Offers published by another replica are the same when their schedules are equal by value:
// a republished node is not listed anew at every publication.
func TestSameOffer(t *testing.T) {
	a := protocol.Offer{Model: "m", MaxConcurrent: 1, AskSchedule: &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "p", When: "daily 01:00-02:00"}}}}
	b := a
	b.AskSchedule = &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "p", When: "daily 01:00-02:00"}}}
	if !sameOffer(a, b) {
		t.Error("equal schedules: not the same")
	}
	b.AskSchedule.Windows[0].InputPrice = 1
	if sameOffer(a, b) {
		t.Error("a changed ask: the same")
	}
	c := a
	c.AskSchedule = nil
	if sameOffer(a, c) {
		t.Error("a schedule dropped: the same")
	}
}

// What reading an offer's price costs, as every candidate snapshot does per offer: flat, and
// by a schedule of the most windows a node may send.
func BenchmarkOffer_Price(b *testing.B) {
	_, o, _ := priceFleet(pricing.SurgeConfig{Enabled: true, Floor: 1, Ceiling: 2, Target: 0.7})
	b.Run("flat", func(b *testing.B) {
		for b.Loop() {
			o.Price()
		}
	})
	s := &protocol.AskSchedule{Timezone: "Europe/Berlin"}
	for i := range protocol.MaxAskWindows {
		s.Windows = append(s.Windows, protocol.AskWindow{Name: string(rune('a' + i)), When: "mon-fri 09:00-09:30, sat 10:00-11:00", InputPrice: int64(i)})
	}
	asks, err := pricing.Compile(s)
	if err != nil {
		b.Fatal(err)
	}
	o.asks.Store(asks)
	b.Run("16 windows", func(b *testing.B) {
		for b.Loop() {
			o.Price()
		}
	})
}
