// Package bench is a load generator for an OpenAI-compatible API, such as a ShareAI
// coordinator's: it sends N chat completions (or runs for a while) at a concurrency C, streamed
// or not, and reports throughput, time to first token, latency percentiles, tokens and errors
// (Run); or it opens C slow streams at once and reads the server's memory from its Prometheus
// endpoint while they are all open (Hold); or it sends the same load straight to an upstream
// and through a network in front of it, and compares the CPU per request of both paths
// (Compare), against the instant upstream Mock when there is no other, and holds the figure
// to a committed Baseline by machine class (Check).
//
// It is a plain HTTP client, built on net/http with a transport sized for the concurrency, so
// that the client is not the bottleneck. It imports no other package of this module: it sees
// the network only as a buyer does.
package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a run.
type Config struct {
	// BaseURL is the API's base URL, ending in /v1 (see BaseURL).
	BaseURL string
	APIKey  string
	Model   string
	// Requests is how many requests to send; 0 means no limit, and then Duration must be set.
	Requests int
	// Duration, if set, stops sending new requests once it has passed since the start;
	// requests in flight then finish.
	Duration    time.Duration
	Concurrency int
	// Stream asks for server-sent events, with stream_options.include_usage.
	Stream    bool
	MaxTokens int
	Prompt    string
	// Timeout bounds each request, from sending it to the end of its answer; 0: none.
	Timeout time.Duration
	// Client sends the requests; default NewClient(Concurrency).
	Client *http.Client
	// Progress, if set, is told how the run goes, at most ten times a second, and once more
	// at the end.
	Progress Progress
}

// Progress is told how a run goes.
type Progress interface {
	Update(Snapshot)
	Done(Snapshot)
}

// Snapshot is a run's progress.
type Snapshot struct {
	Done     int64         // requests finished, successfully or not
	Failed   int64         // of which failed
	Total    int64         // requests to send; 0 when the run is bounded by time only
	Elapsed  time.Duration // since the start
	Duration time.Duration // the run's time bound; 0: none
	// Holding is set in hold mode: Done counts streams that got their first token or failed.
	Holding bool
}

func (c *Config) validate() error {
	switch {
	case c.BaseURL == "":
		return errors.New("bench: no base URL")
	case c.Model == "":
		return errors.New("bench: no model")
	case c.Concurrency < 1:
		return errors.New("bench: concurrency must be at least 1")
	case c.Requests < 0 || c.Requests == 0 && c.Duration <= 0:
		return errors.New("bench: set a number of requests or a duration")
	case c.MaxTokens < 1:
		return errors.New("bench: max tokens must be at least 1")
	}
	return nil
}

// Run sends the requests and reports on them. When ctx is cancelled it stops, cancels the
// requests in flight, and reports on those that finished, marked Interrupted. It closes the
// client's idle connections when it ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Concurrency)
	}
	body, err := requestBody(cfg.Model, cfg.Prompt, cfg.MaxTokens, cfg.Stream)
	if err != nil {
		return nil, err
	}
	workers := cfg.Concurrency
	if cfg.Requests > 0 {
		workers = min(workers, cfg.Requests)
	}
	var (
		issued, done, failed atomic.Int64
		wg                   sync.WaitGroup
		results              = make([]*tally, workers)
		start                = time.Now()
	)
	snapshot := func() Snapshot {
		return Snapshot{Done: done.Load(), Failed: failed.Load(), Total: int64(cfg.Requests), Elapsed: time.Since(start), Duration: cfg.Duration}
	}
	stopProgress := watch(cfg.Progress, snapshot)
	for w := range workers {
		t := newTally()
		results[w] = t
		wg.Go(func() {
			s := newSender(cfg.Client, cfg.BaseURL+"/chat/completions", cfg.APIKey, body, cfg.Stream, cfg.Timeout)
			for ctx.Err() == nil {
				if cfg.Duration > 0 && time.Since(start) >= cfg.Duration {
					return
				}
				if cfg.Requests > 0 && issued.Add(1) > int64(cfg.Requests) {
					return
				}
				r := s.send(ctx)
				if r.cancelled {
					t.cancelled++
					return
				}
				t.add(&r)
				if r.err != nil {
					failed.Add(1)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	stopProgress()
	// Connections dialed but never used would hold up the server's graceful shutdown (Go's
	// http.Server waits 5s for a new connection's first request).
	cfg.Client.CloseIdleConnections()
	rep := summarize(results, wall)
	rep.URL, rep.Model, rep.Stream, rep.Concurrency, rep.MaxTokens = cfg.BaseURL, cfg.Model, cfg.Stream, cfg.Concurrency, cfg.MaxTokens
	rep.Planned = cfg.Requests
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}

// watch tells p how the run goes every 100ms until the returned func is called, which tells
// it once more, as done.
func watch(p Progress, snapshot func() Snapshot) (stop func()) {
	if p == nil {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.Update(snapshot())
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
		p.Done(snapshot())
	}
}

// tally is one worker's results, merged at the end so that workers share no lock.
type tally struct {
	latency, ttft []time.Duration
	rates         []float64 // per stream: output tokens per second after the first token
	in, out       int64
	ok, failed    int
	usageMissing  int
	cancelled     int
	errors        map[errorKey]*ErrorGroup
	errorOrder    []errorKey
}

type errorKey struct {
	status int
	code   string
}

func newTally() *tally { return &tally{errors: map[errorKey]*ErrorGroup{}} }

func (t *tally) add(r *result) {
	if r.err != nil {
		t.failed++
		k := errorKey{r.err.Status, r.err.Code}
		if g, ok := t.errors[k]; ok {
			g.Count++
			return
		}
		g := *r.err
		g.Count = 1
		t.errors[k] = &g
		t.errorOrder = append(t.errorOrder, k)
		return
	}
	t.ok++
	t.latency = append(t.latency, r.latency)
	t.in += int64(r.promptTokens)
	t.out += int64(r.completionTokens)
	if !r.usage {
		t.usageMissing++
	}
	if r.ttft > 0 {
		t.ttft = append(t.ttft, r.ttft)
	}
	if n := r.tokens(); n > 1 && r.lastToken > r.ttft && r.ttft > 0 {
		t.rates = append(t.rates, float64(n-1)/(r.lastToken-r.ttft).Seconds())
	}
}

// String names an error group, as the text report shows it.
func (k errorKey) String() string { return fmt.Sprintf("%d %s", k.status, k.code) }
