package receipt

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// MaxClockSkew is how far a node's clock may be from the coordinator's: the times a receipt
// claims must fall within the job's time at the coordinator, widened by it on both sides.
const MaxClockSkew = time.Minute

// Expected is what the coordinator saw of a job: [Countersign] checks a node's receipt against
// it, so that the coordinator vouches only for what it saw.
type Expected struct {
	JobID   string
	NodeID  string
	NodeKey ed25519.PublicKey // the key the node registered with
	Model   string            // the name the job asked the node for

	// Usage, Estimated and FinishReason are what the node's end frame reported.
	Usage        protocol.Usage
	Estimated    bool
	FinishReason string

	// OutputSHA256 and OutputBytes are a [Hasher]'s, fed the deltas received from the node.
	OutputSHA256 string
	OutputBytes  int64

	// Sent is when the coordinator sent the job, Ended when it received the job's end frame.
	Sent, Ended time.Time
}

// A MismatchError is a field of a node's receipt that differs from what the coordinator saw.
type MismatchError struct {
	Field string // the receipt's JSON field: "output_sha256"
	Claim string // what the receipt says, as Go syntax: `"ab12…"`, 42, true
	Saw   string // what the coordinator saw
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the receipt's %s is %s, but the coordinator saw %s", e.Field, e.Claim, e.Saw)
}

// check compares a node's receipt, signed with key, to what the coordinator saw. It returns a
// *MismatchError for each field that differs, joined.
func (e *Expected) check(r Receipt, key ed25519.PublicKey) error {
	if e.Sent.IsZero() || e.Ended.IsZero() {
		return errors.New("what the coordinator saw has no Sent or Ended time")
	}
	var errs []error
	if !key.Equal(e.NodeKey) {
		errs = append(errs, &MismatchError{"node_key", keyPrefix(key), "the node registered with " + keyPrefix(e.NodeKey)})
	}
	errs = mismatch(errs, "job_id", r.JobID, e.JobID)
	errs = mismatch(errs, "node_id", r.NodeID, e.NodeID)
	errs = mismatch(errs, "model", r.Model, e.Model)
	errs = mismatch(errs, "prompt_tokens", r.PromptTokens, e.Usage.PromptTokens)
	errs = mismatch(errs, "completion_tokens", r.CompletionTokens, e.Usage.CompletionTokens)
	errs = mismatch(errs, "usage_estimated", r.UsageEstimated, e.Estimated)
	errs = mismatch(errs, "finish_reason", r.FinishReason, e.FinishReason)
	errs = mismatch(errs, "output_sha256", r.OutputSHA256, e.OutputSHA256)
	errs = mismatch(errs, "output_bytes", r.OutputBytes, e.OutputBytes)
	if earliest := e.Sent.Add(-MaxClockSkew); r.StartedAt.Before(earliest) {
		errs = append(errs, &MismatchError{"started_at", r.StartedAt.Format(time.RFC3339Nano),
			fmt.Sprintf("the job sent at %s (allowing a clock off by %v)", e.Sent.UTC().Format(time.RFC3339Nano), MaxClockSkew)})
	}
	if latest := e.Ended.Add(MaxClockSkew); r.EndedAt.After(latest) {
		errs = append(errs, &MismatchError{"ended_at", r.EndedAt.Format(time.RFC3339Nano),
			fmt.Sprintf("the job end at %s (allowing a clock off by %v)", e.Ended.UTC().Format(time.RFC3339Nano), MaxClockSkew)})
	}
	return errors.Join(errs...)
}

// mismatch adds to errs a field whose claim is not what the coordinator saw: compared as
// they are, and formatted only when they differ.
func mismatch[T comparable](errs []error, field string, claim, saw T) []error {
	if claim == saw {
		return errs
	}
	return append(errs, &MismatchError{field, fmt.Sprintf("%#v", claim), fmt.Sprintf("%#v", saw)})
}
