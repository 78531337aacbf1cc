package simulate

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// Comparison sets the coordinator's auction against other policies, on the same fleet,
// demand and seed, and against an offline bound.
type Comparison struct {
	Policies []PolicyResult `json:"policies"`
	Bound    BoundResult    `json:"offline_bound"`
}

// PolicyResult is one policy's run, in the measures the comparison shares with the bound.
type PolicyResult struct {
	Policy string `json:"policy"`
	// Served is the share of live requests served whole.
	Served      float64 `json:"served"`
	Unavailable int64   `json:"unavailable_503"`
	// CapacityUsed is the output tokens delivered to live requests ÷ the output-token capacity
	// of the nodes' windows (slots × tokens per second × window time), the bound's measure.
	CapacityUsed float64 `json:"capacity_used"`
	// Utilization is busy slot-time ÷ online slot-time over every class.
	Utilization float64 `json:"utilization"`
	PerMillion  float64 `json:"live_per_million_usd"`
	TTFTP95     float64 `json:"ttft_p95_ms"`
	QueueP95    float64 `json:"queue_wait_p95_ms"`
	Earned      string  `json:"provider_earnings_usd"`
	// CostGapPct is how much more a million tokens cost than at the bound, in %;
	// CapacityGapPts how many points of capacity the bound uses more.
	CostGapPct     float64 `json:"cost_gap_pct"`
	CapacityGapPts float64 `json:"capacity_gap_points"`

	liveOut int64
}

// BoundResult is the offline bound.
type BoundResult struct {
	What         string  `json:"what"`
	Served       float64 `json:"served_tokens"`
	CapacityUsed float64 `json:"capacity_used"`
	PerMillion   float64 `json:"live_per_million_usd"`
}

const boundWhat = "Offline bound, with the week's requests known in advance: each hour, every live request's " +
	"answer tokens are placed, split at will, on the cheapest output asks of the nodes serving its model, up to " +
	"each node's output-token capacity in its windows that hour (slots × tokens per second; no drops, no queue, " +
	"no latency, no routing preference but the model), the dearest tiers on the cheapest nodes; every served " +
	"prompt is read at the cheapest input ask online that hour; surge at its floor; the fee added. It is the " +
	"least a buyer could pay nodes at their asks for the tokens served within the hour they were asked for, " +
	"and the most of the demand that capacity could serve."

// bound computes the offline bound from the demand a run recorded (the same for every policy:
// arrivals and lengths come from the streams' own random sources).
func (w *world) bound(s *stats) (BoundResult, float64) {
	type slot struct {
		out, in money.Price
		cap     float64 // output tokens
	}
	// Each class's window seconds per hour.
	open := make([][]float64, len(w.classes))
	for _, k := range w.classes {
		open[k.index] = make([]float64, w.hours)
		for h := range w.hours {
			from := w.start.Add(time.Duration(h) * time.Hour)
			to := w.start.Add(min(time.Duration(h+1)*time.Hour, w.end))
			open[k.index][h] = k.windows.Overlap(from, to).Seconds()
		}
	}
	floor := w.mkt.surge.Start()
	// The dearest tiers first: on the cheapest nodes they save the most.
	order := slices.Clone(tier.All[:])
	slices.SortStableFunc(order, func(a, b tier.Tier) int { return cmp.Compare(w.mkt.tiers.Of(b), w.mkt.tiers.Of(a)) })
	var cost, servedTokens, askedOut, servedOut, capacity float64
	var slots []slot
	for mi, name := range w.models {
		for h := range w.hours {
			at := w.start.Add(time.Duration(h) * time.Hour)
			slots = slots[:0]
			for _, n := range w.nodes {
				k := n.class
				if open[k.index][h] == 0 || !slices.Contains(k.Models, name) {
					continue
				}
				ask := k.asks.At(at, k.in, k.out)
				in, out := tier.Scale(tier.Scale(ask.Input, n.spread), floor), tier.Scale(tier.Scale(ask.Output, n.spread), floor)
				c := open[k.index][h] * float64(k.MaxConcurrent) * k.TokensPerSecond
				slots = append(slots, slot{out, in, c})
				capacity += c
			}
			d := s.demand[mi][h]
			var hourAsked float64
			for t := range d {
				hourAsked += d[t][1]
			}
			askedOut += hourAsked
			if hourAsked == 0 || len(slots) == 0 {
				continue
			}
			slices.SortFunc(slots, func(a, b slot) int { return cmp.Compare(a.out, b.out) })
			minIn := slots[0].in
			for _, sl := range slots {
				minIn = min(minIn, sl.in)
			}
			i, left := 0, slots[0].cap
			for _, t := range order {
				want := d[tierIndex(t)][1]
				mult := float64(w.mkt.tiers.Of(t)) / 10000
				served := 0.0
				for want > 0 && i < len(slots) {
					take := min(want, left)
					cost += take * float64(slots[i].out) / 1e6 * mult
					want -= take
					left -= take
					served += take
					if left <= 0 {
						if i++; i < len(slots) {
							left = slots[i].cap
						}
					}
				}
				if a := d[tierIndex(t)][1]; a > 0 {
					prompt := d[tierIndex(t)][0] * served / a
					cost += prompt * float64(minIn) / 1e6 * mult
					servedTokens += prompt
				}
				servedTokens += served
				servedOut += served
			}
		}
	}
	cost += cost * float64(w.mkt.feeBP) / 10000
	b := BoundResult{What: boundWhat}
	if askedOut > 0 {
		b.Served = round(servedOut/askedOut, 4)
	}
	if capacity > 0 {
		b.CapacityUsed = round(servedOut/capacity, 4)
	}
	if servedTokens > 0 {
		b.PerMillion = round(cost/float64(money.USD)/servedTokens*1e6, 6)
	}
	return b, capacity
}

