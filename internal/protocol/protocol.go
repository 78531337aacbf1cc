// Package protocol defines the frames the coordinator and the provider agent exchange over the
// agent's outbound WebSocket connection.
//
// A WebSocket message carries one or more frames, each a JSON object followed by a newline
// (NDJSON), so a busy writer can batch frames into one message. Many jobs are multiplexed on
// one connection; each job has its own credit window (see [Window]) so that one slow buyer never
// stalls the other jobs on the same connection.
//
// The connection starts with a handshake:
//
//	coordinator → agent  challenge   {nonce}
//	agent → coordinator  register    {node key, signature of the nonce, region, hardware, offers}
//	coordinator → agent  registered  {node id, heartbeat interval}
//
// (the node signs [RegisterMessage]: a domain string, then the nonce), then, in any order:
//
//	agent → coordinator  heartbeat   {load}
//	coordinator → agent  job         {job id, request, trace context}
//	agent → coordinator  delta       {job id, text}           (at most Window unacknowledged)
//	coordinator → agent  credit      {job id, n}              (n more deltas may be sent)
//	coordinator → agent  cancel      {job id}
//	agent → coordinator  end         {job id, finish reason, usage | error, receipt}
//
// An end frame may carry the job's last delta too (outside the credit window), so a short answer
// travels in one frame, and the node's signed receipt of the job.
//
// Every job the coordinator sends is answered by exactly one end frame, also when it is
// cancelled: the coordinator frees the job's slot only then.
//
// This package imports only the standard library.
//
// # History
//
//   - Version 1 (2026-11-29): first version.
//   - Version 1, same day: offers carry the provider's ask (input_price, output_price). The
//     fields are optional: an agent that sends none offers its work for free. Offers may name
//     their quantization; heartbeats may list the models loaded (warm).
//   - Version 1, 2026-11-30: the register signature covers [RegisterMessage]
//     ("shareai-register-v1\n" + nonce), not the bare nonce, so that no coordinator can have a
//     node sign anything else with its key (such as a receipt); agents refuse nonces that are
//     not [NonceSize] bytes. This breaks agents built before: the coordinator refuses them and
//     says to upgrade (the version stays 1, as no such agent runs outside development). End
//     frames may carry the node's signed receipt (End.Receipt, optional: an end without one is
//     taken as before). Heartbeats may carry the node's GPU readings (telemetry) and why it
//     takes no new jobs (paused); registers may carry the node's windows and time zone, and its
//     hardware a fingerprint; a register may ask for a selftest, answered with a selftest
//     frame. All optional.
//   - Version 1, 2026-11-30, later: job frames may carry the W3C trace context of the coordinator's
//     span of the job (Frame.Trace), so that the agent's spans join the request's trace.
//     Optional; agents that do not trace ignore it, and each job of a request (a retry, a
//     continuation after failover) carries its own.
//   - Version 1, 2026-12-01: the coordinator enforces limits on what a node sends (see
//     [MaxMessageBytes] and the constants after it): the size of a message, the offers of a
//     node, the length of names, model ids, regions and other strings, the GPUs, processes and
//     loaded models of a heartbeat, the size of a delta, a receipt and an error. A node over a
//     limit is refused (the connection closes with status 1008, policy violation, or 1009,
//     message too big, and a short reason that names the limit), or has the field clamped.
//     A region must be [ValidRegion] (after lower-casing). Agents of this version keep within
//     them: they offer at most [MaxOffers] models, cut long text into several deltas and clip
//     error messages; agents before it that did not are refused with the reason.
//   - Version 1, 2026-12-02: offers may carry an ask schedule (Offer.AskSchedule): asks by
//     weekly time windows in a time zone, at most [MaxAskWindows]. Optional; the flat
//     input_price and output_price stay the ask outside every window, which coordinators
//     before it take all the time. A coordinator refuses a node whose schedule it cannot read.
//   - Version 1, 2026-12-02 (also): offers may refuse batch work (Offer.NoBatch). Optional: an offer
//     without it takes batch lines.
//   - Version 1, 2026-12-02 (later): a coordinator that takes receipts signed in batches says
//     so in Registered.BatchedReceipts. Only then does an agent send an end frame with
//     End.ReceiptFollows instead of its receipt, and the receipt after it, in a receipt frame
//     (Frame.Receipt), signed with those of the jobs that ended within a few milliseconds (a
//     Merkle root signed once, each receipt with its inclusion proof: receipt.SignBatch).
//     Agents before it, and agents registered with coordinators before it, put each receipt,
//     signed alone, in its end frame, which every coordinator takes.
package protocol

