package bench_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
)

const machine = "linux/amd64, AMD EPYC, 2 CPUs"

// comparison is a comparison of the scenario "json c=50 n=2000 max_tokens=64 providers=2"
// on machine, whose network added added µs per request.
func comparison(added float64) *bench.Comparison {
	return &bench.Comparison{
		Machine: machine, Concurrency: 50, Requests: 2000, MaxTokens: 64, Providers: 2,
		Direct:   &bench.PathRun{CPU: 60, Report: &bench.Report{RequestsPerSecond: 9000}},
		Network:  &bench.PathRun{CPU: 60 + added, Report: &bench.Report{RequestsPerSecond: 1234.56}},
		AddedCPU: added, Ratio: (60 + added) / 60,
	}
}

func TestComparison_Scenario(t *testing.T) {
	c := comparison(640)
	if got, want := c.Scenario(), "json c=50 n=2000 max_tokens=64 providers=2"; got != want {
		t.Errorf("Scenario = %q, want %q", got, want)
	}
	c.Stream, c.Concurrency = true, 1
	if got, want := c.Scenario(), "stream c=1 n=2000 max_tokens=64 providers=2"; got != want {
		t.Errorf("Scenario = %q, want %q", got, want)
	}
}

func TestCheck(t *testing.T) {
	base := &bench.Baseline{Machines: map[string]map[string]bench.Figure{
		machine: {comparison(0).Scenario(): {AddedCPU: 640, Measured: "2026-01-02"}},
		"linux/arm64, CPU implementer 0x41 part 0xd0c, 4 CPUs": {comparison(0).Scenario(): {AddedCPU: 100}},
	}}
	tests := []struct {
		name    string
		machine string
		added   float64
		status  string
		change  float64
		message string
	}{
		{"same", machine, 640, bench.VerdictOK, 0, "OK: the network added 640 µs of CPU per request, 0% more than the 640 µs recorded on 2026-01-02"},
		{"a little worse", machine, 700, bench.VerdictOK, 700.0/640 - 1, "9% more"},
		{"a little better", machine, 600, bench.VerdictOK, 600.0/640 - 1, "6% less"},
		{"25% worse: the most that passes", machine, 800, bench.VerdictOK, 0.25, "25% more"},
		{"more than 25% worse", machine, 801, bench.VerdictRegressed, 801.0/640 - 1, "REGRESSION: the network added 801 µs of CPU per request, 25% more than"},
		{"twice", machine, 1280, bench.VerdictRegressed, 1, "100% more than the 640 µs recorded on 2026-01-02 for \"" + machine + "\""},
		{"much better", machine, 320, bench.VerdictImproved, -0.5, "Improved: the network added 320 µs of CPU per request, 50% less than"},
		{"another machine class", "darwin/arm64, unknown CPU, 8 CPUs", 5000, bench.VerdictNoBaseline, 0, "No baseline for machine class \"darwin/arm64, unknown CPU, 8 CPUs\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := comparison(tt.added)
			c.Machine = tt.machine
			v := bench.Check(base, c, bench.Tolerance)
			if v.Status != tt.status || v.Failed() != (tt.status == bench.VerdictRegressed) {
				t.Errorf("status %q (failed %v), want %q", v.Status, v.Failed(), tt.status)
			}
			if d := v.Change - tt.change; d > 1e-9 || d < -1e-9 {
				t.Errorf("change %v, want %v", v.Change, tt.change)
			}
			if !strings.Contains(v.Message, tt.message) {
				t.Errorf("message %q has no %q", v.Message, tt.message)
			}
			if (v.Baseline == nil) != (tt.status == bench.VerdictNoBaseline) || v.AddedCPU != tt.added || v.Scenario != c.Scenario() || v.Machine != tt.machine {
				t.Errorf("verdict %+v", v)
			}
			if tt.status != bench.VerdictOK && !strings.Contains(v.Message, "--update-baseline") {
				t.Errorf("message %q does not say how to record a new figure", v.Message)
			}
		})
	}
	// Another scenario on a machine with figures has none either.
	c := comparison(640)
	c.Stream = true
	if v := bench.Check(base, c, bench.Tolerance); v.Status != bench.VerdictNoBaseline || v.Failed() {
		t.Errorf("a scenario without a figure: %+v", v)
	}
}

