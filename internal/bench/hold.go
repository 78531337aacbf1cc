package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HoldConfig configures Hold.
type HoldConfig struct {
	BaseURL, APIKey, Model string
	// Streams is how many streamed requests to hold open at once.
	Streams   int
	MaxTokens int
	Prompt    string
	// MetricsURL is the server's Prometheus endpoint; empty: no memory readings.
	MetricsURL string
	// Settle is how long every stream stays open before the reading; default 2s.
	Settle time.Duration
	// Dialing bounds the requests sent but not answered yet, so that thousands of
	// connections do not overflow the server's listen queue at once; default 256.
	Dialing int
	// Timeout bounds the wait for every stream's first token; the reading is then taken with
	// the streams that are open. 0: no bound.
	Timeout  time.Duration
	Client   *http.Client
	Progress Progress
}

// Hold is what hold mode measured: the server's memory before the streams, with all of them
// open, and after they closed.
type Hold struct {
	Streams int `json:"streams"` // streams asked for
	Opened  int `json:"opened"`  // streams that got their first token
	Failed  int `json:"failed"`  // streams that failed before their first token (see Report.Errors)
	// EndedEarly counts opened streams that ended, or failed, before the reading.
	EndedEarly int `json:"ended_early"`
	// OpenAtReading is how many streams were open at the reading: Opened − EndedEarly.
	OpenAtReading int     `json:"open_at_reading"`
	OpenSeconds   float64 `json:"open_seconds"` // from the start to the last first token
	MetricsURL    string  `json:"metrics_url,omitempty"`
	Before        *Memory `json:"before,omitempty"` // before the first request
	During        *Memory `json:"during,omitempty"` // with OpenAtReading streams open
	After         *Memory `json:"after,omitempty"`  // after they closed, and Settle more
	// PerStream is (During − Before) / OpenAtReading: what one open stream costs the server.
	PerStream *Memory `json:"per_stream,omitempty"`
}

// RunHold opens cfg.Streams streamed requests, waits until each has got its first token (or
// failed), lets them stay open for cfg.Settle, reads the server's memory, and closes them.
func RunHold(ctx context.Context, cfg HoldConfig) (*Report, error) {
	switch {
	case cfg.BaseURL == "" || cfg.Model == "":
		return nil, errors.New("bench: hold needs a base URL and a model")
	case cfg.Streams < 1:
		return nil, errors.New("bench: hold needs at least one stream")
	case cfg.MaxTokens < 1:
		return nil, errors.New("bench: max tokens must be at least 1")
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Dialing <= 0 {
		cfg.Dialing = 256
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Streams)
	}
	metrics := &http.Client{Timeout: 30 * time.Second}
	h := &Hold{Streams: cfg.Streams, MetricsURL: cfg.MetricsURL}
	var err error
	if cfg.MetricsURL != "" {
		if h.Before, err = ScrapeMemory(ctx, metrics, cfg.MetricsURL); err != nil {
			return nil, err
		}
	}
	body, err := requestBody(cfg.Model, cfg.Prompt, cfg.MaxTokens, true)
	if err != nil {
		return nil, err
	}

	holdCtx, release := context.WithCancel(ctx)
	defer release()
	var (
		start                 = time.Now()
		opened, failed, ended atomic.Int64
		pending               atomic.Int64 // streams without a first token or a failure yet
		allOpen               = make(chan struct{})
		dialing               = make(chan struct{}, cfg.Dialing)
		wg                    sync.WaitGroup
		mu                    sync.Mutex // guards t and lastFirst
		t                     = newTally()
		lastFirst             time.Duration
		url                   = cfg.BaseURL + "/chat/completions"
	)
	snapshot := func() Snapshot {
		return Snapshot{Holding: true, Total: int64(cfg.Streams), Done: opened.Load() + failed.Load(), Failed: failed.Load(), Elapsed: time.Since(start)}
	}
	settleOne := func() {
		if pending.Add(-1) == 0 {
			close(allOpen)
		}
	}
	pending.Store(int64(cfg.Streams))
	stopProgress := watch(cfg.Progress, snapshot)
	for range cfg.Streams {
		wg.Go(func() {
			select {
			case dialing <- struct{}{}:
			case <-holdCtx.Done():
				settleOne()
				return
			}
			s := newSender(cfg.Client, url, cfg.APIKey, body, true, 0)
			s.br = bufio.NewReaderSize(nil, 4096)
			gotFirst := false
			s.first = func(ttft time.Duration) {
				gotFirst = true
				<-dialing
				opened.Add(1)
				mu.Lock()
				t.ttft = append(t.ttft, ttft)
				lastFirst = max(lastFirst, time.Since(start))
				mu.Unlock()
				settleOne()
			}
			r := s.send(holdCtx)
			if !gotFirst {
				<-dialing
				if !r.cancelled {
					if r.err == nil { // a complete answer without content
						r.err = &ErrorGroup{Status: http.StatusOK, Code: CodeIncompleteStream, Message: "the stream ended without a chunk with content"}
					}
					failed.Add(1)
					mu.Lock()
					t.add(&r)
					mu.Unlock()
				}
				settleOne()
				return
			}
			if holdCtx.Err() == nil { // it ended before the streams were released
				ended.Add(1)
				if r.err != nil {
					mu.Lock()
					t.add(&r)
					mu.Unlock()
				}
			}
		})
	}

	var timeout <-chan time.Time
	if cfg.Timeout > 0 {
		tm := time.NewTimer(cfg.Timeout)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-allOpen:
	case <-timeout:
	case <-ctx.Done():
	}
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
	}
	h.EndedEarly = int(ended.Load())
	if cfg.MetricsURL != "" && ctx.Err() == nil {
		if h.During, err = ScrapeMemory(ctx, metrics, cfg.MetricsURL); err != nil {
			release()
			wg.Wait()
			stopProgress()
			return nil, err
		}
	}
	release()
	wg.Wait()
	stopProgress()
	cfg.Client.CloseIdleConnections()
	wall := time.Since(start)
	if cfg.MetricsURL != "" && ctx.Err() == nil {
		select {
		case <-time.After(cfg.Settle):
			h.After, _ = ScrapeMemory(ctx, metrics, cfg.MetricsURL)
		case <-ctx.Done():
		}
	}

	h.Opened, h.Failed = int(opened.Load()), int(failed.Load())
	h.OpenAtReading = h.Opened - h.EndedEarly
	h.OpenSeconds = lastFirst.Seconds()
	if h.Before != nil && h.During != nil && h.OpenAtReading > 0 {
		h.PerStream = perStream(h.Before, h.During, h.OpenAtReading)
	}
	rep := summarize([]*tally{t}, wall)
	rep.OK = h.Opened - (t.failed - h.Failed) // opened streams that did not fail later
	rep.Requests = rep.OK + rep.Failed
	rep.RequestsPerSecond = 0
	rep.URL, rep.Model, rep.Stream, rep.Concurrency, rep.MaxTokens, rep.Planned = cfg.BaseURL, cfg.Model, true, cfg.Streams, cfg.MaxTokens, cfg.Streams
	rep.Interrupted = ctx.Err() != nil
	rep.Hold = h
	return rep, nil
}