import (
	"encoding/json"
)

// Version is the protocol version this build speaks. An agent sends it in its register frame;
// the coordinator refuses versions it does not speak.
const Version = 1

// Window is the number of deltas of one job the agent may send before the coordinator has
// granted more credit. The coordinator buffers up to Window deltas per job, so its reader never
// blocks on a slow buyer.
const Window = 256

// Frame types.
const (
	TypeChallenge  = "challenge"
	TypeRegister   = "register"
	TypeRegistered = "registered"
	TypeHeartbeat  = "heartbeat"
	TypeJob        = "job"
	TypeDelta      = "delta"
	TypeCredit     = "credit"
	TypeCancel     = "cancel"
	TypeEnd        = "end"
	TypeReceipt    = "receipt"  // a job's signed receipt, after its end frame (End.ReceiptFollows)
	TypeSelftest   = "selftest" // the coordinator's results of a selftest, before it closes
)

// Frame is one protocol frame. Type says which of the other fields are set.
type Frame struct {
	Type string `json:"t"`
	Job  string `json:"job,omitempty"`

	Challenge  *Challenge  `json:"challenge,omitempty"`
	Register   *Register   `json:"register,omitempty"`
	Registered *Registered `json:"registered,omitempty"`
	Heartbeat  *Heartbeat  `json:"heartbeat,omitempty"`
	Request    *Request    `json:"request,omitempty"`
	Delta      *Delta      `json:"delta,omitempty"`
	Credit     int         `json:"credit,omitempty"`
	End        *End        `json:"end,omitempty"`
	Selftest   *Selftest   `json:"selftest,omitempty"`
	// Receipt is the node's signed receipt of job Job, on a receipt frame: the JSON of a
	// receipt.Signed, at most MaxReceiptBytes.
	Receipt json.RawMessage `json:"receipt,omitempty"`
	// Trace is the W3C trace context of the coordinator's span of a job, on job frames:
	// {"traceparent": "00-…", "tracestate": "…"}. The agent's span of the job is its child.
	// Absent when the coordinator does not trace; agents that do not trace ignore it.
	Trace map[string]string `json:"trace,omitempty"`
}

// Selftest is what the coordinator found when it checked a node that registered for a
// selftest: the onboarding checks, made as for a new node, with nothing recorded of them and
// no live traffic.
type Selftest struct {
	Checks []SelftestCheck `json:"checks"`
	Passed bool            `json:"passed"` // every check passed
}

// SelftestCheck is one check of a selftest.
type SelftestCheck struct {
	Model  string `json:"model"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Challenge is the first frame on a connection: the agent proves it holds its node key by
// signing [RegisterMessage] of Nonce.
type Challenge struct {
	Nonce []byte `json:"nonce"`
}

// NonceSize is the size of a challenge's nonce; an agent refuses any other.
const NonceSize = 32

// registerDomain begins the message a node signs to register, so that the signature is good
// for nothing else: not a receipt, nor anything another protocol would take.
const registerDomain = "shareai-register-v1\n"

// RegisterMessage is what a node signs with its key to answer a challenge: the domain string
// "shareai-register-v1\n", then the nonce.
func RegisterMessage(nonce []byte) []byte {
	return append([]byte(registerDomain), nonce...)
}

// Register introduces a node.
type Register struct {
	Version int `json:"version"`
	// NodeKey is the node's ed25519 public key; Signature signs RegisterMessage(nonce) with it.
	NodeKey   []byte `json:"node_key"`
	Signature []byte `json:"signature"`
	Name      string `json:"name,omitempty"`
	// Region is where the node is: an ISO country code such as "de", or any [ValidRegion].
	Region   string   `json:"region,omitempty"`
	Agent    string   `json:"agent,omitempty"` // agent build version
	Engine   string   `json:"engine"`          // "sim", "openai", ...
	Hardware Hardware `json:"hardware"`
	Offers   []Offer  `json:"offers"`
	// Windows are the node's weekly availability windows ("mon-fri 08:00-18:00") in the IANA
	// time zone Timezone; empty: always available.
	Windows  string `json:"windows,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Selftest asks the coordinator to check the node as it would a new one, send the
	// results in a selftest frame, and close: the node gets no live traffic.
	Selftest bool `json:"selftest,omitempty"`
}

