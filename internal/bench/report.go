package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured: `shareai bench --json` prints it. Times are in
// milliseconds; rates are per second of wall time.
type Report struct {
	URL         string `json:"url"`               // the API's base URL
	Network     string `json:"network,omitempty"` // the in-process network the run started, if it started one
	Model       string `json:"model"`             // the model asked for
	Stream      bool   `json:"stream"`            // streamed (server-sent events) or one JSON answer
	Concurrency int    `json:"concurrency"`       // requests in flight at once
	MaxTokens   int    `json:"max_tokens"`        // each request's max_tokens
	Planned     int    `json:"planned"`           // requests the run was to send; 0 when bounded by time only

	Requests    int          `json:"requests"`    // requests that finished: OK + Failed
	OK          int          `json:"ok"`          // complete answers (a stream: up to data: [DONE])
	Failed      int          `json:"failed"`      // errors, grouped in Errors
	Cancelled   int          `json:"cancelled"`   // in flight when the run was interrupted; neither OK nor Failed
	Interrupted bool         `json:"interrupted"` // the run was stopped (Ctrl-C) before its end
	Errors      []ErrorGroup `json:"errors"`      // failed requests by status and code, most frequent first

	WallSeconds       float64 `json:"wall_seconds"`        // from the start to the end of the last answer
	RequestsPerSecond float64 `json:"requests_per_second"` // OK / WallSeconds

	InputTokens           int64   `json:"input_tokens"`             // prompt tokens of the OK answers, from their usage
	OutputTokens          int64   `json:"output_tokens"`            // completion tokens of the OK answers, from usage
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"` // OutputTokens / WallSeconds
	// UsageMissing counts OK answers without usage; a stream's output tokens are then its
	// chunks with content.
	UsageMissing int `json:"usage_missing"`

	Latency Percentiles `json:"latency_ms"` // from sending a request to the end of its answer (OK ones)
	// TTFT is the time from sending a streamed request to its first chunk with content.
	TTFT *Percentiles `json:"ttft_ms,omitempty"`
	// StreamTokensPerSecond is each stream's own speed: its output tokens after the first,
	// over the time from its first to its last chunk with content.
	StreamTokensPerSecond *Percentiles `json:"stream_tokens_per_second,omitempty"`

	Hold  *Hold     `json:"hold,omitempty"`  // hold mode's memory readings
	Batch *BatchRun `json:"batch,omitempty"` // batch mode's figures
}

// ErrorGroup is the failed requests of one HTTP status and error code, with the first one's
// message.
type ErrorGroup struct {
	// Status is the HTTP status; 0 when no answer came (Code network_error or timeout); 200 for
	// a stream that failed after it started.
	Status int `json:"status"`
	// Code is the OpenAI error code (model_not_found, invalid_api_key, …), or network_error,
	// timeout, incomplete_stream, bad_response; "" when the answer named none.
	Code    string `json:"code"`
	Type    string `json:"type,omitempty"` // the OpenAI error type, when given
	Message string `json:"message"`        // the first such error's message
	Count   int    `json:"count"`
}

