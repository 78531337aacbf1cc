package hw

import (
	"context"

	"github.com/shareai/shareai/internal/protocol"
)

// findApple describes an Apple chip's GPU from what host read with sysctl: its name is the
// chip's ("Apple M4 Pro") and it shares the machine's memory, of which it may use
// [metalBudgetMiB]. Without the memory size it finds nothing.
func findApple(_ context.Context, _ Probe, host protocol.Hardware) (found, error) {
	if host.MemoryMiB <= 0 {
		return found{}, nil
	}
	name := host.CPU
	if name == "" {
		name = "Apple Silicon"
	}
	gpu := protocol.GPU{
		Vendor:  VendorApple,
		Name:    name,
		VRAMMiB: metalBudgetMiB(host.MemoryMiB),
	}
	return found{gpus: []protocol.GPU{gpu}, unified: true}, nil
}

// metalBudgetMiB is the memory a Mac's GPU may use for a model, after Ollama: the working set
// Metal recommends (recommendedMaxWorkingSetSize), less 512 MiB kept back. Metal recommends
// 2/3 of the memory on Macs with up to 36 GiB and 3/4 above (16 GiB → 10.7 GiB, 64 GiB →
// 48 GiB, 192 GiB → 144 GiB); this is that rule, as the agent cannot ask Metal from Go
// without cgo.
func metalBudgetMiB(memoryMiB int64) int64 {
	const keepBack = 512
	recommended := memoryMiB * 3 / 4
	if memoryMiB <= 36<<10 {
		recommended = memoryMiB * 2 / 3
	}
	return max(recommended-keepBack, 0)
}
