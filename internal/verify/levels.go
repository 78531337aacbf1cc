package verify

import (
	"cmp"
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
	recordChecks = 200 // of all its models
	uptimeWindow = 7 * 24 * time.Hour
)

// rescore recomputes every connected node's score, applies the level rules, and stores the
// scores in one transaction.
func (p *Prober) rescore(ctx context.Context) error {
	scores := map[string]float64{}
	for _, n := range p.cfg.Fleet.Local() { // its owner scores a remote node, and publishes the score
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

// applyScore computes a node's score, and moves each of its models, then the node, to the
// level the rules call for. A level an operator set in the database since is taken first (and
// recorded there by them); the over-claims recorded since the last look become a failed usage
// check first.
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
	now := p.cfg.Now()
	if _, err := p.cfg.Store.CheckOverclaims(ctx, n.ID, now); err != nil {
		return 0, err
	}
	audit, err := p.cfg.Store.AuditLog(ctx, n.ID, auditRead)
	if err != nil {
		return 0, err
	}
	offers, err := p.offers(ctx, n, stored, audit)
	if err != nil {
		return 0, err
	}
	rec, err := p.record(ctx, n, stored, audit, offers)
	if err != nil {
		return 0, err
	}
	score := reputation.Compute(rec)
	changedOffers := false
	for i, o := range offers {
		next, why, changed := p.cfg.Rules.NextOffer(o.rep, rec, score)
		if !changed {
			continue
		}
		if err := p.setOfferLevel(ctx, n, o, next, why, now); err != nil {
			return 0, err
		}
		offers[i].rep.Level, offers[i].rep.Since = next, now
		if next == store.LevelQuarantined {
			offers[i].rep.Quarantines++
		}
		rec.Offers[i] = offers[i].rep
		changedOffers = true
	}
	if changedOffers {
		score = reputation.Compute(rec) // the checks of a model quarantined since count no more
	}
	n.SetScore(score.Value)
	cur := n.Level()
	next, why, changed := p.cfg.Rules.Next(cur, rec, score)
	if !changed {
		return score.Value, nil
	}
	if err := p.cfg.Store.SetNodeLevel(ctx, n.ID, next, why, now); err != nil {
		return 0, err
	}
	if err := p.cfg.Store.AddAudit(ctx, &store.AuditEntry{At: now, Actor: "coordinator", Action: actionNodeLevel, Target: n.ID,
		Detail: fmt.Sprintf("%s → %s: %s", cur, next, why)}); err != nil {
		return 0, err
	}
	p.cfg.Fleet.SetLevel(n, next)
	p.log.Info("node level changed", "node", n.ID, "from", cur, "to", next, "reason", why)
	return score.Value, nil
}

// renew makes new again, on a node that is new, the models verified on it before it became
// new (its hardware changed, or an operator made it new), so that each proves itself again.
func (p *Prober) renew(ctx context.Context, n *fleet.Node) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	stored, err := p.cfg.Store.Node(ctx, n.ID)
	if err != nil {
		return err
	}
	_, err = p.offers(ctx, n, stored, nil)
	return err
}

// Audit actions of level changes.
const (
	actionNodeLevel  = "node.level"
	actionOfferLevel = "offer.level" // detail "MODEL: FROM → TO: why"
)

// auditRead is how many of a node's audit entries are read for its quarantines.
const auditRead = 200

// offer is one model of a node: its offer while the node serves it (nil otherwise), and how
// the rules see it.
type offer struct {
	fleet *fleet.Offer
	rep   reputation.Offer
}

// offers returns the models of a node as the rules judge them: those it serves now (n nil: none,
// the node is not connected), then the others with a level stored. While the node is new, a
// model verified before it became new (its hardware changed, or an operator made it new) is
// new again: every model proves itself again.
func (p *Prober) offers(ctx context.Context, n *fleet.Node, stored *store.Node, audit []store.AuditEntry) ([]offer, error) {
	levels, err := p.cfg.Store.OfferLevels(ctx, stored.ID)
	if err != nil {
		return nil, err
	}
	byModel := make(map[string]store.OfferLevel, len(levels))
	for _, l := range levels {
		byModel[l.Model] = l
	}
	now := p.cfg.Now()
	var out []offer
	seen := map[string]bool{}
	if n != nil {
		for _, o := range n.Offers {
			l, ok := byModel[o.Model]
			rep := reputation.Offer{Model: o.Model, Level: o.OwnLevel(), Served: true,
				Quarantines: offerQuarantines(audit, o.Model, now)}
			if ok && l.Level == rep.Level {
				rep.Since = l.ChangedAt
			}
			if n.Level() == store.LevelNew && rep.Level == store.LevelVerified && (!ok || l.ChangedAt.Before(stored.LevelChangedAt)) {
				of := offer{fleet: o, rep: rep}
				if err := p.setOfferLevel(ctx, n, of, store.LevelNew, "the node is new again: each of its models proves itself again", now); err != nil {
					return nil, err
				}
				rep.Level, rep.Since = store.LevelNew, now
			}
			out = append(out, offer{fleet: o, rep: rep})
			seen[o.Model] = true
		}
	}
	for _, l := range levels {
		if !seen[l.Model] {
			out = append(out, offer{rep: reputation.Offer{Model: l.Model, Level: l.Level, Since: l.ChangedAt,
				Quarantines: offerQuarantines(audit, l.Model, now)}})
		}
	}
	return out, nil
}