// Percentiles summarize samples, computed exactly from all of them (nearest rank: P90 is the
// smallest sample that at least 90% of the samples do not exceed).
type Percentiles struct {
	N    int     `json:"n"` // samples
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// NewPercentiles summarizes samples; it sorts them.
func NewPercentiles(samples []float64) Percentiles {
	p := Percentiles{N: len(samples)}
	if len(samples) == 0 {
		return p
	}
	slices.Sort(samples)
	var sum float64
	for _, v := range samples {
		sum += v
	}
	p.Mean = sum / float64(len(samples))
	p.P50, p.P90, p.P99 = rank(samples, 50), rank(samples, 90), rank(samples, 99)
	p.Max = samples[len(samples)-1]
	return p
}

// rank is the nearest-rank percentile q of sorted samples.
func rank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func millis(ds []time.Duration) []float64 {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return ms
}

// summarize merges the workers' tallies.
func summarize(ts []*tally, wall time.Duration) *Report {
	r := &Report{WallSeconds: wall.Seconds(), Errors: []ErrorGroup{}}
	var latency, ttft []time.Duration
	var rates []float64
	groups := map[errorKey]*ErrorGroup{}
	var order []errorKey
	for _, t := range ts {
		r.OK += t.ok
		r.Failed += t.failed
		r.Cancelled += t.cancelled
		r.InputTokens += t.in
		r.OutputTokens += t.out
		r.UsageMissing += t.usageMissing
		latency = append(latency, t.latency...)
		ttft = append(ttft, t.ttft...)
		rates = append(rates, t.rates...)
		for _, k := range t.errorOrder {
			if g, ok := groups[k]; ok {
				g.Count += t.errors[k].Count
				continue
			}
			g := *t.errors[k]
			groups[k] = &g
			order = append(order, k)
		}
	}
	for _, k := range order {
		r.Errors = append(r.Errors, *groups[k])
	}
	slices.SortStableFunc(r.Errors, func(a, b ErrorGroup) int { return cmp.Compare(b.Count, a.Count) })
	r.Requests = r.OK + r.Failed
	if wall > 0 {
		r.RequestsPerSecond = float64(r.OK) / wall.Seconds()
		r.OutputTokensPerSecond = float64(r.OutputTokens) / wall.Seconds()
	}
	r.Latency = NewPercentiles(millis(latency))
	if len(ttft) > 0 {
		p := NewPercentiles(millis(ttft))
		r.TTFT = &p
	}
	if len(rates) > 0 {
		p := NewPercentiles(rates)
		r.StreamTokensPerSecond = &p
	}
	return r
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Batch != nil {
		fmt.Fprintf(&b, "%s at %s: max_tokens %d\n", r.Model, r.URL, r.MaxTokens)
		if r.Network != "" {
			fmt.Fprintf(&b, "Network: %s\n", r.Network)
		}
		r.Batch.writeText(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	mode := "not streamed"
	if r.Stream {
		mode = "streamed"
	}
	fmt.Fprintf(&b, "%s at %s: %s, max_tokens %d, concurrency %d\n", r.Model, r.URL, mode, r.MaxTokens, r.Concurrency)
	if r.Network != "" {
		fmt.Fprintf(&b, "Network: %s\n", r.Network)
	}
	if r.Interrupted {
		planned := ""
		if r.Planned > 0 {
			planned = fmt.Sprintf(" of %d", r.Planned)
		}
		fmt.Fprintf(&b, "INTERRUPTED after %d%s requests; %d in flight were cancelled and are not counted.\n", r.Requests, planned, r.Cancelled)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if r.Hold != nil {
		r.Hold.writeText(&b)
	} else {
		fmt.Fprintf(tw, "requests\t%d ok, %d failed, in %s\t%.1f req/s\n", r.OK, r.Failed, seconds(r.WallSeconds), r.RequestsPerSecond)
		fmt.Fprintf(tw, "tokens\t%d out, %d in\t%.0f tokens/s out\n", r.OutputTokens, r.InputTokens, r.OutputTokensPerSecond)
	}
	if r.Latency.N > 0 {
		fmt.Fprintf(tw, "latency\t%s\t\n", r.Latency.ms())
	}
	if r.TTFT != nil {
		fmt.Fprintf(tw, "ttft\t%s\t\n", r.TTFT.ms())
	}
	if p := r.StreamTokensPerSecond; p != nil {
		fmt.Fprintf(tw, "per stream\tp50 %.0f  p90 %.0f  p99 %.0f  max %.0f\ttokens/s\n", p.P50, p.P90, p.P99, p.Max)
	}
	tw.Flush()
	if r.UsageMissing > 0 {
		fmt.Fprintf(&b, "%d answers had no usage; their output tokens are their chunks with content.\n", r.UsageMissing)
	}
	if len(r.Errors) > 0 {
		fmt.Fprintln(&b, "errors:")
		for _, e := range r.Errors {
			code := e.Code
			if code == "" {
				code = "-"
			}
			status := fmt.Sprint(e.Status)
			if e.Status == 0 {
				status = "---"
			}
			fmt.Fprintf(&b, "  %6d× %s %s: %s\n", e.Count, status, code, e.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (p Percentiles) ms() string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s", msec(p.P50), msec(p.P90), msec(p.P99), msec(p.Max))
}

// msec shows milliseconds with three significant digits or so.
func msec(ms float64) string {
	switch {
	case ms >= 10_000:
		return fmt.Sprintf("%.1fs", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmt.Sprintf("%.2fms", ms)
}

func seconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.1fs", s)
}