func (h *Hold) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "Held %d streams: %d opened (the last first token after %s), %d failed before their first token, %d ended before the reading.\n",
		h.Streams, h.Opened, seconds(h.OpenSeconds), h.Failed, h.EndedEarly)
	if h.EndedEarly > 0 {
		fmt.Fprintln(b, "Streams ended before the reading: the answers are too fast or too short for hold mode (slow the providers down, or raise --max-tokens).")
	}
	if h.During == nil {
		if h.MetricsURL == "" {
			fmt.Fprintln(b, "No memory readings: give the server's Prometheus endpoint with --metrics.")
		}
		return
	}
	row := func(name string, f func(*Memory) float64, unit func(float64) string) {
		after := "-"
		if h.After != nil {
			after = unit(f(h.After))
		}
		per := "-"
		if h.PerStream != nil {
			per = unit(f(h.PerStream))
		}
		fmt.Fprintf(b, "  %-12s %12s %12s %12s %14s\n", name, unit(f(h.Before)), unit(f(h.During)), after, per)
	}
	fmt.Fprintf(b, "Server memory (%s), with %d streams open:\n", h.MetricsURL, h.OpenAtReading)
	fmt.Fprintf(b, "  %-12s %12s %12s %12s %14s\n", "", "before", "during", "after", "per stream")
	row("rss", func(m *Memory) float64 { return m.RSSBytes }, bytesText)
	row("heap inuse", func(m *Memory) float64 { return m.HeapInuseBytes }, bytesText)
	row("heap alloc", func(m *Memory) float64 { return m.HeapAllocBytes }, bytesText)
	row("stacks", func(m *Memory) float64 { return m.StackInuseBytes }, bytesText)
	row("sys", func(m *Memory) float64 { return m.SysBytes }, bytesText)
	row("goroutines", func(m *Memory) float64 { return m.Goroutines }, countText)
	if h.Before.StreamsActive != nil && h.During.StreamsActive != nil {
		row("streams", func(m *Memory) float64 {
			if m.StreamsActive == nil {
				return 0
			}
			return *m.StreamsActive
		}, countText)
	}
}

// bytesText shows bytes in B, KiB or MiB.
func bytesText(v float64) string {
	a := max(v, -v)
	switch {
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func countText(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}
