package hw

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// Every recorded nvidia-smi --query-gpu output. The recorded ones asked other fields than
// nvidiaQuery: with a header the fields are named by it, without one by the query the
// reporter ran (query).
func TestParseQueryGPU(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		query     []string
		wantCount int
		wantGPU   protocol.GPU // the first
		wantStat  protocol.GPUStat
		wantLast  *protocol.GPUStat
	}{
		{
			name:      "8xH200 header and units",
			file:      "nvidia_smi_query_gpu_8xH200_csv_header_units.csv",
			wantCount: 8,
			wantGPU: protocol.GPU{Index: 0, Vendor: "nvidia",
				UUID: "GPU-a44622e3-2296-6285-0a86-84d0f6c67900", VRAMMiB: 143771},
			wantStat: protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(130013),
				MemoryTotalMiB: i64(143771), UtilizationPct: f64(100)},
			wantLast: &protocol.GPUStat{Index: 7, MemoryUsedMiB: i64(58071),
				MemoryTotalMiB: i64(143771), UtilizationPct: f64(0)},
		},
		{
			name:      "GB10 memory [N/A] with header",
			file:      "nvidia_smi_query_gpu_GB10_csv_NA.csv",
			wantCount: 1,
			wantGPU:   protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA GB10"},
			wantStat:  protocol.GPUStat{Index: 0},
		},
		{
			name:      "GB10 memory [N/A] without header",
			file:      "nvidia_smi_query_gpu_GB10_noheader_NA.txt",
			query:     fields("memory.used,memory.total,utilization.memory"),
			wantCount: 1,
			wantGPU:   protocol.GPU{Index: 0, Vendor: "nvidia"},
			wantStat:  protocol.GPUStat{Index: 0},
		},
		{
			name:      "L40S header and units",
			file:      "nvidia_smi_query_gpu_L40S_csv_header_units.csv",
			wantCount: 1,
			wantGPU:   protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA L40S", VRAMMiB: 46068},
			wantStat:  protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(9123), MemoryTotalMiB: i64(46068)},
		},
		{
			name:      "laptop: no power readings",
			file:      "nvidia_smi_query_gpu_RTX4070Laptop_mig_NA.csv",
			wantCount: 1,
			wantGPU:   protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA GeForce RTX 4070 Laptop GPU"},
			wantStat:  protocol.GPUStat{Index: 0},
		},
		{
			name: "RTX 2080, driver 440, no header, no units, unbracketed N/A",
			file: "nvidia_smi_query_gpu_rtx2080_noheader_nounits_driver440.txt",
			// gpu-utils' query, quoted in the same issue.
			query: fields("power.limit,power.min_limit,power.max_limit,memory.total,vbios_version," +
				"driver_version,name,gpu_uuid,power.draw,temperature.gpu,temperature.memory," +
				"clocks.current.graphics,clocks.sm,clocks.mem,utilization.gpu,utilization.memory," +
				"fan.speed,pcie.link.width.current,pstate"),
			wantCount: 1,
			wantGPU: protocol.GPU{Index: 0, Vendor: "nvidia", Name: "GeForce RTX 2080",
				UUID: "GPU-22b2c6ac-2d49-4863-197c-9c469071178a", VRAMMiB: 7979, Driver: "440.64"},
			wantStat: protocol.GPUStat{Index: 0, MemoryTotalMiB: i64(7979), TemperatureC: f64(45),
				PowerW: f64(176.98), PowerLimitW: f64(200), UtilizationPct: f64(86)},
		},
		{
			name:      "Tesla P100: header, [N/A] fan, no index",
			file:      "nvidia_smi_query_gpu_teslaP100_csv_units_NA.csv",
			wantCount: 1,
			wantGPU: protocol.GPU{Index: 0, Vendor: "nvidia", Name: "Tesla P100-PCIE-16GB",
				UUID: "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"},
			wantStat: protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(0), TemperatureC: f64(37),
				PowerW: f64(28.16), UtilizationPct: f64(0)},
		},
		{
			// Not recorded: a line as nvidia-smi writes it for nvidiaQuery, to pin the
			// positional reading of the query this package runs.
			name:      "this package's query, by position",
			query:     nvidiaQuery,
			wantCount: 1,
			wantGPU: protocol.GPU{Index: 0, Vendor: "nvidia", Name: "NVIDIA GeForce RTX 4090",
				UUID: "GPU-5b1d2ef0-0000-0000-0000-000000000000", VRAMMiB: 24564, Driver: "560.35.03"},
			wantStat: protocol.GPUStat{Index: 0, MemoryUsedMiB: i64(1234), MemoryTotalMiB: i64(24564),
				TemperatureC: f64(45), PowerW: f64(30.5), PowerLimitW: f64(450), UtilizationPct: f64(3)},
		},
	}
	const rtx4090 = "0, GPU-5b1d2ef0-0000-0000-0000-000000000000, NVIDIA GeForce RTX 4090, 24564, 1234, 45, 30.50, 450.00, 3, 560.35.03\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := []byte(rtx4090)
			if tt.file != "" {
				out = readTestdata(t, tt.file)
			}
			query := tt.query
			if query == nil {
				query = nvidiaQuery
			}
			recs, err := parseCSV(out, query)
			if err != nil {
				t.Fatal(err)
			}
			gpus, stats := nvidiaGPUs(recs), nvidiaStats(recs)
			if len(gpus) != tt.wantCount || len(stats) != tt.wantCount {
				t.Fatalf("got %d GPUs and %d readings, want %d", len(gpus), len(stats), tt.wantCount)
			}
			if gpus[0] != tt.wantGPU {
				t.Errorf("GPU:\ngot  %+v\nwant %+v", gpus[0], tt.wantGPU)
			}
			if !reflect.DeepEqual(stats[0], tt.wantStat) {
				t.Errorf("reading:\ngot  %s\nwant %s", statString(stats[0]), statString(tt.wantStat))
			}
			if tt.wantLast != nil && !reflect.DeepEqual(stats[len(stats)-1], *tt.wantLast) {
				t.Errorf("last reading:\ngot  %s\nwant %s", statString(stats[len(stats)-1]), statString(*tt.wantLast))
			}
		})
	}
}

