package hw

import (
	"context"
	"errors"
	"os/exec"
	"reflect"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// Every recorded nvidia-smi --query-compute-apps output, with and without the engine's
// processes left out.
func TestParseComputeApps(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		query  []string // for outputs without a header: the query the reporter ran
		engine []string
		want   []protocol.GPUProcess
	}{
		{
			name: "8xH200 with a [Not Found] process",
			file: "nvidia_smi_query_compute_apps_8xH200_csv.csv",
			want: []protocol.GPUProcess{
				{PID: 1328667, Name: "/usr/local/bin/python3.10", UsedMiB: 130004},
				{PID: 1328668, Name: "/usr/local/bin/python3.10", UsedMiB: 130044},
				{PID: 1425258, Name: "python3", UsedMiB: 105842},
				{PID: 1328669, Name: "/usr/local/bin/python3.10", UsedMiB: 129984},
				{PID: 1425259, Name: "python3", UsedMiB: 105842},
				{PID: 1425260, Name: "python3", UsedMiB: 105842},
				{PID: 1425261, Name: "python3", UsedMiB: 105842},
				{PID: 1758887, Name: "[Not Found]", UsedMiB: 58060},
			},
		},
		{
			name:   "8xH200 without the engine's python: the unknown process stays",
			file:   "nvidia_smi_query_compute_apps_8xH200_csv.csv",
			engine: []string{"python"},
			want:   []protocol.GPUProcess{{PID: 1758887, Name: "[Not Found]", UsedMiB: 58060}},
		},
		{
			name:  "GB10 without header",
			file:  "nvidia_smi_query_compute_apps_GB10_noheader_nounits.txt",
			query: fields("gpu_uuid,pid,process_name,used_memory"),
			want:  []protocol.GPUProcess{{PID: 114687, Name: "/usr/local/bin/python", UsedMiB: 19135}},
		},
		{
			name:   "L40S without tritonserver: its backend stub is another program",
			file:   "nvidia_smi_query_compute_apps_L40S_csv.csv",
			engine: []string{"TritonServer"},
			want: []protocol.GPUProcess{
				{PID: 44966, Name: "/opt/tritonserver/backends/python/triton_python_backend_stub", UsedMiB: 974},
				{PID: 52114, Name: "/usr/bin/python3", UsedMiB: 6294},
			},
		},
		{
			name: "header only: idle",
			file: "nvidia_smi_query_compute_apps_header_only_idle.csv",
			want: []protocol.GPUProcess{},
		},
		{
			name: "llama-server with a redacted PID",
			file: "nvidia_smi_query_compute_apps_llama_server.csv",
			want: []protocol.GPUProcess{{PID: 0, Name: "./build/bin/llama-server", UsedMiB: 6010}},
		},
		{
			name:   "llama-server is the engine",
			file:   "nvidia_smi_query_compute_apps_llama_server.csv",
			engine: []string{"ollama", "llama-server"},
			want:   []protocol.GPUProcess{},
		},
		{
			name:  "RTX 3090 without header, with timestamp",
			file:  "nvidia_smi_query_compute_apps_rtx3090_noheader_nounits.txt",
			query: fields("timestamp,gpu_name,pid,process_name,used_memory"),
			want:  []protocol.GPUProcess{{PID: 1106871, Name: "/app/llama-server", UsedMiB: 23342}},
		},
		{
			name: "RTX 3090 with header and timestamp",
			file: "nvidia_smi_query_compute_apps_rtx3090_timestamp.txt",
			want: []protocol.GPUProcess{{PID: 1106871, Name: "/app/llama-server", UsedMiB: 23342}},
		},
		{
			name: "two vLLM engines",
			file: "nvidia_smi_query_compute_apps_two_vllm_engines.csv",
			want: []protocol.GPUProcess{
				{PID: 3858903, Name: "VLLM::EngineCore", UsedMiB: 6265},
				{PID: 3880364, Name: "VLLM::EngineCore", UsedMiB: 5530},
			},
		},
		{
			name:   "two vLLM engines are the engine",
			file:   "nvidia_smi_query_compute_apps_two_vllm_engines.csv",
			engine: []string{"vllm"},
			want:   []protocol.GPUProcess{},
		},
		{
			name:   "an empty engine name leaves out nothing",
			file:   "nvidia_smi_query_compute_apps_two_vllm_engines.csv",
			engine: []string{""},
			want: []protocol.GPUProcess{
				{PID: 3858903, Name: "VLLM::EngineCore", UsedMiB: 6265},
				{PID: 3880364, Name: "VLLM::EngineCore", UsedMiB: 5530},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query := tt.query
			if query == nil {
				query = computeAppsQuery
			}
			procs, err := parseComputeApps(readTestdata(t, tt.file), query)
			if err != nil {
				t.Fatal(err)
			}
			got := withoutEngine(procs, tt.engine)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestProcesses(t *testing.T) {
	ctx := context.Background()
	t.Run("idle: empty output is an empty list", func(t *testing.T) {
		run := fakeRun(t, map[string]reply{cmdComputeApps: {text: ""}})
		got, err := Processes(ctx, run, VendorNVIDIA, []string{"ollama"})
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("got %#v, %v; want an empty non-nil list", got, err)
		}
	})
	t.Run("the engine is left out", func(t *testing.T) {
		run := fakeRun(t, map[string]reply{cmdComputeApps: {file: "nvidia_smi_query_compute_apps_GB10_noheader_nounits.txt"}})
		// That output has a gpu_uuid column more than the query asks for.
		if _, err := Processes(ctx, run, VendorNVIDIA, nil); err == nil {
			t.Error("a row that does not match the query: got no error")
		}
		run = fakeRun(t, map[string]reply{cmdComputeApps: {text: "114687, /usr/local/bin/ollama, 19135\n4242, game, 300\n"}})
		got, err := Processes(ctx, run, VendorNVIDIA, []string{"ollama"})
		want := []protocol.GPUProcess{{PID: 4242, Name: "game", UsedMiB: 300}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, %v; want %+v", got, err, want)
		}
	})
	t.Run("other vendors cannot tell", func(t *testing.T) {
		for _, v := range []string{VendorAMD, VendorApple, VendorCPU} {
			if got, err := Processes(ctx, fakeRun(t, nil), v, nil); got != nil || err != nil {
				t.Errorf("%s: got %v, %v; want nil, nil", v, got, err)
			}
		}
	})
	t.Run("nvidia-smi missing", func(t *testing.T) {
		_, err := Processes(ctx, fakeRun(t, nil), VendorNVIDIA, nil)
		if !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("got %v, want an error wrapping exec.ErrNotFound", err)
		}
	})
}

func TestIsEngine(t *testing.T) {
	tests := []struct {
		path   string
		engine []string
		want   bool
	}{
		{"/usr/local/bin/ollama", []string{"ollama"}, true},
		{"VLLM::EngineCore", []string{"vllm"}, true},
		{`C:\Program Files\Ollama\ollama.exe`, []string{"Ollama"}, true},
		{"/opt/ollama-tools/bin/python3", []string{"ollama"}, false}, // the directory is not the program
		{"[Not Found]", []string{"ollama", "vllm"}, false},
		{"/app/llama-server", []string{"  llama-server "}, true},
		{"/app/llama-server", nil, false},
	}
	for _, tt := range tests {
		if got := isEngine(tt.path, tt.engine); got != tt.want {
			t.Errorf("isEngine(%q, %q) = %v, want %v", tt.path, tt.engine, got, tt.want)
		}
	}
}
