package hw

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/shareai/shareai/internal/protocol"
)

// Fingerprint identifies a node's hardware: 16 hex digits of a SHA-256 over each GPU's vendor,
// name, UUID, memory and driver. It changes when a GPU is added, removed or swapped or its
// driver is updated, and not with the order the tool lists the GPUs in or with telemetry. A
// node without GPUs is identified by its architecture, CPU name and CPU count instead.
func Fingerprint(hw protocol.Hardware) string {
	h := sha256.New()
	if len(hw.GPUs) == 0 {
		fmt.Fprintf(h, "cpu %q %q %d\n", hw.Arch, hw.CPU, hw.CPUs)
	}
	gpus := slices.Clone(hw.GPUs)
	slices.SortFunc(gpus, func(a, b protocol.GPU) int {
		return cmp.Or(cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Index, b.Index))
	})
	for _, g := range gpus {
		// %q keeps the fields apart whatever they contain.
		fmt.Fprintf(h, "gpu %q %q %q %d %q\n", g.Vendor, g.Name, g.UUID, g.VRAMMiB, g.Driver)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
