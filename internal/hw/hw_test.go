package hw

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// The command lines the package runs, as the fake runner keys them.
var (
	cmdQueryGPU    = "nvidia-smi --query-gpu=" + strings.Join(nvidiaQuery, ",") + " --format=csv,noheader,nounits"
	cmdComputeApps = "nvidia-smi --query-compute-apps=" + strings.Join(computeAppsQuery, ",") + " --format=csv,noheader,nounits"
	cmdNVIDIATable = "nvidia-smi"
	cmdROCm        = "rocm-smi " + strings.Join(rocmArgs, " ")
	cmdSysctl      = "sysctl hw.memsize machdep.cpu.brand_string"
)

// reply is what the fake runner answers to one command: a recorded file from testdata, some
// text, or an error.
type reply struct {
	file string
	text string
	err  error
}

// fakeRun returns a Runner that answers commands from replies, keyed by the command line. A
// command without a reply is not installed: its error wraps exec.ErrNotFound, as Exec's does.
func fakeRun(t *testing.T, replies map[string]reply) Runner {
	t.Helper()
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line := strings.Join(append([]string{name}, args...), " ")
		r, ok := replies[line]
		switch {
		case !ok:
			return nil, &exec.Error{Name: name, Err: exec.ErrNotFound}
		case r.err != nil:
			return nil, r.err
		case r.file != "":
			return readTestdata(t, r.file), nil
		}
		return []byte(r.text), nil
	}
}

// readTestdata returns a file of testdata.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeFiles returns a ReadFile that reads files from a map and fails for the others.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
}

// errExit stands for a tool that ran and failed, as Exec reports it.
var errExit = errors.New("exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")

func i64(n int64) *int64       { return &n }
func f64(x float64) *float64   { return &x }
func fields(s string) []string { return strings.Split(s, ",") }

// A Linux machine's /proc files, as the fake ReadFile serves them.
var linuxProc = map[string]string{
	"/proc/meminfo": "MemTotal:       131072000 kB\nMemFree:         1000000 kB\n",
	"/proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n",
}

