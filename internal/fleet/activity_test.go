package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// A minute of readings sums up per GPU to the highest temperature, power and memory, and the
// mean utilization; a new minute closes the one before.
func TestActivity_TelemetryMinutes(t *testing.T) {
	var a activity
	t0 := time.Date(2026, 11, 30, 10, 0, 5, 0, time.UTC)
	read := func(temp, util float64, mem int64) *protocol.Telemetry {
		return &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0, TemperatureC: &temp, UtilizationPct: &util, MemoryUsedMiB: &mem}}}
	}
	a.observe("n", t0, read(60, 10, 1000))
	a.observe("n", t0.Add(20*time.Second), read(70, 30, 3000))
	a.observe("n", t0.Add(40*time.Second), read(65, 50, 2000))
	a.observe("n", t0.Add(60*time.Second), read(50, 0, 500)) // the next minute
	_, _, samples := a.take(t0.Add(61*time.Second), false)
	if len(samples) != 2 {
		t.Fatalf("%d samples, want the closed minute and the one going on", len(samples))
	}
	var first protocol.Telemetry
	if err := json.Unmarshal(samples[0].Data, &first); err != nil {
		t.Fatal(err)
	}
	g := first.GPUs[0]
	if !samples[0].At.Equal(t0.Truncate(time.Minute)) || *g.TemperatureC != 70 || *g.UtilizationPct != 30 || *g.MemoryUsedMiB != 3000 {
		t.Errorf("minute = %s %+v; want 10:00 with 70 °C, 30%% mean use, 3000 MiB", samples[0].At, g)
	}
	// Samples that could not be stored are stored with the next, the minute going on again.
	a.putBack(nil, samples)
	_, _, again := a.take(t0.Add(62*time.Second), false)
	if len(again) != 2 || !again[0].At.Equal(samples[0].At) {
		t.Errorf("after putBack: %d samples, want the closed minute once and the one going on", len(again))
	}
}

// Busy time counts while at least one job runs; jobs are counted per UTC day, failures apart;
// counts put back after a failed write add up with the next ones.
func TestActivity_BusyAndDays(t *testing.T) {
	var a activity
	a.rec = store.NodeSession{NodeID: "n"}
	t0 := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	a.jobStarted(1, t0)
	a.jobStarted(2, t0.Add(10*time.Second))
	a.jobEnded(1, t0.Add(20*time.Second))
	a.ended("n", t0.Add(20*time.Second), &protocol.End{Usage: protocol.Usage{PromptTokens: 5, CompletionTokens: 7}})
	a.jobEnded(0, t0.Add(30*time.Second))
	a.ended("n", t0.Add(70*time.Second), &protocol.End{Error: &protocol.Error{Message: "gone"}}) // the next day
	rec, days, _ := a.take(t0.Add(2*time.Minute), false)
	if rec.Busy != 30*time.Second {
		t.Errorf("busy %s, want 30s", rec.Busy)
	}
	if len(days) != 2 {
		t.Fatalf("days %+v, want two", days)
	}
	a.putBack(days, nil)
	_, again, _ := a.take(t0.Add(3*time.Minute), false)
	var jobs, failed int
	for _, d := range again {
		jobs, failed = jobs+d.Jobs, failed+d.Failed
	}
	if jobs != 2 || failed != 1 {
		t.Errorf("after putBack: %d jobs, %d failed; want 2 and 1", jobs, failed)
	}
}
