package bench

import (
	"context"
	"testing"
	"time"
)

func TestCPUModel(t *testing.T) {
	tests := []struct{ name, cpuinfo, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu vme\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n",
			"AMD EPYC 7B13 64-Core Processor"},
		{"spaces inside", "model name\t:   Intel(R)  Xeon(R) CPU @ 2.20GHz  \n", "Intel(R) Xeon(R) CPU @ 2.20GHz"},
		{"arm", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n", "CPU implementer 0x41 part 0xd0c"},
		{"arm board", "Hardware\t: BCM2835\nCPU part\t: 0xd08\n", "BCM2835"},
		{"none", "", "unknown CPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpuModel(tt.cpuinfo); got != tt.want {
				t.Errorf("cpuModel = %q, want %q", got, tt.want)
			}
		})
	}
	if got, want := machineClass("linux", "amd64", "AMD EPYC", 2), "linux/amd64, AMD EPYC, 2 CPUs"; got != want {
		t.Errorf("machineClass = %q, want %q", got, want)
	}
}

// TestUntilIdle checks where a run's CPU reading is taken: once no process measured is busy
// over a window, at the start of that window; at the limit, at the last reading.
func TestUntilIdle(t *testing.T) {
	script := func(readings ...time.Duration) meter {
		i := 0
		return meter{read: func(context.Context) (time.Duration, error) {
			v := readings[min(i, len(readings)-1)]
			i++
			return v, nil
		}}
	}
	ms := time.Millisecond
	// Busy over the first window (work left behind), idle over the second.
	got, err := untilIdle(context.Background(), []meter{script(100*ms, 140*ms, 141*ms), script(5 * ms)}, 10*time.Second)
	if err != nil || len(got) != 2 || got[0] != 140*ms || got[1] != 5*ms {
		t.Errorf("untilIdle = %v, %v; want [140ms 5ms], the reading before the idle window", got, err)
	}
	// One process busy, the other idle: not idle yet.
	got, _ = untilIdle(context.Background(), []meter{script(0, 1*ms, 2*ms), script(0, 50*ms, 50*ms)}, 10*time.Second)
	if got[0] != 1*ms || got[1] != 50*ms {
		t.Errorf("untilIdle = %v; want [1ms 50ms]", got)
	}
	// Never idle: the last reading at the limit.
	var n time.Duration
	busy := meter{read: func(context.Context) (time.Duration, error) { n += 50 * ms; return n, nil }}
	got, _ = untilIdle(context.Background(), []meter{busy}, 3*idleWindow/2)
	if got[0] != n {
		t.Errorf("untilIdle = %v; want the last reading, %v", got, n)
	}
}

// TestProcessCPU checks that this process's CPU time grows as it works.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for range 1000 { // some seconds of work at most; the clock has far finer steps
		for i := range 1_000_000 {
			x += i ^ x
		}
		after, err := ProcessCPU()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
	}
	t.Errorf("ProcessCPU stayed at %v after 10⁹ steps of work (%d)", before, x)
}