// Hardware summarises a node's machine.
type Hardware struct {
	OS        string `json:"os,omitempty"`
	Arch      string `json:"arch,omitempty"`
	CPUs      int    `json:"cpus,omitempty"`
	CPU       string `json:"cpu,omitempty"` // the CPU or chip's name, e.g. "Apple M4 Pro"
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	// UnifiedMemory is true when the GPU shares the machine's memory (Apple Silicon, GB10):
	// a GPU's VRAMMiB is then what it may use of MemoryMiB.
	UnifiedMemory bool  `json:"unified_memory,omitempty"`
	GPUs          []GPU `json:"gpus,omitempty"`
	// Fingerprint identifies the hardware: a hash of the GPUs' UUIDs, names and driver. It
	// changes when a GPU or its driver does.
	Fingerprint string `json:"fingerprint,omitempty"`
	Simulated   bool   `json:"simulated,omitempty"`
}

// GPU is one accelerator, as discovered at start.
type GPU struct {
	Index   int    `json:"index"`
	Vendor  string `json:"vendor,omitempty"` // "nvidia", "amd", "apple"
	Name    string `json:"name"`
	UUID    string `json:"uuid,omitempty"`
	VRAMMiB int64  `json:"vram_mib,omitempty"` // 0 when the tool cannot tell
	Driver  string `json:"driver,omitempty"`
	CUDA    string `json:"cuda,omitempty"` // the CUDA version the NVIDIA driver supports
}

// Telemetry is a node's hardware reading, sent on heartbeats.
type Telemetry struct {
	GPUs []GPUStat `json:"gpus"`
	// Processes are the other processes using the GPUs: not the node's engine. Nil when the
	// tool cannot list them.
	Processes []GPUProcess `json:"processes,omitempty"`
}

// GPUStat is one GPU's reading. A nil field is one the tool could not read ([N/A]).
type GPUStat struct {
	Index          int      `json:"index"`
	MemoryUsedMiB  *int64   `json:"memory_used_mib,omitempty"`
	MemoryTotalMiB *int64   `json:"memory_total_mib,omitempty"`
	TemperatureC   *float64 `json:"temperature_c,omitempty"`
	PowerW         *float64 `json:"power_w,omitempty"`
	PowerLimitW    *float64 `json:"power_limit_w,omitempty"`
	UtilizationPct *float64 `json:"utilization_pct,omitempty"`
}

// GPUProcess is a process using a GPU.
type GPUProcess struct {
	PID     int    `json:"pid"`
	Name    string `json:"name"`
	UsedMiB int64  `json:"used_mib,omitempty"`
}

// Offer is one model a node serves, at the provider's ask.
type Offer struct {
	Model        string `json:"model"`
	Quantization string `json:"quantization,omitempty"` // e.g. Q4_K_M, fp8; "" when unknown
	// Continues is true when the node continues a partial assistant answer exactly, so it can
	// take over an answer another node left unfinished.
	Continues     bool `json:"continues,omitempty"`
	ContextLength int  `json:"context_length,omitempty"`
	MaxConcurrent int  `json:"max_concurrent"`
	// InputPrice and OutputPrice are the provider's ask, in nano-dollars per million input
	// and output tokens (150000000 is $0.15 per 1M tokens).
	InputPrice  int64 `json:"input_price"`
	OutputPrice int64 `json:"output_price"`
	// GoldSlots of the MaxConcurrent are kept for gold requests (service_tier priority):
	// silver and bronze take at most MaxConcurrent - GoldSlots.
	GoldSlots int `json:"gold_slots,omitempty"`
	// NoBronze refuses bronze requests (service_tier flex), which gold may preempt.
	NoBronze bool `json:"no_bronze,omitempty"`
	// NoBatch refuses batch work (the Batch API's lines), which any live request may preempt.
	NoBatch bool `json:"no_batch,omitempty"`
	// AskSchedule, when set, changes the ask by time windows (peak, off-peak): inside one of
	// its windows the offer asks that window's prices; outside every window, InputPrice and
	// OutputPrice, which a coordinator that knows no schedule takes all the time.
	AskSchedule *AskSchedule `json:"ask_schedule,omitempty"`
}

// AskSchedule is an offer's asks by weekly time windows, on the clock of an IANA time zone.
type AskSchedule struct {
	Timezone string `json:"timezone"` // such as Europe/Berlin
	// Windows in order of precedence: at a time inside several, the first one's prices hold.
	Windows []AskWindow `json:"windows"`
}

