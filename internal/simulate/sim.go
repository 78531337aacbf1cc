// Package simulate runs the market in virtual time: a discrete-event simulation of buyers'
// requests and batches over a fleet of GPU nodes, driving the coordinator's own decision and
// money code — the matcher (matcher.Index, Match, Ranking.Pick, Fit), the admission queue
// (queue.Queue, with the core's handoff and preemption rules), the service tiers (tier.Slots,
// the multipliers), the prices (pricing.Asks for ask schedules, pricing.Surge), the ledger's
// billing (ledger.Ledger.Price: the fee, the rounding, the continuation subsidy), the
// providers' availability windows (schedule) — and measuring what the market's claims rest on:
// utilization, fill rate, queue waits, time to first token, failures, buyers' cost against
// dedicated GPUs, providers' earnings, the platform's fees.
//
// Time is virtual: a calendar of events (a heap), no goroutine per request and no clock. A run
// is deterministic for a seed. Models that no request's fallbacks join are independent
// markets (each offer has its own slots, as in the fleet), so they run as partitions, in
// parallel, each with its own calendar and random streams, and their measures add up.
//
// What is simplified is written where it is: a node's speed is fixed per class (no
// contention between its slots), reliability is the class's (not learned from the run),
// holds are not placed (buyers' balances are unlimited), and the candidate snapshot is built
// again when nodes come online or go offline or a price moves, not every 250 ms; its slot
// counts are read live, as the matcher reads them from a candidate's Slot.
//
// It must not import the live network: fleet, core, gateway, relay, the store's drivers, or
// anything that opens a connection.
package simulate

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/tier"
)

// Options are a run's settings besides its fleet and demand.
type Options struct {
	Seed uint64
	// Duration is the virtual time simulated; 0: a week.
	Duration time.Duration
	// Scale multiplies every class's count, every stream's rate and every batch's lines; 0: 1.
	Scale int
	// Policy picks requests' nodes: the coordinator's auction by default.
	Policy Policy
	// Workers is how many partitions run at once; 0: GOMAXPROCS.
	Workers int
	// Weight makes each simulated request stand for Weight like requests, for fleets too
	// large to simulate request by request: the streams' rates and the batches' lines are
	// divided by it, and so is each class's max_concurrent (which it must divide: a
	// simulated slot stands for Weight slots); every request, token, amount, preemption and
	// failover counts Weight times. Utilization, fill and money keep their expectations;
	// queueing is coarser (Weight requests arrive as one). 0: 1, request by request.
	Weight int
	// Progress, if set, gets a line as each partition ends a virtual day, once the run has
	// taken progressAfter of wall time: a week at 100,000 nodes takes an hour or more.
	Progress io.Writer
}

// progressAfter is how long a run goes before it reports its progress.
var progressAfter = 10 * time.Second

// progress writes the partitions' days to Options.Progress.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	days  int
}

