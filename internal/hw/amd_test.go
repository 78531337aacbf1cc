package hw

import (
	"reflect"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// Both recorded rocm-smi outputs: ROCm 6.1.2 ("Card Series", a consumer card without a unique
// ID) and ROCm 6.0.2 ("Card series", four MI100s).
func TestParseROCm(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		wantCount int
		wantGPU   protocol.GPU // the first
		wantStat  protocol.GPUStat
		wantLast  protocol.GPU
	}{
		{
			name:      "RX 6700 XT, ROCm 6.1.2",
			file:      "rocm_smi_json_rx6700xt_rocm612_telegraf.json",
			wantCount: 1,
			wantGPU: protocol.GPU{Index: 0, Vendor: "amd", Name: "Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
				VRAMMiB: 12272, Driver: "6.3.6"},
			wantStat: protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(1499), MemoryTotalMiB: i64(12272),
				TemperatureC: f64(45), PowerW: f64(6), PowerLimitW: f64(211), UtilizationPct: f64(0)},
			wantLast: protocol.GPU{Index: 0, Vendor: "amd", Name: "Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
				VRAMMiB: 12272, Driver: "6.3.6"},
		},
		{
			name:      "4x MI100, ROCm 6.0.2",
			file:      "rocm_smi_json_4xMI100_rocm602_telegraf.json",
			wantCount: 4,
			wantGPU: protocol.GPU{Index: 0, Vendor: "amd", Name: "Arcturus GL-XL [Instinct MI100]",
				UUID: "0x79ccd55167a2124a", VRAMMiB: 32752, Driver: "6.3.6"},
			wantStat: protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(6), MemoryTotalMiB: i64(32752),
				TemperatureC: f64(53), PowerW: f64(36), PowerLimitW: f64(290), UtilizationPct: f64(0)},
			wantLast: protocol.GPU{Index: 3, Vendor: "amd", Name: "Arcturus GL-XL [Instinct MI100]",
				UUID: "0x1b9dd972253c3736", VRAMMiB: 32752, Driver: "6.3.6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cards, driver, err := parseROCm(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			gpus, stats := amdGPUs(cards, driver), amdStats(cards)
			if len(gpus) != tt.wantCount {
				t.Fatalf("got %d GPUs, want %d", len(gpus), tt.wantCount)
			}
			if gpus[0] != tt.wantGPU {
				t.Errorf("GPU:\ngot  %+v\nwant %+v", gpus[0], tt.wantGPU)
			}
			if last := gpus[len(gpus)-1]; last != tt.wantLast {
				t.Errorf("last GPU:\ngot  %+v\nwant %+v", last, tt.wantLast)
			}
			if !reflect.DeepEqual(stats[0], tt.wantStat) {
				t.Errorf("reading:\ngot  %s\nwant %s", statString(stats[0]), statString(tt.wantStat))
			}
		})
	}
}

// Not recorded: the key names of newer ROCm on MI300 (socket power, no edge sensor), numbers
// that are not strings, cards past card9, and a warning before the JSON.
func TestParseROCm_Variants(t *testing.T) {
	out := `WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status

{"card10": {"Card Series": "AMD Instinct MI300X", "Temperature (Sensor junction) (C)": "40.0",
  "Current Socket Graphics Package Power (W)": "140.0", "GPU use (%)": 7, "VRAM Total Memory (B)": "N/A"},
 "card2": {"Card series": "AMD Instinct MI300X", "Temperature (Sensor edge) (C)": "N/A"},
 "notes": "not a card"}`
	cards, _, err := parseROCm([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	stats := amdStats(cards)
	want := []protocol.GPUStat{
		{Index: 2},
		{Index: 10, TemperatureC: f64(40), PowerW: f64(140), UtilizationPct: f64(7)},
	}
	if !reflect.DeepEqual(stats, want) {
		t.Fatalf("got %s and more, want %s, %s", statString(stats[0]), statString(want[0]), statString(want[1]))
	}
	if gpus := amdGPUs(cards, ""); gpus[1].Name != "AMD Instinct MI300X" || gpus[1].VRAMMiB != 0 {
		t.Errorf("got %+v, want MI300X with unknown memory", gpus[1])
	}
}

func TestParseROCm_Errors(t *testing.T) {
	for _, out := range []string{"", "ERROR: rocm-smi not supported", `{"card0": `} {
		if _, _, err := parseROCm([]byte(out)); err == nil {
			t.Errorf("parseROCm(%q): got no error", out)
		}
	}
	cards, _, err := parseROCm([]byte("{}"))
	if err != nil || len(cards) != 0 {
		t.Errorf(`parseROCm("{}") = %v, %v; want no cards`, cards, err)
	}
}