// linuxProbe is a 16-CPU Linux machine with 128000 MiB of memory whose tools answer replies.
func linuxProbe(t *testing.T, replies map[string]reply) Probe {
	return Probe{
		Run:      fakeRun(t, replies),
		GOOS:     "linux",
		GOARCH:   "amd64",
		NumCPU:   16,
		ReadFile: fakeFiles(linuxProc),
	}
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name        string
		probe       func(t *testing.T) Probe
		wantGPUs    int
		wantFirst   protocol.GPU
		wantUnified bool
		wantMemory  int64
		wantCPU     string
	}{
		{
			name:       "no tools: CPU only",
			probe:      func(t *testing.T) Probe { return linuxProbe(t, nil) },
			wantMemory: 128000,
			wantCPU:    "AMD EPYC 9654 96-Core Processor",
		},
		{
			name: "tools that fail: CPU only",
			probe: func(t *testing.T) Probe {
				return linuxProbe(t, map[string]reply{cmdQueryGPU: {err: errExit}, cmdROCm: {err: errExit}})
			},
			wantMemory: 128000,
			wantCPU:    "AMD EPYC 9654 96-Core Processor",
		},
		{
			name: "no /proc: CPU only, memory unknown",
			probe: func(t *testing.T) Probe {
				p := linuxProbe(t, nil)
				p.ReadFile = nil
				return p
			},
		},
		{
			name: "8xH200",
			probe: func(t *testing.T) Probe {
				return linuxProbe(t, map[string]reply{
					cmdQueryGPU:    {file: "nvidia_smi_query_gpu_8xH200_csv_header_units.csv"},
					cmdNVIDIATable: {file: "nvidia_smi_table_GB10.txt"},
				})
			},
			wantGPUs: 8,
			wantFirst: protocol.GPU{Index: 0, Vendor: "nvidia", UUID: "GPU-a44622e3-2296-6285-0a86-84d0f6c67900",
				VRAMMiB: 143771, CUDA: "13.0"},
			wantMemory: 128000,
			wantCPU:    "AMD EPYC 9654 96-Core Processor",
		},
		{
			name: "nvidia-smi fails: the next vendor, AMD",
			probe: func(t *testing.T) Probe {
				return linuxProbe(t, map[string]reply{
					cmdQueryGPU: {err: errExit},
					cmdROCm:     {file: "rocm_smi_json_4xMI100_rocm602_telegraf.json"},
				})
			},
			wantGPUs: 4,
			wantFirst: protocol.GPU{Index: 0, Vendor: "amd", Name: "Arcturus GL-XL [Instinct MI100]",
				UUID: "0x79ccd55167a2124a", VRAMMiB: 32752, Driver: "6.3.6"},
			wantMemory: 128000,
			wantCPU:    "AMD EPYC 9654 96-Core Processor",
		},
		{
			name: "nvidia-smi output that does not match the query: the next vendor",
			probe: func(t *testing.T) Probe {
				return linuxProbe(t, map[string]reply{
					cmdQueryGPU: {file: "nvidia_smi_query_gpu_GB10_noheader_NA.txt"},
					cmdROCm:     {file: "rocm_smi_json_rx6700xt_rocm612_telegraf.json"},
				})
			},
			wantGPUs: 1,
			wantFirst: protocol.GPU{Index: 0, Vendor: "amd", Name: "Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
				VRAMMiB: 12272, Driver: "6.3.6"},
			wantMemory: 128000,
			wantCPU:    "AMD EPYC 9654 96-Core Processor",
		},
		{
			name: "GB10: memory [N/A] is shared memory",
			probe: func(t *testing.T) Probe {
				p := linuxProbe(t, map[string]reply{
					cmdQueryGPU:    {file: "nvidia_smi_query_gpu_GB10_csv_NA.csv"},
					cmdNVIDIATable: {file: "nvidia_smi_table_GB10.txt"},
				})
				p.GOARCH = "arm64"
				p.ReadFile = fakeFiles(map[string]string{"/proc/meminfo": "MemTotal:       127601472 kB\n"})
				return p
			},
			wantGPUs: 1,
			// 124610 MiB of memory, less 1/8.
			wantFirst:   protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA GB10", VRAMMiB: 109034, CUDA: "13.0"},
			wantUnified: true,
			wantMemory:  124610,
		},
		{
			name: "GB10 without /proc/meminfo: memory unknown",
			probe: func(t *testing.T) Probe {
				p := linuxProbe(t, map[string]reply{cmdQueryGPU: {file: "nvidia_smi_query_gpu_GB10_csv_NA.csv"}})
				p.ReadFile = nil
				return p
			},
			wantGPUs:  1,
			wantFirst: protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA GB10"},
		},
		{
			name: "Apple M4 Pro",
			probe: func(t *testing.T) Probe {
				return Probe{
					Run:    fakeRun(t, map[string]reply{cmdSysctl: {file: "apple_sysctl_m4pro_hwreport.txt"}}),
					GOOS:   "darwin",
					GOARCH: "arm64",
					NumCPU: 14,
				}
			},
			wantGPUs: 1,
			// 64 GiB: Metal recommends 3/4, 48 GiB, less 512 MiB.
			wantFirst:   protocol.GPU{Index: 0, Vendor: "apple", Name: "Apple M4 Pro", VRAMMiB: 48640},
			wantUnified: true,
			wantMemory:  65536,
			wantCPU:     "Apple M4 Pro",
		},
		{
			name: "Intel Mac: no Apple GPU",
			probe: func(t *testing.T) Probe {
				return Probe{
					Run:    fakeRun(t, map[string]reply{cmdSysctl: {text: "hw.memsize: 17179869184\nmachdep.cpu.brand_string: Intel(R) Core(TM) i7-9750H CPU @ 2.60GHz\n"}}),
					GOOS:   "darwin",
					GOARCH: "amd64",
					NumCPU: 12,
				}
			},
			wantMemory: 16384,
			wantCPU:    "Intel(R) Core(TM) i7-9750H CPU @ 2.60GHz",
		},
		{
			name: "Mac without sysctl: nothing known",
			probe: func(t *testing.T) Probe {
				return Probe{Run: fakeRun(t, nil), GOOS: "darwin", GOARCH: "arm64"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.probe(t)
			hw, err := p.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(hw.GPUs) != tt.wantGPUs {
				t.Fatalf("got %d GPUs (%+v), want %d", len(hw.GPUs), hw.GPUs, tt.wantGPUs)
			}
			if tt.wantGPUs > 0 && hw.GPUs[0] != tt.wantFirst {
				t.Errorf("first GPU:\ngot  %+v\nwant %+v", hw.GPUs[0], tt.wantFirst)
			}
			if hw.UnifiedMemory != tt.wantUnified {
				t.Errorf("UnifiedMemory = %v, want %v", hw.UnifiedMemory, tt.wantUnified)
			}
			if hw.MemoryMiB != tt.wantMemory || hw.CPU != tt.wantCPU {
				t.Errorf("host: got %d MiB and CPU %q, want %d MiB and %q", hw.MemoryMiB, hw.CPU, tt.wantMemory, tt.wantCPU)
			}
			if hw.OS != p.GOOS || hw.Arch != p.GOARCH || hw.CPUs != p.NumCPU {
				t.Errorf("got %s/%s with %d CPUs, want %s/%s with %d", hw.OS, hw.Arch, hw.CPUs, p.GOOS, p.GOARCH, p.NumCPU)
			}
			if hw.Fingerprint != Fingerprint(hw) || len(hw.Fingerprint) != 16 {
				t.Errorf("Fingerprint = %q, want Fingerprint(hw) = %q", hw.Fingerprint, Fingerprint(hw))
			}
		})
	}
}

