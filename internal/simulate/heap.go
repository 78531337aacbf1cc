package simulate

import "time"

// kind is what an event does when its time comes.
type kind uint8

const (
	evArrival      kind = iota // a stream's next request (x: the stream)
	evJobEnd                   // a job's last token (j, gen)
	evPreempted                // a preempted job stops, its slot freed (j, gen)
	evDrop                     // a node's connection drops (n, gen)
	evReconnect                // a dropped node is back (n)
	evWindow                   // a node's availability window opens or closes (n)
	evDrained                  // the drain after a window closed ends (n, gen)
	evQueueTimeout             // a waiting request's deadline (r, gen)
	evRedispatch               // a request whose job was cut looks for another node (r)
	evSurge                    // a model's surge sample (x: the model)
	evBatchSubmit              // a batch is submitted (x: the batch)
	evBatchPoll                // a batch's runner looks for idle slots again (b)
	evBatchExpire              // a batch's completion window ends (b)
	evRebuild                  // a model's candidates change (x: the model)
)

// event is one entry of the calendar. Events at the same time run in the order they were
// scheduled (seq), so that a run is the same for a seed whatever the heap's layout.
type event struct {
	at   time.Duration // since the start
	seq  uint64
	ref  any // the *job, *node, *request or *batchRun it acts on, by kind
	kind kind
	gen  uint32 // the generation of what it acts on: a stale event is dropped
	x    int32
}

func (e *event) job() *job           { return e.ref.(*job) }
func (e *event) node() *node         { return e.ref.(*node) }
func (e *event) request() *request   { return e.ref.(*request) }
func (e *event) batchRun() *batchRun { return e.ref.(*batchRun) }

// calendar is a 4-ary min-heap of events by (at, seq): shallower than a binary heap, so a
// push or a pop touches fewer cache lines.
type calendar struct {
	es  []event
	seq uint64
}

func before(a, b *event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func (c *calendar) push(e event) {
	c.seq++
	e.seq = c.seq
	c.es = append(c.es, event{})
	i := len(c.es) - 1
	for i > 0 { // move the parents down into the hole until e fits
		p := (i - 1) / 4
		if !before(&e, &c.es[p]) {
			break
		}
		c.es[i] = c.es[p]
		i = p
	}
	c.es[i] = e
}

func (c *calendar) len() int { return len(c.es) }

// pop removes and returns the earliest event.
func (c *calendar) pop() event {
	top := c.es[0]
	last := len(c.es) - 1
	e := c.es[last]
	c.es[last] = event{} // drop the pointer it held
	c.es = c.es[:last]
	if last == 0 {
		return top
	}
	i := 0
	for { // move the least child up into the hole until e fits
		first := 4*i + 1
		if first >= last {
			break
		}
		m := first
		for k := first + 1; k < first+4 && k < last; k++ {
			if before(&c.es[k], &c.es[m]) {
				m = k
			}
		}
		if !before(&c.es[m], &e) {
			break
		}
		c.es[i] = c.es[m]
		i = m
	}
	c.es[i] = e
	return top
}
