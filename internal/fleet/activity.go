package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// nodeState is what a node's last heartbeat said of it.
type nodeState struct {
	paused    string
	telemetry *protocol.Telemetry
	at        time.Time
}

// Paused says why the node takes no new jobs now, or "" when it does.
func (n *Node) Paused() string {
	if st := n.state.Load(); st != nil {
		return st.paused
	}
	return ""
}

// Telemetry returns the node's latest hardware reading and when it came; nil when it sent
// none.
func (n *Node) Telemetry() (*protocol.Telemetry, time.Time) {
	if st := n.state.Load(); st != nil {
		return st.telemetry, st.at
	}
	return nil, time.Time{}
}

// heartbeat takes in what a heartbeat says of the node: which models are loaded, whether it
// takes jobs, its hardware reading. The heartbeat is within the protocol's limits
// (checkHeartbeat).
func (s *session) heartbeat(hb *protocol.Heartbeat) {
	n, now := s.node, s.fleet.cfg.Now()
	changed := false
	for _, o := range n.Offers {
		cold := hb.Loaded != nil && !contains(hb.Loaded, o.Model)
		changed = o.cold.Swap(cold) != cold || changed
	}
	prev := n.state.Swap(&nodeState{paused: hb.Paused, telemetry: hb.Telemetry, at: now})
	if wasPaused := prev != nil && prev.paused != ""; wasPaused != (hb.Paused != "") {
		changed = true
		if hb.Paused != "" {
			s.fleet.log.Info("node paused", logNode, n.ID, "reason", hb.Paused)
		} else {
			s.fleet.log.Info("node resumed", logNode, n.ID)
		}
	}
	if changed {
		s.fleet.changedNow() // rankings order warm nodes first, and skip paused ones
	}
	if hb.Telemetry != nil {
		s.mu.Lock()
		s.act.observe(n.ID, now, hb.Telemetry)
		s.mu.Unlock()
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// activity is what a session records of its node's life until it is stored: the session's
// online and busy time, the jobs it ran per day, and its telemetry per minute. The session's
// mu guards it.
type activity struct {
	rec       store.NodeSession
	busySince time.Time // when the node last went from idle to busy; zero while idle
	days      map[time.Time]*store.NodeDay
	minute    time.Time // the telemetry minute being summed up
	sum       telemetrySum
	samples   []store.TelemetrySample // minutes summed up, not stored yet
}

// jobStarted and jobEnded track when the node is busy: running at least one job.
func (a *activity) jobStarted(running int, now time.Time) {
	if running == 1 {
		a.busySince = now
	}
}

func (a *activity) jobEnded(running int, now time.Time) {
	if running == 0 && !a.busySince.IsZero() {
		a.rec.Busy += now.Sub(a.busySince)
		a.busySince = time.Time{}
	}
}

// ended counts a job that ended with the node's end frame (or the node's going away).
func (a *activity) ended(nodeID string, now time.Time, e *protocol.End) {
	day := now.UTC().Truncate(24 * time.Hour)
	d := a.days[day]
	if d == nil {
		if a.days == nil {
			a.days = make(map[time.Time]*store.NodeDay)
		}
		d = &store.NodeDay{NodeID: nodeID, Day: day}
		a.days[day] = d
	}
	d.Jobs++
	if e.Error != nil {
		d.Failed++
	}
	d.PromptTokens += int64(e.Usage.PromptTokens)
	d.CompletionTokens += int64(e.Usage.CompletionTokens)
}

// observe adds a reading to the minute's summary, closing the minute before when a new one
// begins.
func (a *activity) observe(nodeID string, now time.Time, t *protocol.Telemetry) {
	minute := now.UTC().Truncate(time.Minute)
	if !minute.Equal(a.minute) {
		a.closeMinute(nodeID)
		a.minute = minute
	}
	a.sum.add(t)
}

func (a *activity) closeMinute(nodeID string) {
	if s, ok := a.minuteSoFar(nodeID); ok {
		a.samples = append(a.samples, s)
	}
	a.sum = telemetrySum{}
}

// minuteSoFar is the summary of the minute being summed up, if it has a reading.
func (a *activity) minuteSoFar(nodeID string) (store.TelemetrySample, bool) {
	if a.sum.n == 0 {
		return store.TelemetrySample{}, false
	}
	b, err := json.Marshal(a.sum.summary())
	return store.TelemetrySample{NodeID: nodeID, At: a.minute, Data: b}, err == nil
}

// take returns what is to be stored now and forgets it: the session's record (its busy time
// counted up to now), the day counts, and the telemetry minutes: those finished, and the one
// going on so far (stored again, replacing it, as it goes on).
func (a *activity) take(now time.Time, ended bool) (store.NodeSession, []store.NodeDay, []store.TelemetrySample) {
	a.rec.LastSeen = now
	if !a.busySince.IsZero() {
		a.rec.Busy += now.Sub(a.busySince)
		a.busySince = now
		if ended {
			a.busySince = time.Time{}
		}
	}
	a.rec.Ended = ended
	if ended {
		a.closeMinute(a.rec.NodeID)
	}
	days := make([]store.NodeDay, 0, len(a.days))
	for _, d := range a.days {
		days = append(days, *d)
	}
	clear(a.days)
	samples := a.samples
	a.samples = nil
	if s, ok := a.minuteSoFar(a.rec.NodeID); ok {
		samples = append(samples, s)
	}
	return a.rec, days, samples
}

// putBack returns what take gave when storing it failed, to be stored with the next.
func (a *activity) putBack(days []store.NodeDay, samples []store.TelemetrySample) {
	for _, d := range days {
		cur := a.days[d.Day]
		if cur == nil {
			if a.days == nil {
				a.days = make(map[time.Time]*store.NodeDay)
			}
			cur = &store.NodeDay{NodeID: d.NodeID, Day: d.Day}
			a.days[d.Day] = cur
		}
		cur.Jobs += d.Jobs
		cur.Failed += d.Failed
		cur.PromptTokens += d.PromptTokens
		cur.CompletionTokens += d.CompletionTokens
	}
	var kept []store.TelemetrySample
	for _, s := range samples {
		if !s.At.Equal(a.minute) { // the minute going on is summed up again anyway
			kept = append(kept, s)
		}
	}
	a.samples = append(kept, a.samples...)
}

// telemetrySum sums up a minute of readings: per GPU the highest temperature, power and
// memory used, and the mean utilization; the processes of the last reading that listed them.
type telemetrySum struct {
	n         int
	gpus      []protocol.GPUStat
	util      []float64 // sums of utilization readings, by position in gpus
	utilN     []int
	processes []protocol.GPUProcess
}

func (s *telemetrySum) add(t *protocol.Telemetry) {
	s.n++
	if t.Processes != nil {
		s.processes = t.Processes
	}
	for _, g := range t.GPUs {
		i := s.gpu(g.Index)
		cur := &s.gpus[i]
		cur.MemoryUsedMiB = maxOf(cur.MemoryUsedMiB, g.MemoryUsedMiB)
		cur.TemperatureC = maxOf(cur.TemperatureC, g.TemperatureC)
		cur.PowerW = maxOf(cur.PowerW, g.PowerW)
		if g.MemoryTotalMiB != nil {
			cur.MemoryTotalMiB = g.MemoryTotalMiB
		}
		if g.PowerLimitW != nil {
			cur.PowerLimitW = g.PowerLimitW
		}
		if g.UtilizationPct != nil {
			s.util[i] += *g.UtilizationPct
			s.utilN[i]++
		}
	}
}

// gpu returns the position of a GPU's summary, adding one for a GPU not seen yet.
func (s *telemetrySum) gpu(index int) int {
	for i := range s.gpus {
		if s.gpus[i].Index == index {
			return i
		}
	}
	s.gpus = append(s.gpus, protocol.GPUStat{Index: index})
	s.util = append(s.util, 0)
	s.utilN = append(s.utilN, 0)
	return len(s.gpus) - 1
}

func (s *telemetrySum) summary() *protocol.Telemetry {
	t := &protocol.Telemetry{GPUs: slices.Clone(s.gpus), Processes: s.processes}
	for i := range t.GPUs {
		if s.utilN[i] > 0 {
			mean := s.util[i] / float64(s.utilN[i])
			t.GPUs[i].UtilizationPct = &mean
		}
	}
	return t
}

func maxOf[T int64 | float64](cur, v *T) *T {
	if v == nil || (cur != nil && *cur >= *v) {
		return cur
	}
	x := *v
	return &x
}

// flush stores what a session has recorded of its node; ended says the session is over.
func (s *session) flush(ctx context.Context, ended bool) error {
	s.mu.Lock()
	rec, days, samples := s.act.take(s.fleet.cfg.Now(), ended)
	s.mu.Unlock()
	st := s.fleet.cfg.Store
	return errors.Join(st.UpdateNodeSessions(ctx, []*store.NodeSession{&rec}), st.AddNodeDays(ctx, days), st.InsertTelemetry(ctx, samples))
}

// telemetryRetention is how long the downsampled telemetry is kept.
const telemetryRetention = 7 * 24 * time.Hour
