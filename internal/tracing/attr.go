package tracing

import "go.opentelemetry.io/otel/attribute"

// Span names. The coordinator's server span is named for its route ("POST
// /v1/chat/completions"), and an engine's span for its operation and model, as OpenTelemetry's
// GenAI conventions say ("chat llama3.1:8b"; see EngineSpan).
const (
	// SpanMatch is the coordinator's choice of a node for a request.
	SpanMatch = "match"
	// SpanJob is one job: on the coordinator, one attempt of a request on a node, from its
	// dispatch to its end (a client span); on the agent, the job's run, a child of the
	// coordinator's (a server span).
	SpanJob = "job"
)

// EngineSpan names the span of an engine's run: "chat MODEL" or "text_completion MODEL".
func EngineSpan(operation, model string) string { return operation + " " + model }

// Attribute keys. Where OpenTelemetry's semantic conventions have one (http.*, gen_ai.*), it is
// used; the network's own are under shareai.*.
const (
	HTTPMethod = attribute.Key("http.request.method")
	HTTPRoute  = attribute.Key("http.route")
	HTTPStatus = attribute.Key("http.response.status_code")

	GenAIOperation    = attribute.Key("gen_ai.operation.name") // chat, text_completion
	GenAIModel        = attribute.Key("gen_ai.request.model")
	GenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	GenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	GenAIFinish       = attribute.Key("gen_ai.response.finish_reasons")

	RequestID = attribute.Key("shareai.request.id")
	KeyID     = attribute.Key("shareai.key.id") // the API key's id, never the key
	Stream    = attribute.Key("shareai.stream")
	Outcome   = attribute.Key("shareai.outcome") // ok, cancelled, error, rejected
	CostNanos = attribute.Key("shareai.cost_nanos")
	HoldNanos = attribute.Key("shareai.hold_nanos")
	Jobs      = attribute.Key("shareai.jobs") // jobs a request took

	Candidates = attribute.Key("shareai.match.candidates") // offers of the model considered
	Reasons    = attribute.Key("shareai.match.reasons")    // why no node could take it

	NodeID       = attribute.Key("shareai.node.id")
	Region       = attribute.Key("shareai.node.region")
	JobID        = attribute.Key("shareai.job.id")
	Attempt      = attribute.Key("shareai.job.attempt") // 1 for a request's first job
	Continuation = attribute.Key("shareai.job.continuation")
	Failover     = attribute.Key("shareai.failover.reason") // why the job before failed
	Delivered    = attribute.Key("shareai.job.delivered_bytes")
	Engine       = attribute.Key("shareai.engine")
)
