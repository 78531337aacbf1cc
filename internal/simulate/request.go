package simulate

import (
	"errors"
	"strconv"
	"time"

	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/tier"
)

// A request goes as a request goes through the core (internal/core's serve, dispatch, wait):
// it is matched on the first of its models that has a node with a free slot; when every node
// that fits it is busy (or paused for now) it waits in the queue, which hands it a slot as one
// frees, and a gold request that waits may preempt a bronze job; a job that fails before its
// first token is tried again on another node, one cut mid-answer is continued by a node that
// can continue answers, from where it stopped; what was delivered is billed by the ledger.
// The bounds on retries are the core's.
const (
	maxFruitless = 6  // jobs in a row that may fail without adding to the answer (core)
	maxJobs      = 64 // jobs a request may take in all (core)
)

// request is one buyer request, or one batch line's, and its state from job to job.
type request struct {
	id     int64
	src    *stream   // nil: a batch line
	run    *batchRun // a batch line's batch
	key    string    // whom the queue's per-key bound counts it against
	tier   tier.Tier
	batch  bool
	prefs  matcher.Prefs
	models []string // to try, in order; the first is the one that serves once one did

	arrive         time.Duration
	prompt, answer int // tokens
	delivered      int // tokens of the answer delivered so far
	works          []ledger.Work

	avoid      map[string]bool // nodes not to use (the core's r.avoid), once needed
	last       string          // the node of the last job, while avoid is nil
	jobs       int
	fruitless  int
	continuing bool // the answer started: only nodes that continue answers may take it
	started    bool // the first token reached the buyer

	queued, queuedFirst time.Duration // time waiting in the queue: in all, and before the first token
	waitFrom            time.Duration
	ticket              *queue.Ticket[*offer, *matcher.Candidate]
	tgen                uint32 // of its queue deadline
	first               time.Duration
	job                 *job
}

// job is one node's part of an answer.
type job struct {
	r            *request
	o            *offer
	start, first time.Duration // when it took the slot, and its first token
	end          time.Duration
	read, tokens int // prompt tokens it reads (the partial answer too, for a continuation), and the tokens it is to generate
	ask          ledger.Ask
	window       string
	surge        int64
	done         bool
	preempted    bool
	listed       bool // in its model's bronze or batch list
}

func (r *request) canRetry() bool { return r.fruitless < maxFruitless && r.jobs < maxJobs }

// excluded is the matcher's Excluded: the nodes the request avoids. A request keeps the one
// node it tried in last until it tries a second, to spare a map per request.
func (r *request) excluded() map[string]bool {
	if r.avoid == nil && r.last != "" {
		r.avoid = map[string]bool{r.last: true}
	}
	return r.avoid
}

// multiplier is the request's price multiplier on a node's ask, in basis points: the batch
// price for a batch line, else its tier's (the core's multiplier).
func (p *part) multiplier(r *request) int64 {
	if r.batch {
		return p.w.mkt.batchPrice
	}
	return p.w.mkt.tiers.Of(r.tier)
}

// matchRequest is what the matcher decides the request's node on, for one of its models (the
// core's matchRequest).
func (p *part) matchRequest(r *request, m *model) matcher.Request {
	return matcher.Request{Model: m.name, Prefs: r.prefs, Excluded: r.excluded(), Rand: p.rng,
		Continuation: r.continuing, Tier: r.tier, Multiplier: p.multiplier(r), Batch: r.batch}
}

// errNoCapacity is a batch line's first job finding no idle slot: it never waits (core's
// ErrNoCapacity); the runner tries again.
var errNoCapacity = errors.New("no idle slot for a batch line")

// dispatch finds the request a node, or a place in the queue, or fails it.
func (p *part) dispatch(r *request) {
	if !r.canRetry() {
		p.fail(r, failNoneLeft)
		return
	}
	o, c, w, err := p.pick(r)
	switch {
	case o != nil:
		p.start(r, o, c)
	case w != nil:
		p.wait(r, w)
	case errors.Is(err, errNoCapacity):
		p.lineWaits(r)
	default:
		p.fail(r, failNoNode)
	}
}

// waitOn is where a request is to wait: the first of its models whose nodes are only busy.
type waitOn struct {
	m    *model
	mreq matcher.Request
}

