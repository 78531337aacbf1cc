package fleet

import (
	"context"
	"time"
)

// ewmaWeight is the weight of a new observation in the moving averages: recent behaviour
// counts most, one bad answer does not make a node.
const ewmaWeight = 0.2

// Stats is what the coordinator has measured of an offer.
type Stats struct {
	TTFT            time.Duration // moving average of time to first token; 0 until measured
	TokensPerSecond float64       // moving average of output tokens per second after the first
	Reliability     float64       // moving average of answers completed (1) vs failed (0); 1 before any
	Completed       int64
	Failed          int64
}

// Stats returns the offer's measurements.
func (o *Offer) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	if s.Completed+s.Failed == 0 {
		// The moving average's start. It measures nothing yet: ranking (matcher.Reliability)
		// and the score (the live reliability factor) take it only once a job has ended.
		s.Reliability = 1
	}
	return s
}

// Observe records how a job on the offer went: completed with its time to first token and
// output rate, or failed because of the node.
func (o *Offer) Observe(completed bool, ttft time.Duration, tokensPerSecond float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := &o.stats
	if s.Completed+s.Failed == 0 {
		s.Reliability = 1 // a new node starts trusted: one failure must not sink it
	}
	ok := 0.0
	if completed {
		ok = 1
		s.Completed++
	} else {
		s.Failed++
	}
	s.Reliability += ewmaWeight * (ok - s.Reliability)
	if !completed {
		return
	}
	if ttft > 0 {
		if s.TTFT == 0 {
			s.TTFT = ttft
		} else {
			s.TTFT += time.Duration(ewmaWeight * float64(ttft-s.TTFT))
		}
	}
	if tokensPerSecond > 0 {
		if s.TokensPerSecond == 0 {
			s.TokensPerSecond = tokensPerSecond
		} else {
			s.TokensPerSecond += ewmaWeight * (tokensPerSecond - s.TokensPerSecond)
		}
	}
}

// RTT returns the moving average of the round trip to the node, 0 until measured.
func (n *Node) RTT() time.Duration { return time.Duration(n.rtt.Load()) }

func (n *Node) observeRTT(d time.Duration) {
	old := time.Duration(n.rtt.Load())
	if old > 0 {
		d = old + time.Duration(ewmaWeight*float64(d-old))
	}
	n.rtt.Store(int64(d))
}

// ping measures the round trip to the node.
func (s *session) ping(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.fleet.cfg.HeartbeatInterval)
	defer cancel()
	start := time.Now()
	if err := s.conn.Ping(ctx); err == nil {
		s.node.observeRTT(time.Since(start))
	}
}
