package hw

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// nvidiaQuery is what Discover and Sample ask nvidia-smi for, in this order: one run gives both
// the GPUs and their live readings.
var nvidiaQuery = []string{
	"index", "uuid", "name", "memory.total", "memory.used", "temperature.gpu",
	"power.draw", "power.limit", "utilization.gpu", "driver_version",
}

// queryNVIDIA runs nvidia-smi --query-gpu and returns one record per GPU.
func queryNVIDIA(ctx context.Context, run Runner) ([]record, error) {
	out, err := run(ctx, "nvidia-smi",
		"--query-gpu="+strings.Join(nvidiaQuery, ","), "--format=csv,noheader,nounits")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi --query-gpu: %w", err)
	}
	recs, err := parseCSV(out, nvidiaQuery)
	if err != nil {
		return nil, fmt.Errorf("read nvidia-smi --query-gpu output: %w", err)
	}
	return recs, nil
}

// findNVIDIA discovers NVIDIA GPUs. A GPU that reports no memory (GB10, the DGX Spark, says
// [N/A]) shares the machine's memory: it gets [sharedMemoryBudgetMiB] of it.
func findNVIDIA(ctx context.Context, p Probe, host protocol.Hardware) (found, error) {
	recs, err := queryNVIDIA(ctx, p.runner())
	if err != nil || len(recs) == 0 {
		return found{}, err
	}
	f := found{gpus: nvidiaGPUs(recs)}
	cuda := cudaVersion(ctx, p.runner())
	for i := range f.gpus {
		f.gpus[i].CUDA = cuda
		if f.gpus[i].VRAMMiB == 0 && host.MemoryMiB > 0 {
			f.gpus[i].VRAMMiB = sharedMemoryBudgetMiB(host.MemoryMiB)
			f.unified = true
		}
	}
	return f, nil
}

// nvidiaGPUs maps nvidia-smi records to GPUs; VRAMMiB is 0 where the tool could not tell.
func nvidiaGPUs(recs []record) []protocol.GPU {
	gpus := make([]protocol.GPU, len(recs))
	for i, r := range recs {
		gpus[i] = protocol.GPU{
			Index:   index(r, i),
			Vendor:  VendorNVIDIA,
			Name:    r.text("name"),
			UUID:    r.text("uuid"),
			VRAMMiB: deref(r.int("memory.total")),
			Driver:  r.text("driver_version"),
		}
	}
	return gpus
}

// nvidiaStats maps nvidia-smi records to readings; a nil field is one the tool could not read.
func nvidiaStats(recs []record) []protocol.GPUStat {
	stats := make([]protocol.GPUStat, len(recs))
	for i, r := range recs {
		stats[i] = protocol.GPUStat{
			Index:          index(r, i),
			MemoryUsedMiB:  r.int("memory.used"),
			MemoryTotalMiB: r.int("memory.total"),
			TemperatureC:   r.float("temperature.gpu"),
			PowerW:         r.float("power.draw"),
			PowerLimitW:    r.float("power.limit"),
			UtilizationPct: r.float("utilization.gpu"),
		}
	}
	return stats
}

// index returns the GPU's index field, or its row when the output has none.
func index(r record, row int) int {
	if n := r.int("index"); n != nil && *n <= 1<<20 {
		return int(*n)
	}
	return row
}

// cudaVersion returns the CUDA version the driver supports, from the header of nvidia-smi's
// table ("CUDA Version: 13.0"), or "" when it cannot tell: it is a detail, not a reason to
// pass the GPUs over.
func cudaVersion(ctx context.Context, run Runner) string {
	out, err := run(ctx, "nvidia-smi")
	if err != nil {
		return ""
	}
	if m := cudaHeader.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

var cudaHeader = regexp.MustCompile(`CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)`)

// sharedMemoryBudgetMiB is what a GPU that shares the machine's memory (GB10) may use of it:
// 7/8, leaving the rest to the operating system and the agent. CUDA lets it allocate nearly
// all of it, so the limit is ours: a model that fills the machine's memory stalls the machine.
func sharedMemoryBudgetMiB(memoryMiB int64) int64 {
	return memoryMiB - memoryMiB/8
}

// deref returns *p, or 0 when p is nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
