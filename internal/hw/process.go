package hw

import (
	"context"
	"fmt"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// computeAppsQuery is what Processes asks nvidia-smi for, in this order.
var computeAppsQuery = []string{"pid", "process_name", "used_memory"}

// Processes lists the processes other than the node's engine that use the GPUs, so the agent
// can tell that the machine's owner is using them. engine names the engine's processes: a
// process whose program name contains one of them, ignoring case, is left out ("vllm" leaves
// out "VLLM::EngineCore", "llama-server" leaves out "/app/llama-server").
//
// Only NVIDIA can tell: for other vendors Processes returns nil, nil. An idle NVIDIA GPU gives
// an empty, non-nil list. What NVIDIA lists are compute processes (CUDA): a game or other
// graphics program does not appear, so a caller that wants to know whether the owner is using
// the GPU must also watch its utilization ([Sample]). Inside a container the list may be empty
// (PID isolation), and a process's name may be "[Not Found]": such a process is kept, as an
// unknown one.
func Processes(ctx context.Context, run Runner, vendor string, engine []string) ([]protocol.GPUProcess, error) {
	if vendor != VendorNVIDIA {
		return nil, nil
	}
	if run == nil {
		run = Exec
	}
	out, err := run(ctx, "nvidia-smi",
		"--query-compute-apps="+strings.Join(computeAppsQuery, ","), "--format=csv,noheader,nounits")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi --query-compute-apps: %w", err)
	}
	procs, err := parseComputeApps(out, computeAppsQuery)
	if err != nil {
		return nil, fmt.Errorf("read nvidia-smi --query-compute-apps output: %w", err)
	}
	return withoutEngine(procs, engine), nil
}

// parseComputeApps reads nvidia-smi --query-compute-apps output asked with query. A PID it
// cannot read (a redacted one, say) is 0; so is memory it cannot read.
func parseComputeApps(out []byte, query []string) ([]protocol.GPUProcess, error) {
	recs, err := parseCSV(out, query)
	if err != nil {
		return nil, err
	}
	procs := make([]protocol.GPUProcess, 0, len(recs))
	for _, r := range recs {
		pid := deref(r.int("pid"))
		if pid > 1<<31 {
			pid = 0
		}
		procs = append(procs, protocol.GPUProcess{
			PID:     int(pid),
			Name:    r["process_name"], // as written: "[Not Found]" is an unknown process
			UsedMiB: deref(r.int("used_memory")),
		})
	}
	return procs, nil
}

// withoutEngine returns the processes that are not the engine's.
func withoutEngine(procs []protocol.GPUProcess, engine []string) []protocol.GPUProcess {
	others := make([]protocol.GPUProcess, 0, len(procs))
	for _, p := range procs {
		if !isEngine(p.Name, engine) {
			others = append(others, p)
		}
	}
	return others
}

// isEngine reports whether the program name of a process path contains one of the engine's
// names, ignoring case. Empty names match nothing.
func isEngine(path string, engine []string) bool {
	base := strings.ToLower(path[strings.LastIndexAny(path, `/\`)+1:])
	for _, e := range engine {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" && strings.Contains(base, e) {
			return true
		}
	}
	return false
}