// setOfferLevel records a model's new level on a node, with an audit entry, and applies it to
// the fleet.
func (p *Prober) setOfferLevel(ctx context.Context, n *fleet.Node, o offer, level, why string, now time.Time) error {
	if err := p.cfg.Store.SetOfferLevel(ctx, store.OfferLevel{NodeID: n.ID, Model: o.rep.Model, Level: level, Reason: why, ChangedAt: now}); err != nil {
		return err
	}
	if err := p.cfg.Store.AddAudit(ctx, &store.AuditEntry{At: now, Actor: "coordinator", Action: actionOfferLevel, Target: n.ID,
		Detail: fmt.Sprintf("%s: %s → %s: %s", o.rep.Model, cmp.Or(o.rep.Level, store.LevelNew), level, why)}); err != nil {
		return err
	}
	if o.fleet != nil {
		p.cfg.Fleet.SetOfferLevel(o.fleet, level)
	}
	p.log.Info("model level changed", "node", n.ID, "model", o.rep.Model, "from", o.rep.Level, "to", level, "reason", why)
	return nil
}

// Explain returns a node's score with its reasons, as its provider sees it: from its record,
// and from what the fleet measures of it while it is connected.
func (p *Prober) Explain(ctx context.Context, nodeID string) (reputation.Score, error) {
	stored, err := p.cfg.Store.Node(ctx, nodeID)
	if err != nil {
		return reputation.Score{}, err
	}
	audit, err := p.cfg.Store.AuditLog(ctx, nodeID, auditRead)
	if err != nil {
		return reputation.Score{}, err
	}
	n := p.cfg.Fleet.Node(nodeID)
	levels, err := p.cfg.Store.OfferLevels(ctx, nodeID)
	if err != nil {
		return reputation.Score{}, err
	}
	var offers []offer // as the rules see them, changing nothing
	for _, l := range levels {
		offers = append(offers, offer{rep: reputation.Offer{Model: l.Model, Level: l.Level, Since: l.ChangedAt}})
	}
	if n != nil {
		for _, o := range n.Offers {
			i := slices.IndexFunc(offers, func(x offer) bool { return x.rep.Model == o.Model })
			if i < 0 {
				offers = append(offers, offer{rep: reputation.Offer{Model: o.Model}})
				i = len(offers) - 1
			}
			offers[i].rep.Level, offers[i].rep.Served = o.OwnLevel(), true
		}
	}
	rec, err := p.record(ctx, n, stored, audit, offers)
	if err != nil {
		return reputation.Score{}, err
	}
	return reputation.Compute(rec), nil
}

// record is what the coordinator knows of a node, for its score and levels; n is nil when the
// node is not connected.
func (p *Prober) record(ctx context.Context, n *fleet.Node, stored *store.Node, audit []store.AuditEntry, offers []offer) (reputation.Record, error) {
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
	rec.Quarantines = quarantines(audit, now)
	for _, c := range slices.Backward(checks) { // oldest first
		rec.Checks = append(rec.Checks, reputation.Check{At: c.At, Kind: c.Kind, Passed: c.Passed, Model: c.Model})
	}
	for _, o := range offers {
		rec.Offers = append(rec.Offers, o.rep)
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
// from its audit log.
func quarantines(audit []store.AuditEntry, now time.Time) int {
	since := now.AddDate(0, 0, -reputation.HistoryDays)
	n := 0
	for _, e := range audit {
		if e.Action == actionNodeLevel && e.At.After(since) && strings.Contains(e.Detail, "→ "+store.LevelQuarantined) {
			n++
		}
	}
	return n
}

// offerQuarantines counts the times a model was quarantined on a node in the last
// reputation.HistoryDays days, from the node's audit log.
func offerQuarantines(audit []store.AuditEntry, model string, now time.Time) int {
	since := now.AddDate(0, 0, -reputation.HistoryDays)
	n := 0
	for _, e := range audit {
		rest, ok := strings.CutPrefix(e.Detail, model+": ")
		if ok && e.Action == actionOfferLevel && e.At.After(since) && strings.Contains(rest, "→ "+store.LevelQuarantined+":") {
			n++
		}
	}
	return n
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