// Compare runs the fleet and demand under every policy with the same seed, and computes the
// offline bound. The report is the auction's, with the comparison.
func Compare(ctx context.Context, f *Fleet, d *Demand, o Options) (*Report, error) {
	w, err := newWorld(ctx, f, d, o)
	if err != nil {
		return nil, err
	}
	var base *Report
	var cmpn Comparison
	var capacity float64
	for _, pol := range Policies {
		o.Policy = pol
		pw, err := newWorld(ctx, f, d, o)
		if err != nil {
			return nil, err
		}
		st, err := pw.run()
		if err != nil {
			return nil, err
		}
		rep := pw.report(st)
		if pol == Auction {
			base = rep
			cmpn.Bound, capacity = w.bound(st)
		}
		cmpn.Policies = append(cmpn.Policies, policyResult(rep, st))
	}
	for i := range cmpn.Policies {
		pr := &cmpn.Policies[i]
		if capacity > 0 {
			pr.CapacityUsed = round(float64(pr.liveOut)/capacity, 4)
		}
		if cmpn.Bound.PerMillion > 0 {
			pr.CostGapPct = round(100*(pr.PerMillion-cmpn.Bound.PerMillion)/cmpn.Bound.PerMillion, 2)
		}
		pr.CapacityGapPts = round(100*(cmpn.Bound.CapacityUsed-pr.CapacityUsed), 2)
	}
	base.Comparison = &cmpn
	return base, nil
}

func policyResult(rep *Report, s *stats) PolicyResult {
	pr := PolicyResult{Policy: rep.Policy, Unavailable: rep.Requests.Unavailable, PerMillion: rep.Cost.PerMillion,
		Earned: rep.Money.Earnings, liveOut: s.liveOut}
	if rep.Requests.Total > 0 {
		pr.Served = round(float64(rep.Requests.Served)/float64(rep.Requests.Total), 4)
	}
	var busy, online float64
	for k := range s.classBusy {
		for h := range s.classBusy[k] {
			busy += s.classBusy[k][h]
			online += s.classOnline[k][h]
		}
	}
	if online > 0 {
		pr.Utilization = round(busy/online, 4)
	}
	var ttft, wait hist
	for t := range 3 {
		ttft.merge(&s.ttft[t])
		wait.merge(&s.queueWait[t])
	}
	pr.TTFTP95, pr.QueueP95 = ttft.quantile(0.95), wait.quantile(0.95)
	return pr
}