// pick takes a slot on the best node of the first of the request's models that has one free
// (the core's pick and scan). When every node that fits is busy it returns where to wait;
// otherwise the error of the last model tried.
func (p *part) pick(r *request) (*offer, matcher.Candidate, *waitOn, error) {
	if r.batch && r.jobs == 0 && p.liveWaiting(r) {
		return nil, matcher.Candidate{}, nil, errNoCapacity
	}
	var (
		w    *waitOn
		wi   int
		last error
	)
	for i, name := range r.models {
		m := p.models[name]
		if m == nil {
			last = &matcher.NoProvider{Model: name}
			if r.continuing {
				break
			}
			continue
		}
		mreq := p.matchRequest(r, m)
		c, err := p.decide(m, mreq)
		if err == nil {
			r.models = r.models[i:]
			return c.Slot.(*offer), c, nil, nil
		}
		last = err
		if w == nil && waitable(err) {
			w, wi = &waitOn{m, mreq}, i
		}
		if r.continuing {
			break
		}
	}
	if w != nil {
		if r.batch && r.jobs == 0 {
			return nil, matcher.Candidate{}, nil, errNoCapacity // a batch line's first job never waits
		}
		r.models = r.models[wi:]
		return nil, matcher.Candidate{}, w, nil
	}
	return nil, matcher.Candidate{}, nil, last
}

// waitable says whether waiting may get the request a node: some node that fits it is only
// busy, paused for now or not verified yet (the core's waitable).
func waitable(err error) bool {
	np, ok := errors.AsType[*matcher.NoProvider](err)
	return ok && np.Serving > 0 && np.Reasons[matcher.ReasonBusy]+np.Reasons[matcher.ReasonPaused]+np.Reasons[matcher.ReasonUnverified] > 0
}

// liveWaiting says whether a live request waits for one of the batch line's models: its first
// job gives way (the core's liveWaiting).
func (p *part) liveWaiting(r *request) bool {
	if p.q.Empty() {
		return false
	}
	for _, m := range r.models {
		if p.q.Live(m) > 0 {
			return true
		}
	}
	return false
}

// wait puts the request in the queue of w's model, as the core's wait: a slot about to be
// freed goes to it if it fits (matcher.Fit); it leaves at the queue's deadline, a batch line's
// at its batch's. A live request that waits preempts a batch job, and a gold one a bronze
// job, whose freed slot it would take.
func (p *part) wait(r *request, w *waitOn) {
	fit := matcher.NewFit(w.mreq)
	fits := func(c *matcher.Candidate) bool {
		if !fit.Admits(c) {
			return false
		}
		p.handed = r // Hand gives the slot to the first waiter this says yes for
		return true
	}
	var (
		tk  *queue.Ticket[*offer, *matcher.Candidate]
		err error
	)
	if r.batch {
		tk, err = p.q.JoinBatch(w.m.name, r.key, fits, p.clock())
	} else {
		tk, err = p.q.Join(w.m.name, r.key, r.tier, r.continuing, fits, p.clock())
	}
	if err != nil {
		p.fail(r, failQueueFull)
		return
	}
	r.ticket, r.waitFrom = tk, p.now
	r.tgen++
	deadline := p.now + p.w.mkt.queue.timeout
	if r.batch {
		deadline = r.run.expires
	}
	p.at(deadline, event{kind: evQueueTimeout, ref: r, gen: r.tgen})
	if !r.batch {
		p.preempt(w.m, tk, r.tier == tier.Gold)
	}
}

// handedOver starts the request that was handed o's slot, which it holds.
func (p *part) handedOver(r *request, o *offer) {
	tk := r.ticket
	select {
	case <-tk.Ready():
	default:
	}
	r.ticket = nil
	waited := p.now - r.waitFrom
	r.queued += waited
	if !r.started {
		r.queuedFirst += waited
	}
	p.start(r, o, o.candidate(p.clock()))
}

// timeout ends a request still waiting at its deadline: a 503 (the core's "No node could take
// this request within …"), or a batch line expired.
func (p *part) timeout(r *request, gen uint32) {
	if r.ticket == nil || r.tgen != gen {
		return
	}
	r.ticket.Leave()
	r.ticket = nil
	r.queued += p.now - r.waitFrom
	p.fail(r, failTimeout)
}

