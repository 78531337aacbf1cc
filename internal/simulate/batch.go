package simulate

import (
	"time"

	"github.com/shareai/shareai/internal/tier"
)

// Batches run as internal/batch runs them: each line through the core as batch work (bronze,
// at the batch price; idle nodes first), its first job only on an idle slot and never while a
// live request waits for its model; a line preempted or failed over waits after every live
// request (queue.JoinBatch). The runner tries lines again when one of its lines ends, when
// nodes come online, and at most a second after it last found no idle slot.

// batchPoll is how long the runner waits before it looks for idle slots again (the batch
// runner's idle wait grows to a second).
const batchPoll = time.Second

// batchRun is one submission of a batch.
type batchRun struct {
	b       *batch
	m       *model
	expires time.Duration
	pending int // lines not started yet
	running int // lines started and not ended
	done    int
}

// submit submits a batch now, and schedules its next submission.
func (p *part) submit(b *batch) {
	m := p.models[b.Model]
	run := &batchRun{b: b, m: m, expires: p.now + b.window, pending: b.Lines}
	p.st.batch(b).submitted += b.Lines * int(p.st.weight)
	if m == nil {
		p.st.batch(b).failed += b.Lines * int(p.st.weight) // no node serves its model
		run.pending = 0
	} else {
		m.runs = append(m.runs, run)
		p.at(run.expires, event{kind: evBatchExpire, ref: run})
		p.tryBatches(m)
	}
	p.nextSubmit(b)
}

// nextSubmit schedules the batch's next submission: the next opening of its windows.
func (p *part) nextSubmit(b *batch) {
	t := p.clock()
	for range 64 {
		next := b.at.Next(t)
		if next.IsZero() {
			return
		}
		if d := next.Sub(p.w.start); d >= p.w.end {
			return
		}
		if b.at.Open(next) {
			p.at(next.Sub(p.w.start), event{kind: evBatchSubmit, x: int32(b.index)})
			return
		}
		t = next
	}
}

// tryBatches starts the lines of the model's batches, oldest batch first, while idle slots
// take them. A line that ends while it runs (one no node may take) makes it go on.
func (p *part) tryBatches(m *model) {
	if m.trying {
		return
	}
	m.trying = true
	defer func() { m.trying = false }()
	for _, run := range m.runs {
		for run.pending > 0 {
			if m.onlineRunning >= m.onlineSlots {
				p.pollBatches(m) // no idle slot at all: no need to ask the matcher
				return
			}
			run.pending--
			run.running++
			p.inflight++
			p.noIdle = false
			p.dispatch(p.line(run))
			if p.noIdle {
				return
			}
		}
	}
}

// line is a new request for one of the run's lines.
func (p *part) line(run *batchRun) *request {
	b := run.b
	rng := p.batchRNG[b.index]
	p.nextID++
	return &request{id: p.nextID, run: run, key: "batch:" + b.Name, tier: tier.Bronze, batch: true, prefs: b.prefs,
		models: []string{b.Model}, arrive: p.now,
		prompt: length(rng, b.PromptTokens), answer: length(rng, b.AnswerTokens)}
}

// lineWaits puts back a line that found no idle slot: the runner tries again later.
func (p *part) lineWaits(r *request) {
	run := r.run
	run.pending++
	run.running--
	p.inflight--
	p.noIdle = true
	p.pollBatches(run.m)
}

// pollBatches makes the runner look again for idle slots of m a moment later.
func (p *part) pollBatches(m *model) {
	if !m.polling {
		m.polling = true
		p.at(p.now+batchPoll, event{kind: evBatchPoll, x: int32(m.index)})
	}
}

// lineEnded counts a line that ended, and hands its slot to the next line.
func (p *part) lineEnded(r *request, out outcome) {
	run := r.run
	run.running--
	st := p.st.batch(run.b)
	wt := int(p.st.weight)
	switch out {
	case outServed:
		st.done += wt
	case outTimedOut:
		st.expired += wt
	default:
		st.failed += wt
	}
	if m := run.m; m != nil {
		p.tryBatches(m)
	}
}

// expire ends a batch's completion window: lines not started expire (those waiting to
// continue leave the queue at the same deadline).
func (p *part) expire(run *batchRun) {
	p.st.batch(run.b).expired += run.pending * int(p.st.weight)
	run.pending = 0
	m := run.m
	for i, x := range m.runs {
		if x == run {
			m.runs = append(m.runs[:i], m.runs[i+1:]...)
			break
		}
	}
}
