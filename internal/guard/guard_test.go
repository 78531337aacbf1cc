package guard

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// reading is one line of a recorded sequence in testdata: a telemetry reading, and the change
// the guard must report on it, if any.
type reading struct {
	AtS       int                 `json:"at_s"`
	Running   int                 `json:"running"`
	Note      string              `json:"note"`
	Telemetry *protocol.Telemetry `json:"telemetry"`
	Want      *struct {
		Paused bool   `json:"paused"`
		Reason string `json:"reason"`
	} `json:"want"`
}

func readSequence(t *testing.T, name string) []reading {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []reading
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var r reading
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGuard_recorded replays recorded sequences of readings: the guard must change exactly on
// the readings that say how.
func TestGuard_recorded(t *testing.T) {
	tests := []struct {
		file string
		cfg  Config
	}{
		{"game.jsonl", Config{StepAside: true, MaxTemperatureC: 83}},
		{"training.jsonl", Config{StepAside: true, EngineProcesses: []string{"ollama"}, MaxTemperatureC: 83}},
		{"thermal.jsonl", Config{StepAside: true, MaxTemperatureC: 83}},
		{"power.jsonl", Config{StepAside: true, MaxPowerW: 300}},
		{"unknown.jsonl", Config{StepAside: true, MaxTemperatureC: 83, MaxPowerW: 300}},
		{"busy.jsonl", Config{StepAside: true, MaxTemperatureC: 83, MaxPowerW: 320}},
	}
	start := time.Date(2024, 6, 3, 20, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range readSequence(t, tt.file) {
				now := start.Add(time.Duration(r.AtS) * time.Second)
				got, changed := g.Observe(now, r.Telemetry, r.Running)
				if got != g.State() {
					t.Errorf("at %ds: Observe returned %+v, but State is %+v", r.AtS, got, g.State())
				}
				switch {
				case r.Want == nil && changed:
					t.Errorf("at %ds (%s): changed to %+v, want no change", r.AtS, r.Note, got)
				case r.Want == nil:
				case !changed:
					t.Errorf("at %ds (%s): no change, want paused %v: %q", r.AtS, r.Note, r.Want.Paused, r.Want.Reason)
				case got.Paused != r.Want.Paused || got.Reason != r.Want.Reason:
					t.Errorf("at %ds (%s): paused %v: %q\nwant paused %v: %q", r.AtS, r.Note, got.Paused, got.Reason, r.Want.Paused, r.Want.Reason)
				}
			}
		})
	}
}

