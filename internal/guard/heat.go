package guard

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// heatWatch pauses the node while a GPU is too hot or draws too much power. A GPU that reaches
// a limit holds the pause until a reading shows it below the limit's resume level: a reading
// the node could not take, or a GPU missing from the telemetry, holds it too.
type heatWatch struct {
	limits []limit
	over   []overLimit // in the order they reached their limit
}

// limit is a ceiling on one reading of each GPU, and the level it must fall below again.
type limit struct {
	max, resume float64
	unit        string
	verb        string // "is at 86 °C", "draws 330 W"
	read        func(protocol.GPUStat) *float64
}

// overLimit is a GPU that reached a limit, with the reason given then.
type overLimit struct {
	gpu    int
	which  int // index in limits
	reason string
}

func newHeatWatch(cfg Config) heatWatch {
	var w heatWatch
	if cfg.MaxTemperatureC > 0 {
		w.limits = append(w.limits, limit{cfg.MaxTemperatureC, cfg.ResumeTemperatureC, "°C", "is at",
			func(g protocol.GPUStat) *float64 { return g.TemperatureC }})
	}
	if cfg.MaxPowerW > 0 {
		w.limits = append(w.limits, limit{cfg.MaxPowerW, cfg.ResumePowerW, "W", "draws",
			func(g protocol.GPUStat) *float64 { return g.PowerW }})
	}
	return w
}

// observe takes a reading and returns why the node must pause, "" when it need not.
func (w *heatWatch) observe(t *protocol.Telemetry) string {
	if t != nil {
		for _, g := range t.GPUs {
			for i, l := range w.limits {
				w.check(g.Index, i, l, l.read(g))
			}
		}
	}
	reasons := make([]string, len(w.over))
	for i, o := range w.over {
		reasons[i] = o.reason
	}
	return strings.Join(reasons, "; ")
}

// check compares GPU gpu's reading v with limits[i]; nil or NaN when unknown.
func (w *heatWatch) check(gpu, i int, l limit, v *float64) {
	if v == nil || math.IsNaN(*v) {
		return
	}
	at := slices.IndexFunc(w.over, func(o overLimit) bool { return o.gpu == gpu && o.which == i })
	switch {
	case at < 0 && *v >= l.max:
		w.over = append(w.over, overLimit{gpu, i, fmt.Sprintf("GPU %d %s %s %s (limit %s %s); resuming below %s %s",
			gpu, l.verb, num(*v), l.unit, num(l.max), l.unit, num(l.resume), l.unit)})
	case at >= 0 && *v < l.resume:
		w.over = slices.Delete(w.over, at, at+1)
	}
}
