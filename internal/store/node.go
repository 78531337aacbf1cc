package store

import (
	"context"
	"time"
)

// NodeSession is one connection of a node to the coordinator: online time, and how much of it
// the node was busy.
type NodeSession struct {
	ID          string // "ns_…"
	NodeID      string
	ConnectedAt time.Time
	LastSeen    time.Time     // the session's end once Ended
	Busy        time.Duration // time with at least one job running
	Ended       bool
}

// NodeDay counts the jobs a node ran on one UTC day, as the node reported them.
type NodeDay struct {
	NodeID           string
	Day              time.Time // midnight UTC
	Jobs             int       // jobs that ended, however they ended
	Failed           int       // jobs the node failed (it reported an error or vanished)
	PromptTokens     int64
	CompletionTokens int64
}

// TelemetrySample is a node's hardware readings over one minute, downsampled: per GPU the
// highest temperature, power and memory used, and the mean utilization.
type TelemetrySample struct {
	NodeID string
	At     time.Time // the minute's start
	Data   []byte    // JSON of protocol.Telemetry
}

// Kinds of node event.
const (
	EventHardwareChanged = "hardware_changed" // the hardware fingerprint changed
	// EventEngineError: a job failed with the node's own error words (its engine's), which
	// its provider reads here and buyers never see.
	EventEngineError = "engine_error"
)

// NodeEvent is something that happened to a node, kept for its provider and the operator.
type NodeEvent struct {
	NodeID string
	At     time.Time
	Kind   string
	Detail string // for a person to read
}

// Receipt is a job's receipt, signed by its node and countersigned by the coordinator.
type Receipt struct {
	RequestID string
	JobID     string
	NodeID    string
	Signed    []byte // JSON of receipt.Signed
	CreatedAt time.Time
}

// Activity is what the coordinator records of nodes' lives: connections, jobs, hardware
// telemetry, events and job receipts.
type Activity interface {
	// NodesOf lists a provider account's nodes, by name then id.
	NodesOf(ctx context.Context, accountID string) ([]*Node, error)

	// StartNodeSession records a node's new connection.
	StartNodeSession(ctx context.Context, s *NodeSession) error
	// UpdateNodeSessions records the sessions' LastSeen, Busy and Ended, in one transaction.
	// An ended session is final: later updates of it are ignored.
	UpdateNodeSessions(ctx context.Context, ss []*NodeSession) error
	// EndOpenSessions ends the sessions a crash left open, at their LastSeen; it returns how many.
	EndOpenSessions(ctx context.Context) (int, error)
	// EndSessionsSeenBefore ends the open sessions last seen before a time, at their LastSeen:
	// with several replicas, those a dead replica left (a live one records its sessions as
	// seen every record interval), never a live replica's. It returns how many.
	EndSessionsSeenBefore(ctx context.Context, before time.Time) (int, error)
	// NodeSessions lists a node's sessions that were online at or after since, oldest first.
	NodeSessions(ctx context.Context, nodeID string, since time.Time) ([]*NodeSession, error)

	// AddNodeDays adds the counts to the nodes' days, in one transaction.
	AddNodeDays(ctx context.Context, days []NodeDay) error
	// NodeDays lists a node's days from since's day on, oldest first.
	NodeDays(ctx context.Context, nodeID string, since time.Time) ([]NodeDay, error)

	// InsertTelemetry records samples; a sample of a node and minute already recorded is
	// replaced, as the summary of a minute grows until it ends.
	InsertTelemetry(ctx context.Context, samples []TelemetrySample) error
	// Telemetry lists a node's samples at or after since, oldest first.
	Telemetry(ctx context.Context, nodeID string, since time.Time) ([]TelemetrySample, error)
	// PruneTelemetry deletes the samples older than before; it returns how many.
	PruneTelemetry(ctx context.Context, before time.Time) (int, error)

	// AddNodeEvent records an event.
	AddNodeEvent(ctx context.Context, e *NodeEvent) error
	// NodeEvents lists a node's events, newest first, at most limit.
	NodeEvents(ctx context.Context, nodeID string, limit int) ([]*NodeEvent, error)

	// InsertReceipts stores receipts; a job's receipt stored already is kept.
	InsertReceipts(ctx context.Context, rs []*Receipt) error
	// Receipts lists a request's receipts, in the order of its jobs.
	Receipts(ctx context.Context, requestID string) ([]*Receipt, error)
}
