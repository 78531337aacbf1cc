// Package hw finds out what hardware a provider's node has, reads its live GPU telemetry, lists
// the other processes using its GPUs, and estimates whether a model fits in its GPU memory.
//
// It reads the vendors' command-line tools (nvidia-smi, rocm-smi, sysctl) through a [Runner],
// so tests replay outputs recorded on real machines (see testdata/README.md). A machine without
// GPUs, or without the tools, is not an error: it is a CPU-only node.
//
// This package imports only the standard library and protocol; it must not import the agent,
// the engines or anything on the coordinator's side.
package hw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"

	"github.com/shareai/shareai/internal/protocol"
)

// The vendors as protocol.GPU.Vendor names them, and VendorCPU for a node without a GPU.
const (
	VendorNVIDIA = "nvidia"
	VendorAMD    = "amd"
	VendorApple  = "apple"
	VendorCPU    = "cpu"
)

// Probe discovers one machine's hardware. Its fields are the machine as the package sees it,
// so that tests can describe a machine that is not the one they run on; [Local] fills them for
// this machine.
type Probe struct {
	Run    Runner // runs the vendors' tools; nil runs them with Exec
	GOOS   string // as runtime.GOOS: "linux", "darwin", ...
	GOARCH string // as runtime.GOARCH: "amd64", "arm64", ...
	NumCPU int    // logical CPUs
	// ReadFile reads a file such as /proc/meminfo; nil reads none.
	ReadFile func(name string) ([]byte, error)
	// Log receives why a vendor's tool was passed over (missing, failed, unreadable output);
	// nil discards it.
	Log *slog.Logger
}

// Local returns the Probe for the machine this program runs on, running tools with run.
func Local(run Runner) Probe {
	return Probe{
		Run:      run,
		GOOS:     runtime.GOOS,
		GOARCH:   runtime.GOARCH,
		NumCPU:   runtime.NumCPU(),
		ReadFile: os.ReadFile,
	}
}

// Discover describes this machine: its CPU and memory and its GPUs, with a Fingerprint. It
// tries NVIDIA, then AMD, then Apple Silicon; a machine where none answers is CPU-only, which
// is not an error. It fails only when ctx ends.
func Discover(ctx context.Context, run Runner) (protocol.Hardware, error) {
	return Local(run).Discover(ctx)
}

// Discover describes the probed machine; see the package-level [Discover].
func (p Probe) Discover(ctx context.Context) (protocol.Hardware, error) {
	hw := p.host(ctx)
	for _, v := range p.vendors() {
		f, err := v.find(ctx, p, hw)
		if err != nil {
			if ctx.Err() != nil {
				return hw, fmt.Errorf("discover hardware: %w", ctx.Err())
			}
			p.passOver(v.tool, err)
			continue
		}
		if len(f.gpus) > 0 {
			hw.GPUs = f.gpus
			hw.UnifiedMemory = f.unified
			break
		}
	}
	hw.Fingerprint = Fingerprint(hw)
	return hw, nil
}

// Vendor returns the vendor of the node's GPUs ([VendorNVIDIA], [VendorAMD], [VendorApple]),
// or [VendorCPU] when it has none: the vendor to pass to [Sample] and [Processes].
func Vendor(hw protocol.Hardware) string {
	if len(hw.GPUs) == 0 || hw.GPUs[0].Vendor == "" {
		return VendorCPU
	}
	return hw.GPUs[0].Vendor
}

// found is what one vendor's discovery found: no GPUs means the vendor has none here.
type found struct {
	gpus    []protocol.GPU
	unified bool // the GPUs share the machine's memory
}

// vendor is one step of discovery: a vendor's tool and how to find its GPUs with it.
type vendor struct {
	tool string
	find func(ctx context.Context, p Probe, host protocol.Hardware) (found, error)
}

// vendors lists the discovery steps for the probed machine, in the order they are tried.
func (p Probe) vendors() []vendor {
	if p.appleSilicon() {
		return []vendor{{"sysctl", findApple}}
	}
	return []vendor{{"nvidia-smi", findNVIDIA}, {"rocm-smi", findAMD}}
}

// runner returns the Runner to run tools with.
func (p Probe) runner() Runner {
	if p.Run == nil {
		return Exec
	}
	return p.Run
}

// appleSilicon reports whether the probed machine is a Mac with an Apple chip.
func (p Probe) appleSilicon() bool {
	return p.GOOS == "darwin" && p.GOARCH == "arm64"
}

// passOver logs why discovery moved on from a tool: quietly when it is not installed.
func (p Probe) passOver(tool string, err error) {
	if p.Log == nil {
		return
	}
	if errors.Is(err, exec.ErrNotFound) {
		p.Log.Debug("hardware tool not installed", logKeyTool, tool, logKeyErr, err)
		return
	}
	p.Log.Warn("hardware tool failed; carrying on without it", logKeyTool, tool, logKeyErr, err)
}

// Log keys.
const (
	logKeyTool = "tool"
	logKeyErr  = "err"
)