// observeAll feeds g readings one second apart and returns the last state.
func observeAll(g *Guard, start time.Time, readings ...*protocol.Telemetry) State {
	var s State
	for i, r := range readings {
		s, _ = g.Observe(start.Add(time.Duration(i)*time.Second), r, 0)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestGuard_processes(t *testing.T) {
	tests := []struct {
		name   string
		engine []string
		procs  []protocol.GPUProcess
		want   string // reason; "" for no pause
	}{
		{"none", nil, []protocol.GPUProcess{}, ""},
		{"cannot tell", nil, nil, ""},
		{"a game", nil, []protocol.GPUProcess{{PID: 4242, Name: "game.exe"}},
			"the GPU is in use by another program (pid 4242 game.exe)"},
		{"a Windows path", nil, []protocol.GPUProcess{{PID: 7, Name: `C:\Games\Cyberpunk 2077\bin\x64\Cyberpunk2077.exe`}},
			"the GPU is in use by another program (pid 7 Cyberpunk2077.exe)"},
		{"no name", nil, []protocol.GPUProcess{{PID: 31}},
			"the GPU is in use by another program (pid 31)"},
		{"several", nil, []protocol.GPUProcess{{PID: 4242, Name: "/usr/bin/python3"}, {PID: 4301, Name: "blender"}, {PID: 5, Name: "x"}},
			"the GPU is in use by another program (pid 4242 python3, and 2 more)"},
		{"the engine", []string{"ollama"}, []protocol.GPUProcess{{PID: 811, Name: "/usr/local/bin/ollama"}}, ""},
		{"the engine on Windows", []string{"Ollama"}, []protocol.GPUProcess{{PID: 811, Name: `C:\Program Files\Ollama\ollama.exe`}}, ""},
		{"the engine by path", []string{"/opt/vllm/bin/vllm"}, []protocol.GPUProcess{{PID: 9, Name: "vllm"}}, ""},
		{"the engine and another", []string{"ollama"}, []protocol.GPUProcess{{PID: 811, Name: "ollama"}, {PID: 4242, Name: "python3"}},
			"the GPU is in use by another program (pid 4242 python3)"},
		{"an empty engine name", []string{""}, []protocol.GPUProcess{{PID: 31}},
			"the GPU is in use by another program (pid 31)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(Config{StepAside: true, EngineProcesses: tt.engine})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := g.Observe(time.Unix(0, 0), &protocol.Telemetry{Processes: tt.procs}, 1)
			if s.Paused != (tt.want != "") || s.Reason != tt.want {
				t.Errorf("paused %v: %q, want %q", s.Paused, s.Reason, tt.want)
			}
		})
	}
}

func TestGuard_stepAsideOff(t *testing.T) {
	g, err := New(Config{MaxTemperatureC: 83})
	if err != nil {
		t.Fatal(err)
	}
	game := &protocol.Telemetry{
		GPUs:      []protocol.GPUStat{{UtilizationPct: ptr(99.0), TemperatureC: ptr(70.0)}},
		Processes: []protocol.GPUProcess{{PID: 4242, Name: "python3"}},
	}
	if s := observeAll(g, time.Unix(0, 0), game, game, game, game, game, game, game, game, game, game, game, game); s.Paused {
		t.Errorf("paused %q with StepAside off", s.Reason)
	}
}

// TestGuard_ownerAndHeat checks that both reasons show, and that the pause lasts while either
// holds.
func TestGuard_ownerAndHeat(t *testing.T) {
	g, err := New(Config{StepAside: true, QuietPeriod: time.Minute, MaxTemperatureC: 80, ResumeTemperatureC: 70})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2024, 6, 3, 20, 0, 0, 0, time.UTC)
	reading := func(temp float64, procs ...protocol.GPUProcess) *protocol.Telemetry {
		return &protocol.Telemetry{
			GPUs:      []protocol.GPUStat{{Index: 0, TemperatureC: ptr(temp), UtilizationPct: ptr(5.0)}},
			Processes: procs,
		}
	}
	steps := []struct {
		after   time.Duration
		reading *protocol.Telemetry
		changed bool
		want    State
	}{
		{0, reading(81, protocol.GPUProcess{PID: 1, Name: "train.py"}), true, State{true,
			"the GPU is in use by another program (pid 1 train.py); GPU 0 is at 81 °C (limit 80 °C); resuming below 70 °C", t0}},
		{10 * time.Second, reading(75), false, State{true,
			"the GPU is in use by another program (pid 1 train.py); GPU 0 is at 81 °C (limit 80 °C); resuming below 70 °C", t0}},
		{70 * time.Second, reading(75), true, State{true, "GPU 0 is at 81 °C (limit 80 °C); resuming below 70 °C", t0}},
		{80 * time.Second, reading(69), true, State{false, "", t0.Add(80 * time.Second)}},
	}
	for _, st := range steps {
		got, changed := g.Observe(t0.Add(st.after), st.reading, 0)
		if got != st.want || changed != st.changed {
			t.Errorf("after %v: %+v, changed %v\nwant    %+v, changed %v", st.after, got, changed, st.want, st.changed)
		}
	}
}

