package guard

import (
	"fmt"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// ownerWatch steps the node aside while its owner uses the GPU. Two signals show the owner:
// a GPU process that is not the node's engine (a training run), and a GPU busy while the node
// runs no job (a game, which process lists do not show).
//
// The node steps aside at the first foreign process, or once a GPU has been busy for busyFor
// while the node ran no job, so that the tail of its last job does not count. While aside,
// any busy GPU keeps it aside, even when the node still runs jobs that may be what keeps it
// busy: the node cannot tell its jobs from the owner's game then. It comes back at the first
// reading after the quiet period without either.
type ownerWatch struct {
	enabled bool
	busyPct float64
	busyFor time.Duration
	quiet   time.Duration
	engine  map[string]bool // the engine's process names, as processName writes them

	reason    string    // why the node is aside; "" when it is not
	lastSeen  time.Time // the last reading that kept the node aside
	busySince time.Time // since when a GPU has been busy while the node ran no job
}

func newOwnerWatch(cfg Config) ownerWatch {
	w := ownerWatch{
		enabled: cfg.StepAside,
		busyPct: cfg.BusyUtilizationPct,
		busyFor: cfg.BusyFor,
		quiet:   cfg.QuietPeriod,
		engine:  map[string]bool{},
	}
	for _, name := range cfg.EngineProcesses {
		if name := processName(name); name != "" {
			w.engine[name] = true
		}
	}
	return w
}

// observe takes a reading and returns why the node stands aside, "" when it does not.
func (w *ownerWatch) observe(now time.Time, t *protocol.Telemetry, running int) string {
	if !w.enabled {
		return ""
	}
	foreign := w.foreign(t)
	gpu, busy := busiest(t, w.busyPct)
	idleBusy := busy && running == 0
	switch {
	case !idleBusy:
		w.busySince = time.Time{}
	case w.busySince.IsZero():
		w.busySince = now
	}
	switch {
	case w.reason != "" && (len(foreign) > 0 || busy):
		w.lastSeen = now
	case w.reason != "" && now.Sub(w.lastSeen) >= w.quiet:
		w.reason = ""
	case w.reason != "": // aside, and not yet quiet for long enough
	case len(foreign) > 0:
		w.reason, w.lastSeen = processReason(foreign), now
	case idleBusy && now.Sub(w.busySince) >= w.busyFor:
		w.reason, w.lastSeen = busyReason(gpu), now
	}
	return w.reason
}

// foreign returns the GPU processes that are not the engine's; none when t cannot tell.
func (w *ownerWatch) foreign(t *protocol.Telemetry) []protocol.GPUProcess {
	if t == nil {
		return nil
	}
	var out []protocol.GPUProcess
	for _, p := range t.Processes {
		if !w.engine[processName(p.Name)] {
			out = append(out, p)
		}
	}
	return out
}

// busiest returns the first GPU whose utilization is above pct, if any.
func busiest(t *protocol.Telemetry, pct float64) (protocol.GPUStat, bool) {
	if t == nil {
		return protocol.GPUStat{}, false
	}
	for _, g := range t.GPUs {
		if u := g.UtilizationPct; u != nil && *u > pct {
			return g, true
		}
	}
	return protocol.GPUStat{}, false
}

// busyReason says which GPU is busy without the node's jobs.
func busyReason(g protocol.GPUStat) string {
	return fmt.Sprintf("the GPU is in use by another program (GPU %d at %s%% while the node runs no job)",
		g.Index, num(*g.UtilizationPct))
}

// processReason says which programs use the GPU: "the GPU is in use by another program
// (pid 4242 python3, and 1 more)".
func processReason(ps []protocol.GPUProcess) string {
	who := fmt.Sprintf("pid %d", ps[0].PID)
	if name := baseName(ps[0].Name); name != "" {
		who += " " + name
	}
	if len(ps) > 1 {
		who += fmt.Sprintf(", and %d more", len(ps)-1)
	}
	return "the GPU is in use by another program (" + who + ")"
}

// processName is the name that identifies a program: its file name, in lower case, without
// ".exe", so that "C:\Program Files\Ollama\ollama.exe" is ollama.
func processName(name string) string {
	return strings.TrimSuffix(strings.ToLower(baseName(name)), ".exe")
}

// baseName returns the last element of a Unix or Windows path.
func baseName(path string) string {
	return path[strings.LastIndexAny(path, `/\`)+1:]
}
