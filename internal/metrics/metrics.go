// Package metrics defines the Prometheus metrics of the coordinator and of the provider agent,
// each on a registry of its own (so that several networks in one test process do not share
// counters), with the Go runtime's and the process's standard collectors.
//
// Label values are bounded: models are those nodes serve (a request for a model no node serves
// counts under model=""), no-provider reasons are the matcher's fixed set, regions are nodes'
// declared regions. No label ever holds a key, an account or a request id.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shareai/shareai/internal/money"
)

// Buckets of the latency histograms, in seconds.
var (
	ttftBuckets     = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	durationBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// Registry is a registry with the Go runtime's and the process's collectors, served by Handler.
type Registry struct {
	*prometheus.Registry
}

// NewRegistry returns a registry holding the standard Go and process collectors.
func NewRegistry() *Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{r}
}

// Handler serves the registry's metrics in the Prometheus exposition formats.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry})
}

// register registers cs on r, when r is not nil: metrics made for a test without a registry
// count but are served nowhere.
func register(r *Registry, cs ...prometheus.Collector) {
	if r != nil {
		r.MustRegister(cs...)
	}
}

// Coordinator holds the coordinator's metrics. Its methods are safe for concurrent use.
type Coordinator struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	inFlight    prometheus.Gauge
	streams     prometheus.Gauge
	matches     *prometheus.CounterVec
	noProvider  *prometheus.CounterVec
	failovers   *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	holdsOpen   prometheus.Gauge
	holdsPlaced *prometheus.CounterVec
	settlements *prometheus.CounterVec
	spend       prometheus.Counter
	fees        prometheus.Counter
	subsidies   prometheus.Counter
	earnings    prometheus.Counter
	queued      *prometheus.GaugeVec
	waits       *prometheus.HistogramVec
	preemptions prometheus.Counter
	resumeGap   prometheus.Histogram
	slotTime    *prometheus.CounterVec
	batchTime   *prometheus.CounterVec
}

// NewCoordinator makes the coordinator's metrics and registers them on r; nil r: unregistered.
func NewCoordinator(r *Registry) *Coordinator {
	m := &Coordinator{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_requests_total",
			Help: "Buyer API inference requests by endpoint, model served and outcome (ok, cancelled, error, rejected, or the refusal before any node: invalid, unauthorized, payment_required, not_found, rate_limited, no_provider).",
		}, []string{"endpoint", "model", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shareai_request_duration_seconds", Help: "Time from a request's arrival to its answer's end, of requests a node served.",
			Buckets: durationBuckets,
		}, []string{"endpoint", "model"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shareai_time_to_first_token_seconds", Help: "Time from a request's arrival to the first token sent to the buyer.",
			Buckets: ttftBuckets,
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_tokens_total", Help: "Tokens billed, by model and direction (input: prompt, output: completion).",
		}, []string{"model", "direction"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shareai_requests_in_flight", Help: "Inference requests being served now, streamed or not.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shareai_streams_active", Help: "Streamed (SSE) answers open now.",
		}),
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_match_decisions_total", Help: "The matcher's decisions, one per node picked (matched) or per model with no eligible node (no_provider).",
		}, []string{"result"}),
		noProvider: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_no_provider_nodes_total", Help: "Nodes serving a requested model that were not eligible, by reason, counted each time no node could be picked.",
		}, []string{"reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_failovers_total", Help: "Requests moved to another node after theirs failed: before its first token, or mid-answer (continued exactly).",
		}, []string{"stage"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_rate_limited_total", Help: "Requests refused with 429 by a key's limit: requests (per minute, or concurrent) or tokens (per minute).",
		}, []string{"limit"}),
		holdsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shareai_holds_open", Help: "Holds placed on buyers' balances by this process and not settled yet.",
		}),
		holdsPlaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_holds_total", Help: "Holds placed (placed) or refused for the balance or a spend cap (refused), or failed (error).",
		}, []string{"result"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_settlements_total", Help: "Holds closed: charged (settled), closed without charge (voided), or failed (error).",
		}, []string{"result"}),
		spend: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shareai_spend_usd_total", Help: "What buyers were charged, in USD (fees included).",
		}),
		fees: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shareai_fees_usd_total", Help: "The platform's fees, in USD.",
		}),
		subsidies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shareai_subsidies_usd_total", Help: "What the platform paid nodes out of its fees beyond buyers' charges (prompts read again by nodes that continued another's answer), in USD.",
		}),
		earnings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shareai_provider_earnings_usd_total", Help: "What providers earned, in USD (pending until the settlement delay passes).",
		}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shareai_queue_length", Help: "Requests waiting in the queue for a free node now, by service tier.",
		}, []string{"tier"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shareai_queue_wait_seconds", Help: "Time requests waited in the queue for a free node, by tier and result: served (a node took it), timeout (the queue deadline passed), gone (the buyer left), full (refused: the queue was full), failed (no node could take it any more).",
			Buckets: ttftBuckets,
		}, []string{"tier", "result"}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shareai_preemptions_total", Help: "Jobs preempted to free a slot: a batch line's for any live request, a bronze one's for a gold request.",
		}),
		resumeGap: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shareai_preemption_gap_seconds", Help: "Time a preempted bronze answer was paused: from its node stopping to another job taking it over.",
			Buckets: ttftBuckets,
		}),
		slotTime: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_slot_seconds_total", Help: "Slot-time of this replica's nodes' offers while open for jobs (not paused: inside their windows), by model, busy with a job or free, in slot-seconds.",
		}, []string{"model", "state"}),
		batchTime: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_batch_slot_seconds_total", Help: "Slot-time taken by the batch lines this replica ran, by model, in slot-seconds: part of the busy slot-time. Batches filled batch / (batch + free) of the slot-time live requests left idle.",
		}, []string{"model"}),
	}
	register(r, m.requests, m.duration, m.ttft, m.tokens, m.inFlight, m.streams, m.matches, m.noProvider,
		m.failovers, m.rateLimited, m.holdsOpen, m.holdsPlaced, m.settlements, m.spend, m.fees, m.subsidies, m.earnings,
		m.queued, m.waits, m.preemptions, m.resumeGap, m.slotTime, m.batchTime)
	return m
}