func TestParseQueryGPU_OldDriverNA(t *testing.T) {
	recs, err := parseCSV(readTestdata(t, "nvidia_smi_query_gpu_rtx2080_noheader_nounits_driver440.txt"),
		fields("power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,"+
			"name,gpu_uuid,power.draw,temperature.gpu,temperature.memory,clocks.current.graphics,"+
			"clocks.sm,clocks.mem,utilization.gpu,utilization.memory,fan.speed,pcie.link.width.current,pstate"))
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[0]["temperature.memory"]; got != "N/A" {
		t.Fatalf("temperature.memory = %q, want the recorded N/A", got)
	}
	if got := recs[0].float("temperature.memory"); got != nil {
		t.Errorf("temperature.memory read as %v, want nil", *got)
	}
}

func TestParseCSV_Errors(t *testing.T) {
	tests := []struct {
		name string
		out  string
	}{
		{"too few values", "0, GPU-1, NVIDIA A100\n"},
		{"too many values", "0, GPU-1, NVIDIA, A100, 1, 2, 3, 4, 5, 6, 7\n"},
		{"driver error text", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if recs, err := parseCSV([]byte(tt.out), nvidiaQuery); err == nil {
				t.Errorf("got %d records and no error, want an error", len(recs))
			}
		})
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in     string
		want   float64
		wantOK bool
	}{
		{"143771", 143771, true},
		{" 143771 MiB ", 143771, true},
		{"250.00 W", 250, true},
		{"100 %", 100, true},
		{"45C", 45, true},
		{"-3.5", -3.5, true},
		{"[N/A]", 0, false},
		{"[Not Supported]", 0, false},
		{"[Unknown Error]", 0, false},
		{"N/A", 0, false},
		{"", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e400", 0, false},
		{"P2", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseNumber(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseNumber(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestCUDAVersion(t *testing.T) {
	run := fakeRun(t, map[string]reply{cmdNVIDIATable: {file: "nvidia_smi_table_GB10.txt"}})
	if got, want := cudaVersion(context.Background(), run), "13.0"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := cudaVersion(context.Background(), fakeRun(t, nil)); got != "" {
		t.Errorf("without nvidia-smi got %q, want empty", got)
	}
}

func TestSample(t *testing.T) {
	run := fakeRun(t, map[string]reply{
		cmdQueryGPU: {file: "nvidia_smi_query_gpu_L40S_csv_header_units.csv"},
		cmdROCm:     {file: "rocm_smi_json_rx6700xt_rocm612_telegraf.json"},
	})
	ctx := context.Background()

	tel, err := Sample(ctx, run, VendorNVIDIA)
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.GPUStat{{Index: 0, MemoryUsedMiB: i64(9123), MemoryTotalMiB: i64(46068)}}
	if !reflect.DeepEqual(tel.GPUs, want) {
		t.Errorf("nvidia: got %s, want %s", statString(tel.GPUs[0]), statString(want[0]))
	}
	if tel.Processes != nil {
		t.Errorf("nvidia: got processes %v, want nil", tel.Processes)
	}

	tel, err = Sample(ctx, run, VendorAMD)
	if err != nil {
		t.Fatal(err)
	}
	if len(tel.GPUs) != 1 || deref(tel.GPUs[0].PowerW) != 6 {
		t.Errorf("amd: got %+v, want one GPU drawing 6 W", tel.GPUs)
	}

	for _, v := range []string{VendorApple, VendorCPU, ""} {
		if tel, err := Sample(ctx, run, v); tel != nil || err != nil {
			t.Errorf("%q: got %v, %v; want nil, nil", v, tel, err)
		}
	}

	if _, err := Sample(ctx, fakeRun(t, nil), VendorNVIDIA); err == nil {
		t.Error("without nvidia-smi: got no error")
	}
}

// statString shows a reading's values rather than its pointers.
func statString(s protocol.GPUStat) string {
	return fmt.Sprintf("{index=%d used=%s total=%s temp=%s power=%s limit=%s util=%s}",
		s.Index, show(s.MemoryUsedMiB), show(s.MemoryTotalMiB), show(s.TemperatureC),
		show(s.PowerW), show(s.PowerLimitW), show(s.UtilizationPct))
}

// show returns *p as text, or "nil".
func show[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