// TestCheckAgainst holds a build to a reference build's figure from the same run: the
// tolerance and messages as Check's, the reference named, and a reference whose network cost
// nothing (noise) holding nothing.
func TestCheckAgainst(t *testing.T) {
	const about = "the reference build /tmp/ref"
	tests := []struct {
		name          string
		ref, added    float64
		status, match string
	}{
		{"same", 640, 640, bench.VerdictOK, "OK: the network added 640 µs of CPU per request, 0% more than the 640 µs that the reference build /tmp/ref added in this run (within 25%)"},
		{"25% worse: the most that passes", 640, 800, bench.VerdictOK, "25% more than the 640 µs that the reference build"},
		{"more than 25% worse", 640, 801, bench.VerdictRegressed, "REGRESSION: the network added 801 µs of CPU per request, 25% more than the 640 µs that the reference build /tmp/ref added in this run"},
		{"much better", 640, 320, bench.VerdictImproved, "Improved: the network added 320 µs of CPU per request, 50% less than the 640 µs that the reference build"},
		{"a reference that added nothing", -3, 5000, bench.VerdictNoBaseline, "The network of the reference build /tmp/ref added no CPU per request in this run (-3.0 µs): this build's 5000 µs is not checked."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := comparison(tt.added)
			v := bench.CheckAgainst(comparison(tt.ref), about, c, bench.Tolerance)
			if v.Status != tt.status || v.Failed() != (tt.status == bench.VerdictRegressed) {
				t.Errorf("status %q (failed %v), want %q", v.Status, v.Failed(), tt.status)
			}
			if !strings.Contains(v.Message, tt.match) {
				t.Errorf("message %q has no %q", v.Message, tt.match)
			}
			if tt.status != bench.VerdictNoBaseline && (v.Baseline == nil || *v.Baseline != tt.ref || v.Change != tt.added/tt.ref-1) {
				t.Errorf("verdict %+v; want the reference's %v as its baseline", v, tt.ref)
			}
			if v.Scenario != c.Scenario() || v.Machine != machine || v.AddedCPU != tt.added {
				t.Errorf("verdict %+v", v)
			}
		})
	}
}

// TestBaseline_File records figures in a file that does not exist yet, reads them back, and
// records over one of them, leaving the others.
func TestBaseline_File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baseline.json")
	b, err := bench.LoadBaseline(path)
	if err != nil || len(b.Machines) != 0 {
		t.Fatalf("a file that does not exist: %+v, %v; want an empty baseline", b, err)
	}
	b.About, b.Commit = "figures", "afcaed6de4c13cb9b0a7a0a72024ad8e4dc5007d"
	day := time.Date(2026, 3, 4, 23, 0, 0, 0, time.FixedZone("", -3*3600)) // 2026-03-05 in UTC
	b.Record(comparison(640.04), day)
	other := comparison(900)
	other.Stream = true
	b.Record(other, day)
	arm := comparison(100)
	arm.Machine = "linux/arm64, unknown CPU, 4 CPUs"
	b.Record(arm, day)
	if err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := bench.LoadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	want := bench.Figure{AddedCPU: 640, DirectCPU: 60, NetworkCPU: 700, Ratio: 11.7, RequestsPerSecond: 1234.6, Measured: "2026-03-05"}
	if f := got.Machines[machine][comparison(0).Scenario()]; !reflect.DeepEqual(f, want) {
		t.Errorf("figure read back %+v, want %+v", f, want)
	}
	if got.About != "figures" || got.Commit != b.Commit || len(got.Machines) != 2 || len(got.Machines[machine]) != 2 {
		t.Errorf("baseline read back: %+v", got)
	}

	got.Record(comparison(500), day)
	if err := got.Save(path); err != nil {
		t.Fatal(err)
	}
	again, _ := bench.LoadBaseline(path)
	if f := again.Machines[machine][comparison(0).Scenario()]; f.AddedCPU != 500 || len(again.Machines[machine]) != 2 || len(again.Machines) != 2 {
		t.Errorf("after recording over a figure: %+v", again)
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.LoadBaseline(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a file that is not JSON: %v; want an error naming it", err)
	}
}
