package simulate

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Report is what a run measured. Its JSON is the same for the same inputs and seed: it holds
// no wall time.
type Report struct {
	Seed   uint64    `json:"seed"`
	Policy string    `json:"policy"`
	Start  time.Time `json:"start"`
	Days   float64   `json:"days"`  // the virtual time simulated
	Hours  int       `json:"hours"` // the hourly series' length: Days in hours, rounded up
	Nodes  int       `json:"nodes"`

	Requests Requests      `json:"requests"`
	Latency  []TierLatency `json:"latency"`
	Events   Events        `json:"events"`
	Classes  []ClassReport `json:"classes"`
	NodeList []NodeReport  `json:"nodes_detail,omitempty"`
	Cost     Cost          `json:"cost"`
	Money    Money         `json:"money"`
	Batches  []BatchReport `json:"batches,omitempty"`
	// Comparison is the policies and the offline bound, with --compare-policies.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// Requests counts how live requests ended: each exactly once.
type Requests struct {
	// Arrived is counted as requests arrive; Total as they end (served + failed + timed out).
	Arrived  int64 `json:"arrived"`
	Total    int64 `json:"total"`
	Served   int64 `json:"served"`
	Failed   int64 `json:"failed"`
	TimedOut int64 `json:"timed_out"`
	// Unavailable is the 503s: failed for want of a node, a place in the queue or time in it.
	Unavailable int64            `json:"unavailable_503"`
	Failures    map[string]int64 `json:"failures,omitempty"` // by reason
	ByTier      []TierCount      `json:"by_tier"`
}

// TierCount counts one tier's requests (or batch lines).
type TierCount struct {
	Tier     string `json:"tier"`
	Total    int64  `json:"total"`
	Served   int64  `json:"served"`
	Failed   int64  `json:"failed"`
	TimedOut int64  `json:"timed_out"`
}

// TierLatency is one tier's waits and times to first token, in milliseconds. TTFT counts from
// the end of the wait in the queue, as the coordinator measures it; FirstToken from arrival.
type TierLatency struct {
	Tier         string  `json:"tier"`
	Requests     int64   `json:"requests"`
	QueueWaitP50 float64 `json:"queue_wait_p50_ms"`
	QueueWaitP95 float64 `json:"queue_wait_p95_ms"`
	TTFTP50      float64 `json:"ttft_p50_ms"`
	TTFTP95      float64 `json:"ttft_p95_ms"`
	FirstP50     float64 `json:"first_token_p50_ms"`
	FirstP95     float64 `json:"first_token_p95_ms"`
}

// Events counts what happened to jobs.
type Events struct {
	Preemptions     int64 `json:"preemptions"`
	FailoversBefore int64 `json:"failovers_before_first_token"`
	FailoversMid    int64 `json:"failovers_mid_answer"`
	Drops           int64 `json:"node_drops"`
	IndexRebuilds   int64 `json:"index_rebuilds"`
}

// ClassReport is one GPU class's use and earnings.
type ClassReport struct {
	Name  string `json:"name"`
	GPU   string `json:"gpu"`
	Nodes int    `json:"nodes"`
	// Utilization is busy slot-time ÷ slot-time online; Utilization24 ÷ all slot-time, 24/7.
	Utilization   float64 `json:"utilization"`
	Utilization24 float64 `json:"utilization_24_7"`
	// Hourly is Utilization hour by hour (0 when none was online).
	Hourly []float64 `json:"hourly_utilization"`
	// Fill is busy slot-time ÷ slot-time inside the nodes' windows; FillMin and FillMax the
	// least and most filled node's.
	Fill        float64 `json:"fill"`
	FillMin     float64 `json:"fill_min"`
	FillMax     float64 `json:"fill_max"`
	WindowHours float64 `json:"window_hours_per_node"`
	Tokens      int64   `json:"output_tokens"`
	Earned      string  `json:"earned_usd"`
	PerNode     string  `json:"earned_per_node_usd"`
	// ByAsk is what the class earned by ask schedule window ("flat": the flat ask).
	ByAsk map[string]string `json:"earned_by_ask_usd,omitempty"`

	earned money.Nanos
}

// NodeReport is one node's.
type NodeReport struct {
	ID          string  `json:"id"`
	Class       string  `json:"class"`
	Region      string  `json:"region,omitempty"`
	WindowHours float64 `json:"window_hours"`
	Fill        float64 `json:"fill"`
	Jobs        int64   `json:"jobs"`
	Tokens      int64   `json:"output_tokens"`
	Earned      string  `json:"earned_usd"`

	earned money.Nanos
}

// Cost is what buyers paid, against dedicated GPUs.
type Cost struct {
	ByTier []TierCost `json:"by_tier"`
	// PerMillion is live requests' average, USD per million tokens billed.
	PerMillion float64 `json:"live_per_million_usd"`
	// Dedicated is, for each model's streams, the dedicated 24/7 GPUs sized for the same peak.
	Dedicated []Dedicated `json:"dedicated,omitempty"`
	// SavingPct is 1 − the market's cost ÷ the dedicated GPUs', for the same tokens, in %.
	SavingPct float64 `json:"saving_pct"`
}

// TierCost is one tier's tokens and cost.
type TierCost struct {
	Tier       string  `json:"tier"`
	Tokens     int64   `json:"tokens"`
	Paid       string  `json:"paid_usd"`
	PerMillion float64 `json:"per_million_usd"`
}

// Dedicated is the comparison for one model's streams: enough GPUs of one class, rented
// 24/7, to serve the peak hour's average concurrency of the same requests on them.
type Dedicated struct {
	Model  string `json:"model"`
	Class  string `json:"class"`
	GPUs   int    `json:"gpus"`
	Hourly string `json:"hourly_usd"`
	// PeakConcurrency is the peak hour's average number of requests running at once, on the
	// dedicated class; Utilization the dedicated GPUs' average use of their slots.
	PeakConcurrency float64 `json:"peak_concurrency"`
	Utilization     float64 `json:"utilization"`
	Cost            string  `json:"cost_usd"`
	PerMillion      float64 `json:"per_million_usd"`
	// Market is what the same streams' requests paid in the market, per million tokens.
	Market    float64 `json:"market_per_million_usd"`
	SavingPct float64 `json:"saving_pct"`

	cost, paid money.Nanos
}

// Money is the books: buyers' debits and the continuation subsidy (the platform's) equal
// providers' earnings and the platform's fees, to the nano-dollar.
type Money struct {
	Debits   string `json:"buyer_debits_usd"`
	Earnings string `json:"provider_earnings_usd"`
	Fees     string `json:"platform_fees_usd"`
	Subsidy  string `json:"continuation_subsidy_usd"`
	// Net is the platform's: fees − subsidy.
	Net string `json:"platform_net_usd"`
	// The same in nano-dollars, exact.
	DebitsNanos   money.Nanos `json:"buyer_debits_nanos"`
	EarningsNanos money.Nanos `json:"provider_earnings_nanos"`
	FeesNanos     money.Nanos `json:"platform_fees_nanos"`
	SubsidyNanos  money.Nanos `json:"continuation_subsidy_nanos"`
}

// Balanced reports whether debits + subsidy = earnings + fees exactly.
func (m Money) Balanced() bool {
	return m.DebitsNanos+m.SubsidyNanos == m.EarningsNanos+m.FeesNanos
}

// BatchReport is one batch's lines.
type BatchReport struct {
	Name      string `json:"name"`
	Submitted int    `json:"lines_submitted"`
	Done      int    `json:"done"`
	Expired   int    `json:"expired"`
	Failed    int    `json:"failed"`
	Unstarted int    `json:"unstarted_at_end"`
}

// report builds the report from the merged measures.
func (w *world) report(s *stats) *Report {
	rep := &Report{Seed: w.opts.Seed, Policy: w.opts.Policy.String(), Start: w.start, Days: w.end.Hours() / 24, Hours: w.hours, Nodes: len(w.nodes)}
	dur := w.end.Seconds()

	// Requests.
	rq := &rep.Requests
	rq.Arrived = s.arrived
	rq.Failures = map[string]int64{}
	for row := range numRows {
		c := s.requests[row]
		tc := TierCount{Tier: rowNames[row], Served: c[outServed], Failed: c[outFailed], TimedOut: c[outTimedOut]}
		tc.Total = tc.Served + tc.Failed + tc.TimedOut
		rq.ByTier = append(rq.ByTier, tc)
		if row == rowBatch {
			continue
		}
		rq.Total += tc.Total
		rq.Served += tc.Served
		rq.Failed += tc.Failed
		rq.TimedOut += tc.TimedOut
	}
	for why, n := range s.fails {
		if why != int(failNone) && n > 0 {
			rq.Failures[failNames[why]] = n
			rq.Unavailable += n
		}
	}
	rq.Unavailable -= rq.Failures[failNames[failNoneLeft]]

	for t := range 3 {
		rep.Latency = append(rep.Latency, TierLatency{Tier: rowNames[t], Requests: s.queueWait[t].n,
			QueueWaitP50: s.queueWait[t].quantile(0.5), QueueWaitP95: s.queueWait[t].quantile(0.95),
			TTFTP50: s.ttft[t].quantile(0.5), TTFTP95: s.ttft[t].quantile(0.95),
			FirstP50: s.firstToken[t].quantile(0.5), FirstP95: s.firstToken[t].quantile(0.95)})
	}
	rep.Events = Events{Preemptions: s.preemptions, FailoversBefore: s.failoversBefore, FailoversMid: s.failoversMid,
		Drops: s.drops, IndexRebuilds: s.rebuilds}

	// Classes and nodes.
	byClass := make([][]*NodeReport, len(w.classes))
	for _, n := range w.nodes {
		k := n.class
		slots := float64(len(k.Models) * k.slots)
		window := k.windows.Overlap(w.start, w.start.Add(w.end)).Seconds()
		nr := &NodeReport{ID: n.id, Class: k.Name, Region: n.region, WindowHours: round(window/3600, 2),
			Jobs: s.nodeJobs[n.index], Tokens: s.nodeTokens[n.index], earned: s.nodeEarned[n.index]}
		nr.Earned = nr.earned.String()
		if window > 0 {
			nr.Fill = round(s.nodeBusy[n.index]/(window*slots), 4)
		}
		byClass[k.index] = append(byClass[k.index], nr)
		rep.NodeList = append(rep.NodeList, *nr)
	}
	for _, k := range w.classes {
		nodes := byClass[k.index]
		cr := ClassReport{Name: k.Name, GPU: k.GPU, Nodes: len(nodes), Hourly: make([]float64, w.hours), ByAsk: map[string]string{}}
		var busy, online float64
		for h := range w.hours {
			b, on := s.classBusy[k.index][h], s.classOnline[k.index][h]
			busy += b
			online += on
			if on > 0 {
				cr.Hourly[h] = round(b/on, 4)
			}
		}
		slots := float64(len(k.Models)*k.slots) * float64(len(nodes))
		if online > 0 {
			cr.Utilization = round(busy/online, 4)
		}
		if slots > 0 {
			cr.Utilization24 = round(busy/(slots*dur), 4)
		}
		cr.FillMin = math.Inf(1)
		var window float64
		for _, n := range nodes {
			cr.Tokens += n.Tokens
			cr.earned += n.earned
			window += n.WindowHours
			cr.FillMin = min(cr.FillMin, n.Fill)
			cr.FillMax = max(cr.FillMax, n.Fill)
		}
		if len(nodes) == 0 {
			cr.FillMin = 0
		} else {
			cr.WindowHours = round(window/float64(len(nodes)), 2)
			cr.PerNode = (cr.earned / money.Nanos(len(nodes))).String()
		}
		if window > 0 {
			cr.Fill = round(busy/(window*3600*float64(len(k.Models)*k.slots)), 4)
		}
		cr.Earned = cr.earned.String()
		for name, v := range s.windowEarned[k.index] {
			if name == "" {
				name = "flat"
			}
			cr.ByAsk[name] = v.String()
		}
		rep.Classes = append(rep.Classes, cr)
	}

	// Cost.
	var liveTokens int64
	var livePaid money.Nanos
	for row := range numRows {
		tc := TierCost{Tier: rowNames[row], Tokens: s.tokens[row], Paid: s.debits[row].String(), PerMillion: perMillion(s.debits[row], s.tokens[row])}
		rep.Cost.ByTier = append(rep.Cost.ByTier, tc)
		if row != rowBatch {
			liveTokens += s.tokens[row]
			livePaid += s.debits[row]
		}
	}
	rep.Cost.PerMillion = perMillion(livePaid, liveTokens)
	rep.Cost.Dedicated, rep.Cost.SavingPct = w.dedicated(s)

	m := Money{DebitsNanos: s.debits[0] + s.debits[1] + s.debits[2] + s.debits[3], EarningsNanos: s.earned, FeesNanos: s.fees, SubsidyNanos: s.subsidy}
	m.Debits, m.Earnings, m.Fees, m.Subsidy = m.DebitsNanos.String(), m.EarningsNanos.String(), m.FeesNanos.String(), m.SubsidyNanos.String()
	m.Net = (m.FeesNanos - m.SubsidyNanos).String()
	rep.Money = m

	for _, b := range w.batches {
		bs := s.batches[b.index]
		rep.Batches = append(rep.Batches, BatchReport{Name: b.Name, Submitted: bs.submitted, Done: bs.done, Expired: bs.expired, Failed: bs.failed, Unstarted: bs.unstarted})
	}
	return rep
}

// dedicated sizes, for each model and dedicated class, the GPUs that serve the same streams'
// requests at their peak hour, and compares what they cost over the run with what the
// market charged for the same streams' tokens.
func (w *world) dedicated(s *stats) ([]Dedicated, float64) {
	type key struct{ model, class string }
	groups := map[key][]*stream{}
	var keys []key
	for _, st := range w.streams {
		if st.dedicatedClass == nil {
			continue
		}
		k := key{st.Model, st.dedicatedClass.Name}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], st)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.class, b.class)) })
	dur := w.end.Seconds()
	var out []Dedicated
	var cost, paid money.Nanos
	for _, k := range keys {
		sts := groups[k]
		kc := sts[0].dedicatedClass
		var peak, total float64
		var tokens int64
		d := Dedicated{Model: k.model, Class: k.class, Hourly: kc.hourly.String()}
		for h := range w.hours {
			var busy float64
			for _, st := range sts {
				busy += s.dedicated[st.index][h]
			}
			total += busy
			span := min(time.Hour, w.end-time.Duration(h)*time.Hour).Seconds()
			peak = max(peak, busy/span)
		}
		for _, st := range sts {
			tokens += s.streamTokens[st.index]
			d.paid += s.streamDebits[st.index]
		}
		if total == 0 {
			continue
		}
		d.GPUs = max(int(math.Ceil(peak/float64(kc.MaxConcurrent)-1e-9)), 1)
		d.PeakConcurrency = round(peak, 3)
		d.Utilization = round(total/(float64(d.GPUs*kc.MaxConcurrent)*dur), 4)
		d.cost = money.Nanos(math.Round(float64(kc.hourly) * float64(d.GPUs) * dur / 3600))
		d.Cost = d.cost.String()
		d.PerMillion = perMillion(d.cost, tokens)
		d.Market = perMillion(d.paid, tokens)
		if d.cost > 0 {
			d.SavingPct = round(100*(1-float64(d.paid)/float64(d.cost)), 2)
		}
		cost += d.cost
		paid += d.paid
		out = append(out, d)
	}
	saving := 0.0
	if cost > 0 {
		saving = round(100*(1-float64(paid)/float64(cost)), 2)
	}
	return out, saving
}

func perMillion(paid money.Nanos, tokens int64) float64 {
	if tokens == 0 {
		return 0
	}
	return round(float64(paid)/float64(money.USD)/float64(tokens)*1e6, 6)
}

// round rounds x to d decimals, for readable reports.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}