func TestDiscover_Canceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := linuxProbe(t, nil).Discover(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestVendor(t *testing.T) {
	tests := []struct {
		gpus []protocol.GPU
		want string
	}{
		{nil, VendorCPU},
		{[]protocol.GPU{{Vendor: VendorNVIDIA}}, VendorNVIDIA},
		{[]protocol.GPU{{Vendor: VendorApple}}, VendorApple},
		{[]protocol.GPU{{}}, VendorCPU},
	}
	for _, tt := range tests {
		if got := Vendor(protocol.Hardware{GPUs: tt.gpus}); got != tt.want {
			t.Errorf("Vendor(%+v) = %q, want %q", tt.gpus, got, tt.want)
		}
	}
}

func TestMetalBudget(t *testing.T) {
	tests := []struct{ memoryMiB, want int64 }{
		{8 << 10, 4949},     // 2/3 of 8 GiB, less 512 MiB
		{16 << 10, 10410},   // 10.7 GiB recommended
		{36 << 10, 24064},   // 24 GiB recommended
		{64 << 10, 48640},   // 48 GiB recommended
		{192 << 10, 146944}, // 144 GiB recommended
		{512, 0},
	}
	for _, tt := range tests {
		if got := metalBudgetMiB(tt.memoryMiB); got != tt.want {
			t.Errorf("metalBudgetMiB(%d) = %d, want %d", tt.memoryMiB, got, tt.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a := protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA H200", UUID: "GPU-a", VRAMMiB: 143771, Driver: "570.86.15"}
	b := protocol.GPU{Index: 1, Vendor: "nvidia", Name: "NVIDIA H200", UUID: "GPU-b", VRAMMiB: 143771, Driver: "570.86.15"}
	base := Fingerprint(protocol.Hardware{GPUs: []protocol.GPU{a, b}})

	same := map[string]protocol.Hardware{
		"GPUs listed in another order": {GPUs: []protocol.GPU{b, a}},
		"other host memory and CPUs":   {MemoryMiB: 1 << 20, CPUs: 192, GPUs: []protocol.GPU{a, b}},
	}
	for name, hw := range same {
		if got := Fingerprint(hw); got != base {
			t.Errorf("%s: got %s, want %s", name, got, base)
		}
	}

	newDriver := []protocol.GPU{a, b}
	newDriver[1].Driver = "580.126.09"
	swapped := []protocol.GPU{a, b}
	swapped[1].UUID = "GPU-c"
	renamed := []protocol.GPU{a, b}
	renamed[0].Name = "NVIDIA H200 NVL"
	differ := map[string]protocol.Hardware{
		"driver updated":  {GPUs: newDriver},
		"GPU swapped":     {GPUs: swapped},
		"GPU removed":     {GPUs: []protocol.GPU{a}},
		"GPU renamed":     {GPUs: renamed},
		"no GPUs":         {},
		"fields run into": {GPUs: []protocol.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H200 GPU-a"}}},
	}
	for name, hw := range differ {
		if got := Fingerprint(hw); got == base {
			t.Errorf("%s: fingerprint did not change", name)
		}
	}
}

// The fingerprint of a node is the same whatever its GPUs are doing.
func TestFingerprint_NotTelemetry(t *testing.T) {
	busy := readTestdata(t, "nvidia_smi_query_gpu_L40S_csv_header_units.csv")
	idle := []byte("index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n0, NVIDIA L40S, 46068 MiB, 1 MiB, 46067 MiB\n")
	var prints []string
	for _, out := range [][]byte{busy, idle} {
		p := linuxProbe(t, map[string]reply{cmdQueryGPU: {text: string(out)}})
		hw, err := p.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tel, err := Sample(context.Background(), p.Run, Vendor(hw))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("used %d MiB: fingerprint %s", deref(tel.GPUs[0].MemoryUsedMiB), hw.Fingerprint)
		prints = append(prints, hw.Fingerprint)
	}
	if prints[0] != prints[1] {
		t.Errorf("busy %s, idle %s: want the same fingerprint", prints[0], prints[1])
	}
}

func TestDiscover_LogsWhy(t *testing.T) {
	var buf strings.Builder
	p := linuxProbe(t, map[string]reply{cmdQueryGPU: {err: errExit}})
	p.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := p.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=WARN msg="hardware tool failed; carrying on without it" tool=nvidia-smi err="nvidia-smi --query-gpu: exit status 9`,
		`level=DEBUG msg="hardware tool not installed" tool=rocm-smi`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s\nlog:\n%s", want, buf.String())
		}
	}
}

// On a machine with a GPU, SHAREAI_TEST_GPU=1 runs discovery, telemetry and the process list
// against the real tools.
func TestDiscover_ThisMachine(t *testing.T) {
	if os.Getenv("SHAREAI_TEST_GPU") == "" {
		t.Skip("set SHAREAI_TEST_GPU=1 on a machine with a GPU")
	}
	ctx := context.Background()
	hw, err := Discover(ctx, Exec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", hw)
	if len(hw.GPUs) == 0 || hw.GPUs[0].VRAMMiB <= 0 || hw.GPUs[0].Name == "" {
		t.Fatalf("got GPUs %+v, want at least one with a name and memory", hw.GPUs)
	}
	tel, err := Sample(ctx, Exec, Vendor(hw))
	if err != nil {
		t.Fatal(err)
	}
	if tel != nil {
		for _, s := range tel.GPUs {
			t.Log(statString(s))
		}
		if len(tel.GPUs) != len(hw.GPUs) {
			t.Errorf("got %d readings for %d GPUs", len(tel.GPUs), len(hw.GPUs))
		}
	}
	procs, err := Processes(ctx, Exec, Vendor(hw), []string{"ollama", "llama-server", "vllm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("other processes: %+v", procs)
}