// Request is what the coordinator knows about an inference request when it ends.
type Request struct {
	Endpoint string // chat or completion
	Model    string // the model that served it; "" when none did
	Outcome  string
	// Served is true when a node answered (part of) it: Duration, TTFT and tokens are then set.
	Served                 bool
	Duration, TTFT         float64 // seconds; TTFT 0: no token reached the buyer
	PromptTokens, Complete int
}

// RequestStarted counts a request in flight until the func it returns is called.
func (m *Coordinator) RequestStarted(stream bool) (done func()) {
	m.inFlight.Inc()
	if stream {
		m.streams.Inc()
	}
	return func() {
		m.inFlight.Dec()
		if stream {
			m.streams.Dec()
		}
	}
}

// RequestEnded records an ended request.
func (m *Coordinator) RequestEnded(r Request) {
	m.requests.WithLabelValues(r.Endpoint, r.Model, r.Outcome).Inc()
	if !r.Served {
		return
	}
	m.duration.WithLabelValues(r.Endpoint, r.Model).Observe(r.Duration)
	if r.TTFT > 0 {
		m.ttft.WithLabelValues(r.Model).Observe(r.TTFT)
	}
	if r.PromptTokens > 0 {
		m.tokens.WithLabelValues(r.Model, "input").Add(float64(r.PromptTokens))
	}
	if r.Complete > 0 {
		m.tokens.WithLabelValues(r.Model, "output").Add(float64(r.Complete))
	}
}

// Matched counts a node picked for a job.
func (m *Coordinator) Matched() { m.matches.WithLabelValues("matched").Inc() }

// NoProvider counts a model for which no node could be picked, and the nodes not eligible by
// reason. A region reason ("outside regions de/ch") counts as "outside region".
func (m *Coordinator) NoProvider(reasons map[string]int) {
	m.matches.WithLabelValues("no_provider").Inc()
	for reason, n := range reasons {
		if strings.HasPrefix(reason, "outside region") {
			reason = "outside region"
		}
		m.noProvider.WithLabelValues(reason).Add(float64(n))
	}
}

// Failover counts a request moved to another node: stage is before_first_token or mid_stream.
func (m *Coordinator) Failover(stage string) { m.failovers.WithLabelValues(stage).Inc() }

