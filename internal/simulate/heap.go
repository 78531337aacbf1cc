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
	kind kind
	gen  uint32 // the generation of what it acts on: a stale event is dropped
	x    int32
	j    *job
	n    *node
	r    *request
	b    *batchRun
}

// calendar is a 4-ary min-heap of events by (at, seq): shallower than a binary heap, so a
// push or a pop touches fewer cache lines.
type calendar struct {
	es  []event
	seq uint64
}

func (c *calendar) less(i, j int) bool {
	a, b := &c.es[i], &c.es[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (c *calendar) push(e event) {
	c.seq++
	e.seq = c.seq
	c.es = append(c.es, e)
	i := len(c.es) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !c.less(i, p) {
			break
		}
		c.es[i], c.es[p] = c.es[p], c.es[i]
		i = p
	}
}

func (c *calendar) len() int { return len(c.es) }

// pop removes and returns the earliest event.
func (c *calendar) pop() event {
	top := c.es[0]
	last := len(c.es) - 1
	c.es[0] = c.es[last]
	c.es[last] = event{} // drop the pointers it held
	c.es = c.es[:last]
	i := 0
	for {
		first := 4*i + 1
		if first >= last {
			break
		}
		m := first
		for k := first + 1; k < first+4 && k < last; k++ {
			if c.less(k, m) {
				m = k
			}
		}
		if !c.less(m, i) {
			break
		}
		c.es[i], c.es[m] = c.es[m], c.es[i]
		i = m
	}
	return top
}
