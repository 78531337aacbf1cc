package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Memory is a Go server's memory, as its Prometheus endpoint shows it with client_golang's
// standard Go and process collectors.
type Memory struct {
	RSSBytes        float64 `json:"rss_bytes"`         // process_resident_memory_bytes
	HeapInuseBytes  float64 `json:"heap_inuse_bytes"`  // go_memstats_heap_inuse_bytes
	HeapAllocBytes  float64 `json:"heap_alloc_bytes"`  // go_memstats_heap_alloc_bytes
	StackInuseBytes float64 `json:"stack_inuse_bytes"` // go_memstats_stack_inuse_bytes
	SysBytes        float64 `json:"sys_bytes"`         // go_memstats_sys_bytes
	Goroutines      float64 `json:"goroutines"`        // go_goroutines
	// StreamsActive is shareai_streams_active (summed over its labels); nil when the endpoint
	// has no such metric.
	StreamsActive *float64 `json:"streams_active,omitempty"`
}

// memoryMetrics are the metrics a reading needs, with where each goes.
var memoryMetrics = []struct {
	name string
	to   func(*Memory) *float64
}{
	{"process_resident_memory_bytes", func(m *Memory) *float64 { return &m.RSSBytes }},
	{"go_memstats_heap_inuse_bytes", func(m *Memory) *float64 { return &m.HeapInuseBytes }},
	{"go_memstats_heap_alloc_bytes", func(m *Memory) *float64 { return &m.HeapAllocBytes }},
	{"go_memstats_stack_inuse_bytes", func(m *Memory) *float64 { return &m.StackInuseBytes }},
	{"go_memstats_sys_bytes", func(m *Memory) *float64 { return &m.SysBytes }},
	{"go_goroutines", func(m *Memory) *float64 { return &m.Goroutines }},
}

// StreamsActiveMetric is the coordinator's gauge of streams being written to buyers.
const StreamsActiveMetric = "shareai_streams_active"

// ParseMemory reads a Prometheus text exposition (format 0.0.4).
func ParseMemory(r io.Reader) (*Memory, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	m := &Memory{}
	for _, mm := range memoryMetrics {
		f, ok := fams[mm.name]
		if !ok {
			return nil, fmt.Errorf("parse metrics: no %s: is this a Go program with client_golang's standard collectors?", mm.name)
		}
		*mm.to(m) = sum(f)
	}
	if f, ok := fams[StreamsActiveMetric]; ok {
		v := sum(f)
		m.StreamsActive = &v
	}
	return m, nil
}

// sum adds up the values of a family's gauges, counters or untyped metrics.
func sum(f *dto.MetricFamily) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v
}

// ScrapeMemory reads the memory of the server whose Prometheus endpoint is url.
func ScrapeMemory(ctx context.Context, client *http.Client, url string) (*Memory, error) {
	body, err := scrape(ctx, client, url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return ParseMemory(body)
}

// ProcessCPUMetric is the CPU a process has used, user and system, in seconds, as
// client_golang's process collector counts it (in clock ticks on Linux: 10ms steps).
const ProcessCPUMetric = "process_cpu_seconds_total"

// ParseCPU reads process_cpu_seconds_total from a Prometheus text exposition.
func ParseCPU(r io.Reader) (time.Duration, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("parse metrics: %w", err)
	}
	f, ok := fams[ProcessCPUMetric]
	if !ok {
		return 0, fmt.Errorf("parse metrics: no %s: is this a program with client_golang's process collector?", ProcessCPUMetric)
	}
	return time.Duration(sum(f) * float64(time.Second)), nil
}

// ScrapeCPU reads the CPU used so far by the process whose Prometheus endpoint is url.
func ScrapeCPU(ctx context.Context, client *http.Client, url string) (time.Duration, error) {
	body, err := scrape(ctx, client, url)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	cpu, err := ParseCPU(body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	return cpu, nil
}

// SlotTime is a coordinator's slot-time counters for a model, in slot-seconds: of its nodes'
// slots open for jobs, busy and free (shareai_slot_seconds_total), and of the batch jobs it
// ran, part of busy (shareai_batch_slot_seconds_total).
type SlotTime struct {
	Busy, Free, Batch float64
}

// Slot-time metrics of the coordinator.
const (
	SlotSecondsMetric      = "shareai_slot_seconds_total"
	BatchSlotSecondsMetric = "shareai_batch_slot_seconds_total"
)

// ScrapeSlotTime reads the slot-time counters of a model from the coordinator whose
// Prometheus endpoint is url; all 0 before the coordinator first counted the model's.
func ScrapeSlotTime(ctx context.Context, client *http.Client, url, modelName string) (*SlotTime, error) {
	body, err := scrape(ctx, client, url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	if _, ok := fams["go_goroutines"]; !ok {
		return nil, fmt.Errorf("read metrics: %s has no go_goroutines: is it a Prometheus endpoint of a Go program?", url)
	}
	st := &SlotTime{}
	for _, m := range fams[SlotSecondsMetric].GetMetric() {
		if label(m, "model") != modelName {
			continue
		}
		switch label(m, "state") {
		case "busy":
			st.Busy += m.GetCounter().GetValue()
		case "free":
			st.Free += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams[BatchSlotSecondsMetric].GetMetric() {
		if label(m, "model") == modelName {
			st.Batch += m.GetCounter().GetValue()
		}
	}
	return st, nil
}

// label returns the value of a metric's label, "" when it has none of that name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// scrape gets the Prometheus text exposition at url; the caller closes it.
func scrape(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("read metrics: %s answered %s", url, resp.Status)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, 64<<20), resp.Body}, nil
}

// perStream is (during − before) / n, field by field.
func perStream(before, during *Memory, n int) *Memory {
	d := float64(n)
	m := &Memory{
		RSSBytes:        (during.RSSBytes - before.RSSBytes) / d,
		HeapInuseBytes:  (during.HeapInuseBytes - before.HeapInuseBytes) / d,
		HeapAllocBytes:  (during.HeapAllocBytes - before.HeapAllocBytes) / d,
		StackInuseBytes: (during.StackInuseBytes - before.StackInuseBytes) / d,
		SysBytes:        (during.SysBytes - before.SysBytes) / d,
		Goroutines:      (during.Goroutines - before.Goroutines) / d,
	}
	if before.StreamsActive != nil && during.StreamsActive != nil {
		v := (*during.StreamsActive - *before.StreamsActive) / d
		m.StreamsActive = &v
	}
	return m
}