// Queued counts a request joining (+1) or leaving (-1) the queue at a tier.
func (m *Coordinator) Queued(tier string, delta int) {
	m.queued.WithLabelValues(tier).Add(float64(delta))
}

// QueueWaited records a wait in the queue and how it ended (see shareai_queue_wait_seconds).
func (m *Coordinator) QueueWaited(tier, result string, seconds float64) {
	m.waits.WithLabelValues(tier, result).Observe(seconds)
}

// Preempted counts a bronze job preempted for gold.
func (m *Coordinator) Preempted() { m.preemptions.Inc() }

// Resumed records how long a preempted answer was paused.
func (m *Coordinator) Resumed(seconds float64) { m.resumeGap.Observe(seconds) }

// SlotTime adds seconds of a model's slot-time: of its slots open for jobs, busy and free,
// and of the batch jobs running (part of busy).
func (m *Coordinator) SlotTime(model string, busy, free, batch int, seconds float64) {
	m.slotTime.WithLabelValues(model, "busy").Add(float64(busy) * seconds)
	m.slotTime.WithLabelValues(model, "free").Add(float64(free) * seconds)
	m.batchTime.WithLabelValues(model).Add(float64(batch) * seconds)
}

// RateLimited counts a request refused by a key's limit: requests (per minute, or concurrent)
// or tokens (per minute), as the 429's error type says.
func (m *Coordinator) RateLimited(limit string) { m.rateLimited.WithLabelValues(limit).Inc() }

// HoldPlaced counts a hold placed; result is placed, refused or error.
func (m *Coordinator) HoldPlaced(result string) {
	m.holdsPlaced.WithLabelValues(result).Inc()
	if result == "placed" {
		m.holdsOpen.Inc()
	}
}

// Settled counts a hold closed by a committed settlement: charged debit, of which fee is the
// platform's, and subsidy what the platform paid nodes beyond the charge (the prompt a node
// that continued another's answer read again); voided when nothing was due. Providers earn
// debit - fee + subsidy.
func (m *Coordinator) Settled(debit, fee, subsidy money.Nanos) {
	m.holdsOpen.Dec()
	if debit == 0 && subsidy == 0 {
		m.settlements.WithLabelValues("voided").Inc()
		return
	}
	m.settlements.WithLabelValues("settled").Inc()
	m.spend.Add(usd(debit))
	m.fees.Add(usd(fee))
	m.subsidies.Add(usd(subsidy))
	m.earnings.Add(usd(debit - fee + subsidy))
}

// SettleFailed counts a settlement that did not commit.
func (m *Coordinator) SettleFailed() { m.settlements.WithLabelValues("error").Inc() }

func usd(n money.Nanos) float64 { return float64(n) / float64(money.USD) }

// NodeSample is a connected node as the nodes gauge counts it.
type NodeSample struct {
	State  string // available, busy (every slot taken) or paused
	Level  string // new, verified, trusted, quarantined or suspended
	Region string
}

// FleetView is what the coordinator's fleet shows the metrics at each scrape.
type FleetView struct {
	Nodes   func() []NodeSample
	Running func() int // jobs running on nodes
}

// RegisterFleet registers gauges read from the fleet at each scrape: shareai_nodes by state,
// level and region, and shareai_jobs_running.
func RegisterFleet(r *Registry, v FleetView) {
	register(r, &fleetCollector{v})
}

var (
	nodesDesc = prometheus.NewDesc("shareai_nodes", "Nodes connected now, by state (available, busy: every slot taken, paused), trust level and region.",
		[]string{"state", "level", "region"}, nil)
	runningDesc = prometheus.NewDesc("shareai_jobs_running", "Jobs running on nodes now, probes included.", nil, nil)
)

type fleetCollector struct{ v FleetView }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- runningDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	counts := make(map[NodeSample]int)
	for _, n := range c.v.Nodes() {
		counts[n]++
	}
	for n, count := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(count), n.State, n.Level, n.Region)
	}
	ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(c.v.Running()))
}

// Serve serves h (a registry's Handler) at /metrics on ln until ctx is done, and Go's
// profiles at /debug/pprof/ (heap, goroutines, CPU): ln is the operator's own address, on
// loopback by default.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// Longer than a CPU profile takes (30 s by default).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