// AskWindow is one window of an ask schedule: when it is open (a weekly spec of package
// schedule, such as "mon-fri 08:00-18:00") and the ask inside it, in nano-dollars per million
// tokens as Offer's.
type AskWindow struct {
	Name        string `json:"name"` // "peak", "night": what reports call the ask
	When        string `json:"when"`
	InputPrice  int64  `json:"input_price"`
	OutputPrice int64  `json:"output_price"`
}

// Registered accepts a node.
type Registered struct {
	NodeID            string `json:"node_id"`
	HeartbeatInterval int64  `json:"heartbeat_interval_ms"`
	// BatchedReceipts says the coordinator takes receipts signed in batches, in receipt frames
	// after their end frames (End.ReceiptFollows). Absent: each receipt is signed alone, in its
	// end frame.
	BatchedReceipts bool `json:"batched_receipts,omitempty"`
}

// Heartbeat tells the coordinator the node is alive.
type Heartbeat struct {
	Running int `json:"running"` // jobs running on the node now
	// Loaded lists the offered models loaded in memory now (warm); nil when the engine cannot
	// tell, and then every offer counts as warm.
	Loaded []string `json:"loaded"` // null: cannot tell; []: none loaded
	// Telemetry is the latest hardware reading; nil when the node has none to give.
	Telemetry *Telemetry `json:"telemetry,omitempty"`
	// Paused says why the node takes no new jobs now, "" when it does: outside its
	// availability windows, paused by its owner, the GPU in use by another program, too hot.
	Paused string `json:"paused,omitempty"`
}

// Kinds of request.
const (
	KindChat       = "chat"
	KindCompletion = "completion"
)

// Request is the work of one job: an OpenAI chat or text completion request, already validated
// by the coordinator. Raw fields are passed to the engine as the buyer sent them.
type Request struct {
	Kind  string `json:"kind"`
	Model string `json:"model"` // the name the node offered

	Messages json.RawMessage `json:"messages,omitempty"` // chat: the buyer's messages, intact
	Prompt   string          `json:"prompt,omitempty"`   // completion

	MaxTokens   int      `json:"max_tokens,omitempty"` // 0: the engine's default
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// FrequencyPenalty and PresencePenalty are OpenAI's, in [-2, 2] (0: none), which vLLM,
	// llama.cpp's server and Ollama take by the same names. (Agents before them ignore them.)
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`

	// Continue marks a continuation: the last chat message is a partial assistant answer (or
	// the prompt ends with one) that another node left unfinished, to be continued exactly
	// from where it stops.
	Continue bool `json:"continue,omitempty"`
	// Partial is the partial answer of a continued completion (a continued chat carries it as
	// its trailing assistant message). In a continuation, MaxTokens counts the whole answer,
	// the partial one included.
	Partial string `json:"partial,omitempty"`

	Tools          json.RawMessage `json:"tools,omitempty"`
	ToolChoice     json.RawMessage `json:"tool_choice,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

// Delta is a piece of the answer.
type Delta struct {
	// Pieces is how many of the engine's pieces (about a token each) the delta merges, so the
	// coordinator can count what a node delivered even if the node never reports its usage.
	Pieces    int             `json:"n,omitempty"`
	Text      string          `json:"text,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
	ToolCalls json.RawMessage `json:"tool_calls,omitempty"` // OpenAI tool call deltas, as the engine sent them
}

// Usage counts a job's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// End finishes a job. Exactly one End is sent per job.
type End struct {
	// FinishReason is OpenAI's: "stop", "length", "tool_calls", "content_filter"; or
	// "cancelled" when the coordinator cancelled the job; empty when Error is set.
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        Usage  `json:"usage"`
	// Estimated is true when the engine did not report usage and the agent counted it.
	Estimated bool   `json:"estimated,omitempty"`
	Error     *Error `json:"error,omitempty"`
	// Receipt is the node's signed receipt of the job: the JSON of a receipt.Signed, which the
	// node signs for every job it ran (whatever its end) and the coordinator countersigns for
	// the buyer's request. Absent from agents older than receipts, and from a job refused at
	// once (it never ran).
	Receipt json.RawMessage `json:"receipt,omitempty"`
	// ReceiptFollows says the receipt is not in this end frame but comes in a receipt frame
	// after it, signed in a batch; only to a coordinator that said Registered.BatchedReceipts.
	ReceiptFollows bool `json:"receipt_follows,omitempty"`
}

// FinishCancelled is the finish reason of a job the coordinator cancelled.
const FinishCancelled = "cancelled"

// Error is why a job failed.
type Error struct {
	// Status is the engine's HTTP status when it refused the request (400 for a request the
	// engine found invalid), or 0 for a failure of the node itself.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }
