package simulate

import (
	"math/bits"
	"time"

	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
)

// outcome is how a request ended: every request ends in exactly one.
type outcome uint8

const (
	outServed   outcome = iota // its answer delivered whole
	outFailed                  // no node could take it, or finish it
	outTimedOut                // it waited in the queue past the deadline (a batch line: past its window)
	numOutcomes
)

// failWhy is why a request failed.
type failWhy uint8

const (
	failNone      failWhy = iota
	failNoNode            // no node may take it, and waiting would not help (or no node serves its model)
	failQueueFull         // every node busy and the queue full
	failTimeout           // waited past the queue's deadline
	failNoneLeft          // nodes kept failing it (the core's retry bounds)
	numFails
)

var failNames = [numFails]string{failNone: "", failNoNode: "no_node", failQueueFull: "queue_full", failTimeout: "timeout", failNoneLeft: "none_left"}

// rows of the money and request tables: the tiers, gold first, then batch lines.
const (
	rowBatch = 3
	numRows  = 4
)

var rowNames = [numRows]string{"gold", "silver", "bronze", "batch"}

// stats is what one partition measures; partitions' stats add up (merge).
type stats struct {
	hours  int
	end    time.Duration // the run's end: busy time past it is not counted, as online time is not
	weight int64         // each request counts this many times (Options.Weight)

	classBusy, classOnline [][]float64 // class × hour: slot-seconds busy, and online
	nodeBusy, nodeOnline   []float64   // by node: slot-seconds
	nodeEarned             []money.Nanos
	nodeTokens, nodeJobs   []int64
	windowEarned           []map[string]money.Nanos // by class: ask window ("" flat) → earned

	arrived  int64 // live requests that arrived
	requests [numRows][numOutcomes]int64
	fails    [numFails]int64
	tokens   [numRows]int64 // billed, prompt and completion
	debits   [numRows]money.Nanos
	fees     money.Nanos
	subsidy  money.Nanos
	earned   money.Nanos

	queueWait, ttft, firstToken [3]hist // live requests, by tier

	preemptions, failoversBefore, failoversMid, drops, rebuilds int64

	streamTokens []int64       // by stream: billed tokens
	streamDebits []money.Nanos // by stream: what its buyers paid

	liveOut   int64             // output tokens delivered to live requests
	dedicated [][]float64       // stream × hour: slot-seconds the stream needs on its dedicated class
	demand    [][][3][2]float64 // model × hour × tier: prompt and answer tokens asked (live)

	batches []batchStats
}

type batchStats struct {
	submitted, done, expired, failed int
	unstarted                        int // lines not started when the run ended
}

func newStats(w *world) *stats {
	h := w.hours
	s := &stats{hours: h, end: w.end, weight: int64(w.opts.Weight),
		nodeBusy: make([]float64, len(w.nodes)), nodeOnline: make([]float64, len(w.nodes)),
		nodeEarned: make([]money.Nanos, len(w.nodes)), nodeTokens: make([]int64, len(w.nodes)), nodeJobs: make([]int64, len(w.nodes)),
		batches:      make([]batchStats, len(w.batches)),
		streamTokens: make([]int64, len(w.streams)), streamDebits: make([]money.Nanos, len(w.streams)),
	}
	for range w.classes {
		s.classBusy = append(s.classBusy, make([]float64, h))
		s.classOnline = append(s.classOnline, make([]float64, h))
		s.windowEarned = append(s.windowEarned, map[string]money.Nanos{})
	}
	for range w.streams {
		s.dedicated = append(s.dedicated, make([]float64, h))
	}
	for range w.models {
		s.demand = append(s.demand, make([][3][2]float64, h))
	}
	return s
}

func (s *stats) batch(b *batch) *batchStats { return &s.batches[b.index] }

// spread adds v per second of [from, to) to the hourly buckets it covers.
func (s *stats) spread(buckets []float64, from, to time.Duration, v float64) {
	for from < to {
		h := int(from / time.Hour)
		if h >= len(buckets) {
			return
		}
		end := min(to, time.Duration(h+1)*time.Hour)
		buckets[h] += (end - from).Seconds() * v
		from = end
	}
}

// busy counts a job's slot-time up to the run's end. The requests in flight then run on to
// their end, but the nodes' online time stops there: utilization is of the time simulated.
func (s *stats) busy(n *node, from, to time.Duration) {
	to = min(to, s.end)
	if to <= from {
		return
	}
	s.spread(s.classBusy[n.class.index], from, to, 1)
	s.nodeBusy[n.index] += (to - from).Seconds()
}

// online counts a node's online time in this partition, weighted by its slots here.
func (s *stats) online(n *node, from, to time.Duration) {
	slots := float64(len(n.offers) * n.class.slots)
	s.spread(s.classOnline[n.class.index], from, to, slots)
	s.nodeOnline[n.index] += (to - from).Seconds() * slots
}

