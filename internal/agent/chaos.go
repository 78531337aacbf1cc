package agent

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// Chaos makes a node misbehave on purpose, for demos and tests of failover: on a share of its
// jobs it drops its connection to the coordinator mid-answer (and reconnects, as after any
// drop), or stalls (sends nothing more until the job is cancelled).
type Chaos struct {
	Drop  float64 // share of jobs on which the node drops its connection mid-answer
	Stall float64 // share of jobs on which it stalls mid-answer
}

// ParseChaos reads "drop=0.3,stall=0.1".
func ParseChaos(s string) (Chaos, error) {
	var c Chaos
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || f < 0 || f > 1 {
			return c, fmt.Errorf("chaos %q: want drop=P or stall=P with P between 0 and 1", part)
		}
		switch k {
		case "drop":
			c.Drop = f
		case "stall":
			c.Stall = f
		default:
			return c, fmt.Errorf("chaos %q: want drop=P or stall=P", part)
		}
	}
	if c.Drop+c.Stall > 1 {
		return c, fmt.Errorf("chaos %q: drop and stall add up to more than 1", s)
	}
	return c, nil
}

// chaosOutput wraps a job's output to misbehave after a few pieces.
type chaosOutput struct {
	engine.Output
	after int    // pieces before misbehaving
	act   func() // drop the connection, or nothing for a stall
	stall <-chan struct{}
	n     int
}

// withChaos returns out, or out made to misbehave for this job as the chaos settings say.
func (c *conn) withChaos(out engine.Output, done <-chan struct{}) engine.Output {
	ch := c.a.cfg.Chaos
	if ch.Drop == 0 && ch.Stall == 0 {
		return out
	}
	r := rand.Float64()
	co := &chaosOutput{Output: out, after: 2 + rand.IntN(20)}
	switch {
	case r < ch.Drop:
		co.act = func() { c.ws.CloseNow() }
	case r < ch.Drop+ch.Stall:
		co.stall = done
	default:
		return out
	}
	return co
}

func (o *chaosOutput) Delta(d protocol.Delta) error {
	if o.n++; o.n <= o.after {
		return o.Output.Delta(d)
	}
	o.Output.Flush()
	if o.act != nil {
		o.act()
		o.act = nil
	}
	if o.stall != nil {
		<-o.stall
	}
	return errChaos
}

var errChaos = fmt.Errorf("chaos: misbehaving on purpose")