// day reports that partition p has simulated its day-th virtual day.
func (pr *progress) day(p *part, day int) {
	if pr == nil {
		return
	}
	wall := time.Since(pr.start)
	if wall < progressAfter {
		return
	}
	names := make([]string, len(p.list))
	for i, m := range p.list {
		names[i] = m.name
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	fmt.Fprintf(pr.w, "simulate: day %d of %d done for %s after %s\n", day, pr.days, strings.Join(names, ", "), wall.Round(time.Second))
}

// world is what a run does not change, shared by its partitions.
type world struct {
	ctx        context.Context // a run stops early once it is done
	progress   *progress       // nil: Options.Progress is not set
	opts       Options
	start      time.Time
	end        time.Duration
	hours      int
	mkt        market
	qcfg       queue.Config
	classes    []*class
	nodes      []*nodeInfo
	nodeIndex  map[string]int32
	streams    []*stream
	batches    []*batch
	models     []string // every model offered or asked for, sorted
	modelIndex map[string]int
}

// part is one partition: the models that requests' fallbacks join, with their own calendar.
type part struct {
	w        *world
	now      time.Duration
	cal      calendar
	rng      *rand.Rand // the matcher's and the policies'
	models   map[string]*model
	list     []*model
	byIndex  map[int]*model
	nodes    []*node
	streams  []*stream
	batches  []*batch
	q        *queue.Queue[*offer, *matcher.Candidate]
	led      *ledger.Ledger
	st       *stats
	handed   *request // the waiter the queue's last Hand gave a slot to
	noIdle   bool     // a batch line found no idle slot
	nextID   int64
	inflight int  // requests started and not ended
	closed   bool // online time counted up to the end

	streamRNG map[int]*rand.Rand
	streamKey map[int][]string
	batchRNG  map[int]*rand.Rand
}

func (p *part) clock() time.Time { return p.w.start.Add(p.now) }

func (p *part) at(t time.Duration, e event) {
	e.at = t
	p.cal.push(e)
}

// newWorld compiles the inputs.
func newWorld(ctx context.Context, f *Fleet, d *Demand, o Options) (*world, error) {
	if o.Duration <= 0 {
		o.Duration = 7 * 24 * time.Hour
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Weight <= 0 {
		o.Weight = 1
	}
	w := &world{ctx: ctx, opts: o, start: f.Start, end: o.Duration, nodeIndex: map[string]int32{}, modelIndex: map[string]int{}}
	if o.Progress != nil {
		w.progress = &progress{w: o.Progress, start: time.Now(), days: int(o.Duration / (24 * time.Hour))}
	}
	if w.start.IsZero() {
		w.start = DefaultStart
	}
	w.hours = int((o.Duration + time.Hour - 1) / time.Hour)
	var err error
	if w.mkt, err = f.Market.compile(); err != nil {
		return nil, err
	}
	w.qcfg = queue.New[int, int](queue.Config{Timeout: w.mkt.queue.timeout, Length: w.mkt.queue.length, PerKey: w.mkt.queue.keys}).Config()
	w.mkt.queue.timeout = w.qcfg.Timeout
	models := map[string]bool{}
	names := map[string]bool{}
	for i, c := range f.Classes {
		k, err := c.compile(i)
		if err != nil {
			return nil, err
		}
		if names[k.Name] {
			return nil, fmt.Errorf("classes[%d]: the name %q is taken", i, k.Name)
		}
		names[k.Name] = true
		if k.MaxConcurrent%o.Weight != 0 {
			return nil, fmt.Errorf("classes[%d] (%s): max_concurrent %d is not a multiple of the weight %d", i, k.Name, k.MaxConcurrent, o.Weight)
		}
		k.slots = k.MaxConcurrent / o.Weight
		k.gold = int(math.Round(float64(k.gold) / float64(o.Weight)))
		w.classes = append(w.classes, k)
		for _, m := range k.Models {
			models[m] = true
		}
	}
	for i, s := range d.Streams {
		st, err := s.compile(i)
		if err != nil {
			return nil, err
		}
		st.Rate *= float64(o.Scale) / float64(o.Weight)
		st.peak *= float64(o.Scale) / float64(o.Weight)
		for _, m := range st.models {
			models[m] = true
		}
		w.streams = append(w.streams, st)
	}
	for i, b := range d.Batches {
		k, err := b.compile(i)
		if err != nil {
			return nil, err
		}
		k.Lines = (k.Lines*o.Scale + o.Weight - 1) / o.Weight
		models[k.Model] = true
		w.batches = append(w.batches, k)
	}
	w.models = sortedKeys(models)
	for i, m := range w.models {
		w.modelIndex[m] = i
	}
	if err := w.pickDedicated(); err != nil {
		return nil, err
	}
	w.buildNodes()
	return w, nil
}

// buildNodes makes each class's nodes: ids, regions, ask spreads and drop seeds, drawn from
// the seed.
func (w *world) buildNodes() {
	for _, k := range w.classes {
		rng := rand.New(rand.NewPCG(w.opts.Seed, mix("class", k.Name)))
		n := k.Count * w.opts.Scale
		for i := range n {
			id := k.Name + "-" + strconv.Itoa(i+1)
			info := &nodeInfo{index: int32(len(w.nodes)), id: id, provider: k.Provider, class: k, spread: 10000, seed: rng.Uint64()}
			if k.Provider == k.Name && n > 1 {
				info.provider = id // each node its own provider's, unless the class names one
			}
			u := rng.Float64()
			for j, c := range k.regionCDF {
				if u <= c || j == len(k.regionCDF)-1 {
					info.region = matcher.Country(k.regions[j])
					break
				}
			}
			if k.AskSpread > 0 {
				info.spread = int64(math.Round(10000 * (1 + k.AskSpread*(2*rng.Float64()-1))))
			}
			w.nodeIndex[id] = info.index
			w.nodes = append(w.nodes, info)
		}
	}
}

// pickDedicated chooses each stream's dedicated class: the one it names, or the class serving
// its model with the lowest hourly price per token of capacity.
func (w *world) pickDedicated() error {
	for _, st := range w.streams {
		if st.Dedicated != "" {
			for _, k := range w.classes {
				if k.Name == st.Dedicated {
					st.dedicatedClass = k
				}
			}
			if st.dedicatedClass == nil {
				return fmt.Errorf("streams[%d] (%s): dedicated: no class %q", st.index, st.Name, st.Dedicated)
			}
			continue
		}
		best := math.Inf(1)
		for _, k := range w.classes {
			if k.hourly <= 0 || !slices.Contains(k.Models, st.Model) {
				continue
			}
			if c := float64(k.hourly) / (float64(k.MaxConcurrent) * k.TokensPerSecond); c < best {
				best, st.dedicatedClass = c, k
			}
		}
	}
	return nil
}

// mix hashes a name into a seed's stream number.
func mix(kind, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return h.Sum64()
}

// partitions groups the models that requests' fallbacks join (union-find).
func (w *world) partitions() [][]string {
	parent := make([]int, len(w.models))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, st := range w.streams {
		a := find(w.modelIndex[st.models[0]])
		for _, m := range st.models[1:] {
			parent[find(w.modelIndex[m])] = a
		}
	}
	groups := map[int][]string{}
	for i, m := range w.models {
		r := find(i)
		groups[r] = append(groups[r], m)
	}
	var out [][]string
	for _, g := range groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// newPart sets a partition up at time 0.
func (w *world) newPart(models []string) *part {
	key := models[0]
	p := &part{w: w, rng: rand.New(rand.NewPCG(w.opts.Seed, mix("part", key))), models: map[string]*model{}, byIndex: map[int]*model{},
		streamRNG: map[int]*rand.Rand{}, streamKey: map[int][]string{}, batchRNG: map[int]*rand.Rand{}}
	p.q = queue.New[*offer, *matcher.Candidate](w.qcfg)
	p.led = ledger.New(ledger.Config{FeeBasisPoints: w.mkt.feeBP, Now: p.clock, Log: slog.New(slog.DiscardHandler)})
	p.st = newStats(w)
	for _, name := range models {
		m := &model{index: w.modelIndex[name], name: name, surge: w.mkt.surge.Start()}
		if w.mkt.surge.Enabled {
			m.surger = pricing.NewSurge(w.mkt.surge)
		}
		p.models[name] = m
		p.byIndex[m.index] = m
		p.list = append(p.list, m)
	}
	for _, info := range w.nodes {
		var n *node
		for _, name := range info.class.Models {
			m := p.models[name]
			if m == nil {
				continue
			}
			if n == nil {
				n = &node{nodeInfo: info, rng: rand.New(rand.NewPCG(info.seed, 1))}
				p.nodes = append(p.nodes, n)
			}
			o := &offer{node: n, model: m, ci: len(m.offers), in: info.class.in, out: info.class.out, asks: info.class.asks}
			n.offers = append(n.offers, o)
			m.offers = append(m.offers, o)
		}
	}
	for _, st := range w.streams {
		if p.models[st.models[0]] == nil {
			continue
		}
		p.streams = append(p.streams, st)
		p.streamRNG[st.index] = rand.New(rand.NewPCG(w.opts.Seed, mix("stream", st.Name)))
		keys := make([]string, st.keys)
		for i := range keys {
			keys[i] = st.Name + "/" + strconv.Itoa(i)
		}
		p.streamKey[st.index] = keys
	}
	for _, b := range w.batches {
		if p.models[b.Model] == nil {
			continue
		}
		p.batches = append(p.batches, b)
		p.batchRNG[b.index] = rand.New(rand.NewPCG(w.opts.Seed, mix("batch", b.Name)))
	}
	for _, m := range p.list {
		m.cands = make([]matcher.Candidate, len(m.offers))
	}
	// Time 0: nodes in their windows are online; then the calendar's first events.
	t := p.clock()
	for _, n := range p.nodes {
		if n.class.windows.Open(t) {
			n.open = true
			n.since = 0
			for _, o := range n.offers {
				o.model.onlineSlots += n.class.slots
			}
			p.scheduleDrop(n)
		}
		p.nextWindow(n)
	}
	for _, st := range p.streams {
		p.nextArrival(st)
	}
	for _, b := range p.batches {
		if b.at.Open(t) {
			p.at(0, event{kind: evBatchSubmit, x: int32(b.index)})
		} else {
			p.nextSubmit(b)
		}
	}
	if w.mkt.surge.Enabled {
		for _, m := range p.list {
			p.at(surgeInterval, event{kind: evSurge, x: int32(m.index)})
		}
	}
	return p
}

// surgeInterval is how often the fleet samples a model's utilization for surge
// (fleet.DefaultSurgeInterval).
const surgeInterval = 15 * time.Second

// run runs the partition's calendar to the end, then lets the requests in flight end.
func (p *part) run() {
	end := p.w.end
	day := 24 * time.Hour // the end of the virtual day being simulated
	for n := 1; p.cal.len() > 0; n++ {
		if n%(1<<14) == 0 && p.w.ctx.Err() != nil {
			return // world.run reports it
		}
		e := p.cal.pop()
		if e.at >= end && p.inflight == 0 {
			break
		}
		if e.at > p.now {
			if p.now < end && e.at >= end {
				p.closeOnline(end)
			}
			p.now = e.at
			for p.now >= day && day <= end {
				p.w.progress.day(p, int(day/(24*time.Hour)))
				day += 24 * time.Hour
			}
		}
		ended := p.now >= end
		switch e.kind {
		case evArrival:
			if !ended {
				p.arrival(p.w.streams[e.x])
			}
		case evJobEnd:
			p.jobEnd(e.job())
		case evPreempted:
			p.cut(e.job(), cutPreempted)
		case evDrop:
			if n := e.node(); e.gen == n.gen {
				p.drop(n)
			}
		case evReconnect:
			p.reconnect(e.node())
		case evWindow:
			p.window(e.node())
		case evDrained:
			if n := e.node(); e.gen == n.gen {
				p.drained(n)
			}
		case evQueueTimeout:
			p.timeout(e.request(), e.gen)
		case evRedispatch:
			p.dispatch(e.request())
		case evSurge:
			if !ended {
				p.sampleSurge(p.byIndex[int(e.x)])
			}
		case evBatchSubmit:
			if !ended {
				p.submit(p.w.batches[e.x])
			}
		case evBatchPoll:
			m := p.byIndex[int(e.x)]
			m.polling = false
			if !ended {
				p.tryBatches(m)
			}
		case evBatchExpire:
			p.expire(e.batchRun())
		}
	}
	if p.now < end {
		p.now = end
		p.closeOnline(end)
	}
	for _, m := range p.list {
		for _, run := range m.runs {
			p.st.batch(run.b).unstarted += run.pending * int(p.st.weight)
		}
	}
}

// closeOnline counts the online time of the nodes online at the end.
func (p *part) closeOnline(end time.Duration) {
	if p.closed {
		return
	}
	p.closed = true
	for _, n := range p.nodes {
		if n.online() {
			p.st.online(n, n.since, end)
		}
	}
}

// sampleSurge samples a model's utilization into its surge, as the fleet's SampleSurge: slots
// running ÷ slots of its nodes that take jobs now. A new multiplier changes the asks.
func (p *part) sampleSurge(m *model) {
	if m.onlineSlots > 0 {
		if bp := m.surger.Observe(float64(m.onlineRunning)/float64(m.onlineSlots), surgeInterval); bp != m.surge {
			m.surge = bp
			m.stale = true
		}
	}
	p.at(p.now+surgeInterval, event{kind: evSurge, x: int32(m.index)})
}

// nextArrival schedules the stream's next candidate arrival, at its peak rate (thinning).
func (p *part) nextArrival(st *stream) {
	if st.peak <= 0 {
		return
	}
	wait := time.Duration(p.streamRNG[st.index].ExpFloat64() / st.peak * float64(time.Second))
	if t := p.now + wait; t < p.w.end {
		p.at(t, event{kind: evArrival, x: int32(st.index)})
	}
}

// arrival is a candidate arrival of the stream: a request with probability rate(now) ÷ peak.
func (p *part) arrival(st *stream) {
	rng := p.streamRNG[st.index]
	p.nextArrival(st)
	if rng.Float64()*st.peak >= st.rateAt(p.clock()) {
		return
	}
	u := rng.Float64()
	t := tier.Gold
	switch {
	case u >= st.tiers[1]:
		t = tier.Bronze
	case u >= st.tiers[0]:
		t = tier.Silver
	}
	keys := p.streamKey[st.index]
	p.nextID++
	r := &request{id: p.nextID, src: st, key: keys[rng.IntN(len(keys))], tier: t, prefs: st.prefs, models: st.models,
		arrive: p.now, prompt: length(rng, st.PromptTokens), answer: length(rng, st.AnswerTokens)}
	p.st.arrival(p.w, st, r)
	p.inflight++
	p.dispatch(r)
}

// rateAt is the stream's rate at t, requests per second.
func (st *stream) rateAt(t time.Time) float64 {
	lt := t.In(st.loc)
	h := float64(lt.Hour()) + float64(lt.Minute())/60 + float64(lt.Second())/3600
	i := int(h)
	daily := st.daily[i] + (st.daily[i+1]-st.daily[i])*(h-float64(i))
	rate := st.Rate * daily * st.weekly[(int(lt.Weekday())+6)%7]
	for _, b := range st.bursts {
		if b.open.Open(t) {
			rate *= b.factor
		}
	}
	return rate
}

// length draws a token count.
func length(rng *rand.Rand, l Length) int {
	x := l.Mean
	if l.CV > 0 {
		s2 := math.Log(1 + l.CV*l.CV)
		x = math.Exp(math.Log(l.Mean) - s2/2 + math.Sqrt(s2)*rng.NormFloat64())
	}
	n := max(int(math.Round(x)), 1)
	if l.Max > 0 {
		n = min(n, l.Max)
	}
	return n
}

// Run simulates the fleet under the demand and reports what it measured. It stops early,
// with ctx's error, once ctx is done.
func Run(ctx context.Context, f *Fleet, d *Demand, o Options) (*Report, error) {
	w, err := newWorld(ctx, f, d, o)
	if err != nil {
		return nil, err
	}
	st, err := w.run()
	if err != nil {
		return nil, err
	}
	return w.report(st), nil
}

// run runs every partition, Workers at once, and adds up their measures in a fixed order.
func (w *world) run() (*stats, error) {
	groups := w.partitions()
	parts := make([]*stats, len(groups))
	workers := w.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, g := range groups {
		sem <- struct{}{}
		if w.ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			p := w.newPart(g)
			p.run()
			parts[i] = p.st
		})
	}
	wg.Wait()
	if err := w.ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulation stopped: %w", err)
	}
	total := newStats(w)
	for _, s := range parts {
		total.merge(s)
	}
	return total, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