// request counts a request that ended, and its bill.
func (s *stats) request(p *part, r *request, out outcome, why failWhy, bill *ledger.Bill) {
	row := rowBatch
	if !r.batch {
		row = tierIndex(r.tier)
	}
	wt := s.weight
	s.requests[row][out] += wt
	if !r.batch {
		s.fails[why] += wt
	}
	if bill != nil {
		st := bill.Settlement
		s.debits[row] += st.Debit
		if r.src != nil {
			s.streamTokens[r.src.index] += int64(bill.PromptTokens + bill.CompletionTokens)
			s.streamDebits[r.src.index] += st.Debit
		}
		s.fees += st.Fee
		s.subsidy += st.Subsidy
		s.tokens[row] += int64(bill.PromptTokens + bill.CompletionTokens)
		for _, part := range st.Parts {
			i := p.w.nodeIndex[part.NodeID]
			s.nodeEarned[i] += part.Earned
			s.earned += part.Earned
			s.windowEarned[p.w.nodes[i].class.index][part.AskWindow] += part.Earned
		}
		for _, w := range r.works {
			i := p.w.nodeIndex[w.NodeID]
			s.nodeTokens[i] += int64(w.CompletionTokens)
			s.nodeJobs[i] += wt
		}
	}
	if r.batch {
		return
	}
	s.liveOut += int64(r.delivered) * wt
	t := tierIndex(r.tier)
	s.queueWait[t].add(r.queued, wt)
	if r.started {
		s.ttft[t].add(r.first-r.arrive-r.queuedFirst, wt)
		s.firstToken[t].add(r.first-r.arrive, wt)
	}
}

// arrival counts what a live request asks for, for the comparisons: the slot-time it needs on
// its stream's dedicated class, and its tokens for the offline bound.
func (s *stats) arrival(w *world, st *stream, r *request) {
	s.arrived += s.weight
	wt := float64(s.weight)
	h := int(r.arrive / time.Hour)
	if h >= s.hours {
		return
	}
	if k := st.dedicatedClass; k != nil {
		d := k.TTFT.Seconds() + float64(r.answer)/k.TokensPerSecond
		if k.PrefillTokensPerSecond > 0 {
			d += float64(r.prompt) / k.PrefillTokensPerSecond
		}
		s.dedicated[st.index][h] += d * wt
	}
	if mi, ok := w.modelIndex[r.models[0]]; ok {
		d := &s.demand[mi][h][tierIndex(r.tier)]
		d[0] += float64(r.prompt) * wt
		d[1] += float64(r.answer) * wt
	}
}

// merge adds o into s.
func (s *stats) merge(o *stats) {
	addRows := func(a, b [][]float64) {
		for i := range a {
			for j := range a[i] {
				a[i][j] += b[i][j]
			}
		}
	}
	addRows(s.classBusy, o.classBusy)
	addRows(s.classOnline, o.classOnline)
	addRows(s.dedicated, o.dedicated)
	for i := range s.nodeBusy {
		s.nodeBusy[i] += o.nodeBusy[i]
		s.nodeOnline[i] += o.nodeOnline[i]
		s.nodeEarned[i] += o.nodeEarned[i]
		s.nodeTokens[i] += o.nodeTokens[i]
		s.nodeJobs[i] += o.nodeJobs[i]
	}
	for i, m := range o.windowEarned {
		for k, v := range m {
			s.windowEarned[i][k] += v
		}
	}
	for i := range s.requests {
		for j := range s.requests[i] {
			s.requests[i][j] += o.requests[i][j]
		}
		s.tokens[i] += o.tokens[i]
		s.debits[i] += o.debits[i]
	}
	for i := range s.streamTokens {
		s.streamTokens[i] += o.streamTokens[i]
		s.streamDebits[i] += o.streamDebits[i]
	}
	for i := range s.fails {
		s.fails[i] += o.fails[i]
	}
	s.arrived += o.arrived
	s.fees += o.fees
	s.subsidy += o.subsidy
	s.earned += o.earned
	for i := range s.queueWait {
		s.queueWait[i].merge(&o.queueWait[i])
		s.ttft[i].merge(&o.ttft[i])
		s.firstToken[i].merge(&o.firstToken[i])
	}
	s.preemptions += o.preemptions
	s.failoversBefore += o.failoversBefore
	s.failoversMid += o.failoversMid
	s.drops += o.drops
	s.rebuilds += o.rebuilds
	s.liveOut += o.liveOut
	for i := range s.demand {
		for h := range s.demand[i] {
			for t := range s.demand[i][h] {
				s.demand[i][h][t][0] += o.demand[i][h][t][0]
				s.demand[i][h][t][1] += o.demand[i][h][t][1]
			}
		}
	}
	for i := range s.batches {
		b, ob := &s.batches[i], &o.batches[i]
		b.submitted += ob.submitted
		b.done += ob.done
		b.expired += ob.expired
		b.failed += ob.failed
		b.unstarted += ob.unstarted
	}
}

// hist counts durations in buckets of a millisecond up to 65.536 s, then of powers of two:
// exact percentiles to the millisecond for latencies, coarse ones for long waits.
type hist struct {
	n       int64
	sum     time.Duration
	buckets []int64
}

const linearMS = 1 << 16

func (h *hist) add(d time.Duration, n int64) {
	if h.buckets == nil {
		h.buckets = make([]int64, linearMS+64)
	}
	ms := max(d.Milliseconds(), 0)
	i := int(ms)
	if ms >= linearMS {
		i = linearMS + bits.Len64(uint64(ms>>16))
	}
	h.buckets[i] += n
	h.n += n
	h.sum += d * time.Duration(n)
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.buckets == nil {
		h.buckets = make([]int64, len(o.buckets))
	}
	for i, v := range o.buckets {
		h.buckets[i] += v
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile in milliseconds: the upper edge of the bucket that holds it.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1
	var acc int64
	for i, v := range h.buckets {
		acc += v
		if acc >= rank {
			if i < linearMS {
				return float64(i)
			}
			return float64(uint64(1) << (i - linearMS) << 16)
		}
	}
	return 0
}

func (h *hist) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum.Milliseconds()) / float64(h.n)
}
