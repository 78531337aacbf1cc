package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shareai/shareai/internal/protocol"
)

// Agent holds a provider agent's metrics. Its methods are safe for concurrent use.
type Agent struct {
	jobs     *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
}

// AgentView is what the agent shows the metrics at each scrape.
type AgentView struct {
	Running   func() int
	Connected func() bool
	Paused    func() string // why the node takes no new jobs; "" when it does
	// Telemetry is the latest GPU reading, nil before the first; GPUs name them.
	Telemetry func() *protocol.Telemetry
	GPUs      []protocol.GPU
}

// NewAgent makes an agent's metrics and registers them, and the gauges read from v at each
// scrape, on r; nil r: unregistered.
func NewAgent(r *Registry, v AgentView) *Agent {
	m := &Agent{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_agent_jobs_total", Help: "Jobs the node ran, by model and outcome (ok, cancelled by the coordinator, error, refused: busy, paused or not offered).",
		}, []string{"model", "outcome"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shareai_engine_time_to_first_token_seconds", Help: "Time from a job's start to the engine's first piece of answer.",
			Buckets: ttftBuckets,
		}, []string{"model"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shareai_engine_duration_seconds", Help: "Time the engine took over a job, start to end.",
			Buckets: durationBuckets,
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shareai_engine_tokens_total", Help: "Tokens the engine reported, by model and direction (input, output).",
		}, []string{"model", "direction"}),
	}
	register(r, m.jobs, m.ttft, m.duration, m.tokens, &agentCollector{v})
	return m
}

// Job is a job the agent ran, as the metrics record it.
type Job struct {
	Model, Outcome          string
	TTFT, Duration          float64 // seconds; TTFT 0: no piece of answer
	PromptTokens, Completed int
}

// JobEnded records a job that ran on the engine.
func (m *Agent) JobEnded(j Job) {
	m.jobs.WithLabelValues(j.Model, j.Outcome).Inc()
	m.duration.WithLabelValues(j.Model).Observe(j.Duration)
	if j.TTFT > 0 {
		m.ttft.WithLabelValues(j.Model).Observe(j.TTFT)
	}
	if j.PromptTokens > 0 {
		m.tokens.WithLabelValues(j.Model, "input").Add(float64(j.PromptTokens))
	}
	if j.Completed > 0 {
		m.tokens.WithLabelValues(j.Model, "output").Add(float64(j.Completed))
	}
}

// JobRefused counts a job refused without running: the node was busy, paused, or does not
// offer the model (whose name is then not a label: it may be anything).
func (m *Agent) JobRefused(model string) { m.jobs.WithLabelValues(model, "refused").Inc() }

var (
	gpuLabels          = []string{"gpu", "uuid", "name"}
	agentRunningDesc   = prometheus.NewDesc("shareai_agent_jobs_running", "Jobs running on the node now.", nil, nil)
	agentConnectedDesc = prometheus.NewDesc("shareai_agent_connected", "1 while the agent is registered with the coordinator.", nil, nil)
	agentPausedDesc    = prometheus.NewDesc("shareai_agent_paused", "1 while the node takes no new jobs (outside its windows, paused by its owner, GPU in use, too hot).", nil, nil)
	gpuUtilDesc        = prometheus.NewDesc("shareai_gpu_utilization_ratio", "GPU utilization, 0 to 1, at the latest reading.", gpuLabels, nil)
	gpuMemUsedDesc     = prometheus.NewDesc("shareai_gpu_memory_used_bytes", "GPU memory in use at the latest reading.", gpuLabels, nil)
	gpuMemTotalDesc    = prometheus.NewDesc("shareai_gpu_memory_total_bytes", "GPU memory in all.", gpuLabels, nil)
	gpuTempDesc        = prometheus.NewDesc("shareai_gpu_temperature_celsius", "GPU temperature at the latest reading.", gpuLabels, nil)
	gpuPowerDesc       = prometheus.NewDesc("shareai_gpu_power_watts", "GPU power draw at the latest reading.", gpuLabels, nil)
	gpuPowerLimitDesc  = prometheus.NewDesc("shareai_gpu_power_limit_watts", "GPU power limit.", gpuLabels, nil)
	gpuProcessesDesc   = prometheus.NewDesc("shareai_gpu_foreign_processes", "Other programs' processes using the GPUs at the latest reading.", nil, nil)
)

type agentCollector struct{ v AgentView }

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{agentRunningDesc, agentConnectedDesc, agentPausedDesc, gpuUtilDesc, gpuMemUsedDesc,
		gpuMemTotalDesc, gpuTempDesc, gpuPowerDesc, gpuPowerLimitDesc, gpuProcessesDesc} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(agentRunningDesc, float64(c.v.Running()))
	gauge(agentConnectedDesc, boolValue(c.v.Connected()))
	gauge(agentPausedDesc, boolValue(c.v.Paused() != ""))
	t := c.v.Telemetry()
	if t == nil {
		return
	}
	for _, g := range t.GPUs {
		labels := []string{strconv.Itoa(g.Index), "", ""}
		for _, hw := range c.v.GPUs {
			if hw.Index == g.Index {
				labels[1], labels[2] = hw.UUID, hw.Name
			}
		}
		// A reading the tool could not make ([N/A]) is no sample rather than a false zero.
		if g.UtilizationPct != nil {
			gauge(gpuUtilDesc, *g.UtilizationPct/100, labels...)
		}
		if g.MemoryUsedMiB != nil {
			gauge(gpuMemUsedDesc, float64(*g.MemoryUsedMiB)*(1<<20), labels...)
		}
		if g.MemoryTotalMiB != nil {
			gauge(gpuMemTotalDesc, float64(*g.MemoryTotalMiB)*(1<<20), labels...)
		}
		if g.TemperatureC != nil {
			gauge(gpuTempDesc, *g.TemperatureC, labels...)
		}
		if g.PowerW != nil {
			gauge(gpuPowerDesc, *g.PowerW, labels...)
		}
		if g.PowerLimitW != nil {
			gauge(gpuPowerLimitDesc, *g.PowerLimitW, labels...)
		}
	}
	if t.Processes != nil {
		gauge(gpuProcessesDesc, float64(len(t.Processes)))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