// TestGuard_signalResetsQuiet checks that a signal during the quiet period starts it again.
func TestGuard_signalResetsQuiet(t *testing.T) {
	g, err := New(Config{StepAside: true})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	proc := &protocol.Telemetry{Processes: []protocol.GPUProcess{{PID: 9, Name: "blender"}}}
	quiet := &protocol.Telemetry{Processes: []protocol.GPUProcess{}}
	for _, st := range []struct {
		after  time.Duration
		t      *protocol.Telemetry
		paused bool
	}{
		{0, proc, true},
		{4 * time.Minute, quiet, true},
		{4*time.Minute + 30*time.Second, proc, true}, // back before the quiet period ended
		{9 * time.Minute, quiet, true},
		{9*time.Minute + 30*time.Second, quiet, false},
	} {
		if s, _ := g.Observe(t0.Add(st.after), st.t, 0); s.Paused != st.paused {
			t.Errorf("after %v: paused %v, want %v", st.after, s.Paused, st.paused)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"zero", Config{}, ""},
		{"typical", Config{StepAside: true, QuietPeriod: 10 * time.Minute, BusyUtilizationPct: 50, MaxTemperatureC: 83, ResumeTemperatureC: 75, MaxPowerW: 300, ResumePowerW: 250}, ""},
		{"no utilization signal", Config{BusyUtilizationPct: 100}, ""},
		{"resume above the limit", Config{MaxTemperatureC: 83, ResumeTemperatureC: 90},
			"guard: resume temperature 90 °C must be below the limit 83 °C"},
		{"resume at the limit", Config{MaxPowerW: 250, ResumePowerW: 250},
			"guard: resume power 250 W must be below the limit 250 W"},
		{"resume without a limit", Config{ResumeTemperatureC: 75},
			"guard: resume temperature 75 °C is set, but no temperature limit"},
		{"negative limit", Config{MaxTemperatureC: -5},
			"guard: temperature limit -5 °C must not be negative"},
		{"a limit too low for the default resume", Config{MaxTemperatureC: 8},
			"guard: temperature limit 8 °C leaves no room to cool 8 °C below it: set a resume temperature"},
		{"a low limit with a resume temperature", Config{MaxTemperatureC: 8, ResumeTemperatureC: 4}, ""},
		{"NaN", Config{MaxPowerW: 300, ResumePowerW: nan()},
			"guard: resume power NaN is not a number"},
		{"utilization", Config{BusyUtilizationPct: 130},
			"guard: busy utilization 130% must be between 0 and 100"},
		{"durations", Config{QuietPeriod: -time.Minute, BusyFor: -time.Second},
			"guard: busy time -1s must not be negative\nguard: quiet period -1m0s must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
			if _, err := New(tt.cfg); (err == nil) != (tt.want == "") {
				t.Errorf("New: error %v, want %q", err, tt.want)
			}
		})
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func TestConfig_defaults(t *testing.T) {
	got := Config{MaxTemperatureC: 83, MaxPowerW: 300}.withDefaults()
	want := Config{
		BusyUtilizationPct: 30, BusyFor: 10 * time.Second, QuietPeriod: 5 * time.Minute,
		MaxTemperatureC: 83, ResumeTemperatureC: 75, MaxPowerW: 300, ResumePowerW: 270,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %+v\nwant       %+v", got, want)
	}
}

// FuzzGuard_Observe feeds readings of any values: the guard must not panic, and it is paused
// exactly when it gives a reason.
func FuzzGuard_Observe(f *testing.F) {
	f.Add(35.0, 22.4, 0.0, 0, int64(5), 0)
	f.Add(86.0, 331.5, 97.0, 0, int64(5), 1)
	f.Add(nan(), -1.0, 1e300, -3, int64(-5), 2)
	f.Fuzz(func(t *testing.T, temp, power, util float64, running int, stepS int64, pid int) {
		g, err := New(Config{StepAside: true, MaxTemperatureC: 83, MaxPowerW: 300})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1_700_000_000, 0)
		reading := &protocol.Telemetry{GPUs: []protocol.GPUStat{{TemperatureC: &temp, PowerW: &power, UtilizationPct: &util}, {Index: 1}}}
		if pid > 0 {
			reading.Processes = []protocol.GPUProcess{{PID: pid}}
		}
		for _, r := range []*protocol.Telemetry{reading, nil, {}, reading, reading} {
			now = now.Add(time.Duration(stepS) * time.Second)
			s, _ := g.Observe(now, r, running)
			if s.Paused != (s.Reason != "") {
				t.Fatalf("paused %v with reason %q", s.Paused, s.Reason)
			}
		}
	})
}