// start runs a job of the request on o, whose slot it holds, at the ask c was read at, at the
// request's tier (the core's askOf): the price is fixed when the request takes the node.
func (p *part) start(r *request, o *offer, c matcher.Candidate) {
	r.jobs++
	r.fruitless++
	if r.avoid != nil {
		r.avoid[o.node.id] = true
	} else {
		r.last = o.node.id
	}
	m := p.multiplier(r)
	k := o.node.class
	j := &job{r: r, o: o, start: p.now, window: c.AskWindow, surge: c.Surge,
		ask:  ledger.Ask{Input: tier.Scale(c.InputPrice, m), Output: tier.Scale(c.OutputPrice, m)},
		read: r.prompt + r.delivered, tokens: r.answer - r.delivered}
	ttft := k.TTFT
	if k.PrefillTokensPerSecond > 0 {
		ttft += seconds(float64(j.read) / k.PrefillTokensPerSecond)
	}
	j.first = p.now + ttft
	j.end = j.first + seconds(float64(j.tokens)/k.TokensPerSecond)
	o.jobs = append(o.jobs, j)
	switch {
	case r.batch:
		o.model.batchJobs.add(j)
		j.listed = true
	case r.tier == tier.Bronze:
		o.model.bronze.add(j)
		j.listed = true
	}
	r.job = j
	p.at(j.end, event{kind: evJobEnd, ref: j})
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// jobEnd ends a job that generated its answer whole.
func (p *part) jobEnd(j *job) {
	if j.done {
		return
	}
	r := j.r
	p.finish(j, j.tokens)
	p.release(j.o)
	r.delivered += j.tokens
	if !r.started {
		r.started, r.first = true, j.first
	}
	p.complete(r)
}

// finish ends a job that delivered some tokens: its slot-time and its work are counted.
func (p *part) finish(j *job, delivered int) {
	j.done = true
	o := j.o
	for i, x := range o.jobs {
		if x == j {
			last := len(o.jobs) - 1
			o.jobs[i] = o.jobs[last]
			o.jobs[last] = nil
			o.jobs = o.jobs[:last]
			break
		}
	}
	if j.listed {
		p.unlist(j)
	}
	o.busy += p.now - j.start
	o.tokens += int64(delivered)
	o.jobsN++
	p.st.busy(o.node, j.start, p.now)
	r := j.r
	r.job = nil
	if delivered > 0 {
		n := o.node
		wt := int(p.st.weight) // a simulated job does the work of this many
		r.works = append(r.works, ledger.Work{NodeID: n.id, ProviderID: n.provider, Ask: j.ask, AskWindow: j.window, Surge: j.surge,
			PromptTokens: j.read * wt, CompletionTokens: delivered * wt, DeliveredBytes: 4 * delivered * wt})
	}
}

// unlist counts an ended job out of its model's bronze or batch list.
func (p *part) unlist(j *job) {
	m := j.o.model
	if j.r.batch {
		m.batchJobs.ended()
	} else {
		m.bronze.ended()
	}
}

// jobList holds running jobs, newest last; ended ones are dropped lazily, the list compacted
// once half of it has ended, so that a job's end costs O(1) amortized.
type jobList struct {
	js   []*job
	gone int // ended, still in js
}

func (l *jobList) add(j *job) { l.js = append(l.js, j) }

func (l *jobList) ended() {
	l.gone++
	for len(l.js) > 0 && l.js[len(l.js)-1].done {
		l.js[len(l.js)-1] = nil
		l.js = l.js[:len(l.js)-1]
		l.gone--
	}
	if len(l.js) > 64 && 2*l.gone > len(l.js) {
		live := l.js[:0]
		for _, x := range l.js {
			if !x.done {
				live = append(live, x)
			}
		}
		clear(l.js[len(live):])
		l.js, l.gone = live, 0
	}
}

// release frees a slot of o that a job ended on: it goes to the first waiting request it fits
// (the core's handoff), unless the node takes no jobs now.
func (p *part) release(o *offer) {
	if o.node.online() && !p.q.Empty() {
		c := o.freed(p.clock())
		p.handed = nil
		if p.q.Hand(o.model.name, o, &c) {
			p.handedOver(p.handed, o)
			return
		}
	}
	o.free()
}

// Why a job was cut short.
type cutWhy uint8

const (
	cutDropped   cutWhy = iota // its node's connection dropped
	cutDrained                 // its node's window closed, and the drain passed
	cutPreempted               // a waiting request of a higher tier took its slot
)

// cut ends a job before its answer's end, and hands its request on as the core does: a
// preempted answer pauses and continues once a slot frees; one a node failed before its first
// token is tried afresh elsewhere; one cut mid-answer is continued by another node from where it
// stopped.
func (p *part) cut(j *job, why cutWhy) {
	if j.done {
		return
	}
	r, o := j.r, j.o
	k := o.node.class
	delivered := 0
	if p.now > j.first {
		delivered = min(j.tokens, int(float64(p.now-j.first)/float64(time.Second)*k.TokensPerSecond))
	}
	p.finish(j, delivered)
	if why == cutDropped {
		o.free() // the slots of a node whose connection ended free as its jobs fail
	} else {
		p.release(o)
	}
	r.delivered += delivered
	if delivered > 0 && !r.started {
		r.started, r.first = true, j.first
	}
	switch {
	case why == cutPreempted:
		// Not the node's fault.
		r.fruitless--
		r.avoid, r.last = nil, ""
		if r.started {
			r.continuing = true
		}
	case delivered == 0:
		// It failed before its first token: another node starts afresh (or continues).
		p.st.failoversBefore += p.st.weight
		if why == cutDropped {
			// Its connection dropped: once back, it is as good as any node.
			if r.avoid != nil {
				delete(r.avoid, o.node.id)
			} else {
				r.last = ""
			}
		}
	default:
		// Mid-answer: another node continues from exactly where this one stopped.
		p.st.failoversMid += p.st.weight
		r.fruitless = 0
		r.avoid, r.last = nil, ""
		if why != cutDropped {
			r.last = o.node.id
		}
		r.continuing = true
	}
	p.at(p.now, event{kind: evRedispatch, ref: r})
}

// preempt stops the newest batch job of the model on a node whose freed slot tk would take,
// or for a gold request the newest bronze one (the core's preempt). Only jobs of nodes that
// continue answers are preempted: the answer must go on where it stopped.
func (p *part) preempt(m *model, tk *queue.Ticket[*offer, *matcher.Candidate], gold bool) {
	if p.preemptFrom(m.batchJobs.js, tk) || !gold {
		return
	}
	p.preemptFrom(m.bronze.js, tk)
}

func (p *part) preemptFrom(js []*job, tk *queue.Ticket[*offer, *matcher.Candidate]) bool {
	for i := len(js) - 1; i >= 0; i-- {
		j := js[i]
		if j.done || j.preempted || !j.o.node.class.continues || !j.o.node.online() {
			continue
		}
		c := j.o.freed(p.clock())
		if tk.Fits(&c) {
			j.preempted = true
			p.st.preemptions += p.st.weight
			// The node stops the job and its slot frees; then the queue hands it over.
			p.at(p.now, event{kind: evPreempted, ref: j})
			return true
		}
	}
	return false
}

// complete bills a request whose answer ended whole.
func (p *part) complete(r *request) { p.end(r, outServed, 0) }

// fail ends a request no node could take or finish: what was delivered is billed.
func (p *part) fail(r *request, why failWhy) {
	out := outFailed
	if why == failTimeout {
		out = outTimedOut
	}
	p.end(r, out, why)
}

// end bills the request's works (ledger.Ledger.Price: the coordinator's billing, fee and
// continuation subsidy included) and counts it.
func (p *part) end(r *request, out outcome, why failWhy) {
	var bill *ledger.Bill
	if len(r.works) > 0 {
		wt := int(p.st.weight)
		b := ledger.Bounds{PromptTokens: r.prompt * wt, CompletionTokens: r.answer * wt, PromptEstimate: r.prompt * wt}
		bill = p.led.Price(strconv.FormatInt(r.id, 36), b, r.works)
	}
	p.st.request(p, r, out, why, bill)
	p.inflight--
	if r.run != nil {
		p.lineEnded(r, out)
	}
}
