package hw

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addRecorded seeds a fuzz target with the recorded outputs whose names start with prefix.
func addRecorded(f *testing.F, prefix string) {
	f.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", prefix+"*"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no testdata/%s*: %v", prefix, err)
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// nvidia-smi's CSV output never panics the parser, and what it reads maps to GPUs, readings
// and processes without panicking either.
func FuzzParseCSV(f *testing.F) {
	addRecorded(f, "nvidia_smi_query")
	f.Add([]byte("0, GPU-1, NVIDIA A100, 81920, 5, 40, 60.5, 400.00, 7, 550.54.15\n"))
	f.Add([]byte("index, name\n0, [N/A]\n"))
	f.Add([]byte("99999999999999999999999, x, 1e308, -1, NaN, +Inf, 0x1p3, 1_000, ., -\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, query := range [][]string{nvidiaQuery, computeAppsQuery} {
			recs, err := parseCSV(out, query)
			if err != nil {
				continue
			}
			gpus, stats := nvidiaGPUs(recs), nvidiaStats(recs)
			if len(gpus) != len(recs) || len(stats) != len(recs) {
				t.Fatalf("%d records gave %d GPUs and %d readings", len(recs), len(gpus), len(stats))
			}
			for _, s := range stats {
				if s.MemoryTotalMiB != nil && *s.MemoryTotalMiB < 0 {
					t.Fatalf("negative memory %d", *s.MemoryTotalMiB)
				}
			}
			procs, err := parseComputeApps(out, query)
			if err != nil {
				t.Fatalf("parseCSV read it but parseComputeApps did not: %v", err)
			}
			_ = withoutEngine(procs, []string{"ollama", ""})
		}
	})
}

// rocm-smi's output never panics the parser.
func FuzzParseROCm(f *testing.F) {
	addRecorded(f, "rocm_smi")
	f.Add([]byte(`{"card0": {"VRAM Total Memory (B)": 1e300, "GPU use (%)": [1]}, "card-1": {}, "system": 5}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		cards, driver, err := parseROCm(out)
		if err != nil {
			return
		}
		_, _ = amdGPUs(cards, driver), amdStats(cards)
	})
}

// No name makes ParseParameters or an estimate from it panic, or answer a count that is not
// positive.
func FuzzParseParameters(f *testing.F) {
	for _, s := range []string{"8.0B", "494.03M", "mixtral:8x7b", "Llama-3.1-8B-Instruct", "999999x999999t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := ParseParameters(s)
		if ok != (b > 0) {
			t.Fatalf("ParseParameters(%q) = %v, %v", s, b, ok)
		}
		m := ModelSpec{Name: s, Parameters: b, Quantization: strings.ToUpper(s)}
		if need := Estimate(m); need.Total < 0 {
			t.Fatalf("Estimate(%+v) = %+v", m, need)
		}
		_ = Check(m, 8<<10)
	})
}
