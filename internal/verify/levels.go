package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/report"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/store"
)

// How far back a node's record goes.
const (
	recordDays   = 30
	recordChecks = 50
	uptimeWindow = 7 * 24 * time.Hour
)

// rescore recomputes every connected node's score, applies the level rules, and stores the
// scores in one transaction.
func (p *Prober) rescore(ctx context.Context) error {
	scores := map[string]float64{}
	for _, n := range p.cfg.Fleet.Nodes() {
		s, err := p.applyScore(ctx, n)
		if err != nil {
			return err
		}
		scores[n.ID] = s
	}
	if len(scores) == 0 {
		return nil
	}
	return p.cfg.Store.SetNodeScores(ctx, scores, p.cfg.Now())
}

// apply recomputes a node's score and level after a check.
func (p *Prober) apply(ctx context.Context, n *fleet.Node) error {
	s, err := p.applyScore(ctx, n)
	if err != nil {
		return err
	}
	return p.cfg.Store.SetNodeScores(ctx, map[string]float64{n.ID: s}, p.cfg.Now())
}

// applyScore computes a node's score and moves the node to the level the rules call for. A
// level an operator set in the database since is taken first (and recorded there by them).
func (p *Prober) applyScore(ctx context.Context, n *fleet.Node) (float64, error) {
	p.applyMu.Lock() // one node's checks end together: one decision at a time
	defer p.applyMu.Unlock()
	stored, err := p.cfg.Store.Node(ctx, n.ID)
	if err != nil {
		return 0, err
	}
	if stored.Level != n.Level() && stored.LevelChangedAt.After(n.Connected) {
		p.cfg.Fleet.SetLevel(n, stored.Level) // an operator's decision
	}
	rec, err := p.record(ctx, n, stored)
	if err != nil {
		return 0, err
	}
	score := reputation.Compute(rec)
	n.SetScore(score.Value)
	cur := n.Level()
	next, why, changed := p.cfg.Rules.Next(cur, rec, score)
	if !changed {
		return score.Value, nil
	}
	now := p.cfg.Now()
	if err := p.cfg.Store.SetNodeLevel(ctx, n.ID, next, why, now); err != nil {
		return 0, err
	}
	if err := p.cfg.Store.AddAudit(ctx, &store.AuditEntry{At: now, Actor: "coordinator", Action: "node.level", Target: n.ID,
		Detail: fmt.Sprintf("%s → %s: %s", cur, next, why)}); err != nil {
		return 0, err
	}
	p.cfg.Fleet.SetLevel(n, next)
	p.log.Info("node level changed", "node", n.ID, "from", cur, "to", next, "reason", why)
	return score.Value, nil
}

// Explain returns a node's score with its reasons, as its provider sees it: from its record,
// and from what the fleet measures of it while it is connected.
func (p *Prober) Explain(ctx context.Context, nodeID string) (reputation.Score, error) {
	stored, err := p.cfg.Store.Node(ctx, nodeID)
	if err != nil {
		return reputation.Score{}, err
	}
	rec, err := p.record(ctx, p.cfg.Fleet.Node(nodeID), stored)
	if err != nil {
		return reputation.Score{}, err
	}
	return reputation.Compute(rec), nil
}

// record is what the coordinator knows of a node, for its score; n is nil when the node is not
// connected.
func (p *Prober) record(ctx context.Context, n *fleet.Node, stored *store.Node) (reputation.Record, error) {
	now := p.cfg.Now()
	rec := reputation.Record{Now: now, FirstSeen: stored.FirstSeen, UptimeInWindows: -1, Reliability: -1}
	days, err := p.cfg.Store.NodeDays(ctx, stored.ID, now.AddDate(0, 0, -recordDays))
	if err != nil {
		return rec, err
	}
	for _, d := range days {
		rec.Days = append(rec.Days, reputation.Day{Day: d.Day, Jobs: d.Jobs, Failed: d.Failed})
	}
	checks, err := p.cfg.Store.NodeChecks(ctx, stored.ID, recordChecks)
	if err != nil {
		return rec, err
	}
	rec.LevelSince = stored.LevelChangedAt // the rules count only the checks since
	if rec.Quarantines, err = p.quarantines(ctx, stored.ID, now); err != nil {
		return rec, err
	}
	for _, c := range slices.Backward(checks) { // oldest first
		rec.Checks = append(rec.Checks, reputation.Check{At: c.At, Kind: c.Kind, Passed: c.Passed})
	}
	if rec.UptimeInWindows, err = p.uptime(ctx, stored, now); err != nil {
		return rec, err
	}
	if n != nil {
		rec.Reliability, rec.LatencyRatio, rec.ThroughputRatio = p.measured(n)
	}
	return rec, nil
}

// quarantines counts the times a node was quarantined in the last reputation.HistoryDays days,
// from the audit log.
func (p *Prober) quarantines(ctx context.Context, nodeID string, now time.Time) (int, error) {
	entries, err := p.cfg.Store.AuditLog(ctx, nodeID, 200)
	if err != nil {
		return 0, err
	}
	since := now.AddDate(0, 0, -reputation.HistoryDays)
	n := 0
	for _, e := range entries {
		if e.At.After(since) && strings.Contains(e.Detail, "→ "+store.LevelQuarantined) {
			n++
		}
	}
	return n, nil
}

// uptime is the share of the node's windows over the last week it was online, counted only
// while this coordinator has run (its own restarts and outages cost no node anything); -1
// when there is no time to count yet.
func (p *Prober) uptime(ctx context.Context, n *store.Node, now time.Time) (float64, error) {
	since := now.Add(-uptimeWindow)
	if p.started.After(since) {
		since = p.started
	}
	sched, err := report.Schedule(n)
	if err != nil {
		sched = nil // windows it cannot have meant: count every hour
	}
	sessions, err := p.cfg.Store.NodeSessions(ctx, n.ID, since)
	if err != nil {
		return 0, err
	}
	if share, ok := report.Uptime(sessions, sched, since, now); ok {
		return share, nil
	}
	return -1, nil
}

// measured is what the fleet measured of the node's offers: reliability (the mean over offers
// that ran jobs; -1 none), and time to first token and tokens per second relative to the
// median of the nodes serving the same models (1 typical; 0 unknown).
func (p *Prober) measured(n *fleet.Node) (reliability, latency, throughput float64) {
	reliability = -1
	var rel, lat, thr []float64
	for _, o := range n.Offers {
		st := o.Stats()
		if st.Completed+st.Failed > 0 {
			rel = append(rel, st.Reliability)
		}
		var ttfts, tpss []float64
		for _, peer := range p.cfg.Fleet.Offers(o.Model) {
			ps := peer.Stats()
			if ps.TTFT > 0 {
				ttfts = append(ttfts, float64(ps.TTFT))
			}
			if ps.TokensPerSecond > 0 {
				tpss = append(tpss, ps.TokensPerSecond)
			}
		}
		if m := median(ttfts); st.TTFT > 0 && m > 0 {
			lat = append(lat, float64(st.TTFT)/m)
		}
		if m := median(tpss); st.TokensPerSecond > 0 && m > 0 {
			thr = append(thr, st.TokensPerSecond/m)
		}
	}
	if len(rel) > 0 {
		reliability = mean(rel)
	}
	return reliability, mean(lat), mean(thr)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
