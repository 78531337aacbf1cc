// Package receipt signs and checks receipts: the record of one job (which node ran which model
// for it, how many tokens went in and out, a hash of the output, when), signed by the node that
// ran it, then checked against what the coordinator relayed and countersigned by the
// coordinator for the buyer's request. A buyer who holds a receipt can check both signatures
// offline: the node claimed this work, and the coordinator vouched for it for that request.
//
// The node signs the bytes of its receipt's JSON, and a [Signed] receipt carries those bytes
// as they are, so that decoding and encoding it again can never break a signature. Only
// whitespace outside strings may change (a receipt may be pretty-printed); any other change,
// even one that means the same JSON, breaks the node's signature.
//
// Both signatures are ed25519 over messages that begin with a domain string naming what is
// signed, so that a signature made for one purpose is never valid for another. They are made
// in batches (merkle.go): a signer signs the root of a Merkle tree over a batch's receipts
// once, and each receipt carries its leaf's inclusion proof (NodeProof, CoordinatorProof). A
// receipt without a proof is of the first format, signed alone ("shareai-receipt-v1\n",
// "shareai-receipt-countersign-v1\n"): agents older than batches sign so, and receipts
// stored before them were countersigned so; both still verify.
//
// This package imports only the standard library and internal/protocol.
package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the version of the receipt format that this build signs and reads.
const Version = 1

// Receipt is a node's claim about a job it ran.
type Receipt struct {
	Version int    `json:"version"`
	JobID   string `json:"job_id"`
	NodeID  string `json:"node_id"`
	Model   string `json:"model"` // the name the node offered the model under

	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// UsageEstimated is true when the engine did not report usage and the agent counted it.
	UsageEstimated bool `json:"usage_estimated,omitempty"`

	// OutputSHA256 is the hex hash of the output as a [Hasher] computes it, and OutputBytes the
	// number of bytes it hashed.
	OutputSHA256 string `json:"output_sha256"`
	OutputBytes  int64  `json:"output_bytes"`
	// FinishReason is the job's end frame's: "stop", "length", "tool_calls", "cancelled"…
	FinishReason string `json:"finish_reason,omitempty"`

	// StartedAt is when the node received the job, EndedAt when it finished it, by the node's
	// clock, in UTC to the millisecond.
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// validate checks that a receipt says something: the fields are set and consistent.
func (r *Receipt) validate() error {
	switch {
	case r.JobID == "":
		return errors.New("the receipt has no job_id")
	case r.NodeID == "":
		return errors.New("the receipt has no node_id")
	case r.Model == "":
		return errors.New("the receipt has no model")
	case r.PromptTokens < 0 || r.CompletionTokens < 0 || r.OutputBytes < 0:
		return errors.New("the receipt counts a negative number of tokens or bytes")
	case !isSHA256(r.OutputSHA256):
		return fmt.Errorf("the receipt's output_sha256 %q is not 64 lowercase hex digits", r.OutputSHA256)
	case r.StartedAt.IsZero() || r.EndedAt.IsZero():
		return errors.New("the receipt has no started_at or ended_at")
	case r.EndedAt.Before(r.StartedAt):
		return errors.New("the receipt's job ended before it started")
	}
	return nil
}

// isSHA256 reports whether s is a SHA-256 digest in lowercase hex.
func isSHA256(s string) bool {
	if len(s) != hex.EncodedLen(sha256.Size) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Signed is a receipt with its signatures, as the coordinator stores it and hands it to the
// buyer. The coordinator's part is empty until it countersigns. Keys and signatures are
// base64 (standard, padded) in JSON.
type Signed struct {
	// Receipt is the JSON of the node's [Receipt]: the bytes the node signed.
	Receipt       json.RawMessage   `json:"receipt"`
	NodeKey       ed25519.PublicKey `json:"node_key"`
	NodeSignature []byte            `json:"node_signature"`
	// NodeProof places the receipt in the batch whose root NodeSignature signs; nil for a
	// receipt the node signed alone (NodeSignature is then over the receipt itself).
	NodeProof *Proof `json:"node_proof,omitempty"`

	// RequestID is the buyer's request the job served. The node never learns it: the
	// coordinator adds it when it countersigns.
	RequestID            string            `json:"request_id,omitempty"`
	CoordinatorKey       ed25519.PublicKey `json:"coordinator_key,omitempty"`
	CoordinatorSignature []byte            `json:"coordinator_signature,omitempty"`
	// CoordinatorProof places the receipt in the batch whose root CoordinatorSignature signs;
	// nil for one countersigned alone.
	CoordinatorProof *Proof    `json:"coordinator_proof,omitempty"`
	CountersignedAt  time.Time `json:"countersigned_at,omitzero"`
}

// UnmarshalJSON decodes a signed receipt as MarshalJSON encodes it, naming the field that is
// not base64 when one is not.
func (s *Signed) UnmarshalJSON(b []byte) error {
	if s.decodeFast(b) {
		return nil
	}
	return s.unmarshalJSON(b)
}

// unmarshalJSON is UnmarshalJSON through encoding/json.
func (s *Signed) unmarshalJSON(b []byte) error {
	var w struct {
		Receipt              json.RawMessage `json:"receipt"`
		NodeKey              string          `json:"node_key"`
		NodeSignature        string          `json:"node_signature"`
		NodeProof            *Proof          `json:"node_proof"`
		RequestID            string          `json:"request_id"`
		CoordinatorKey       string          `json:"coordinator_key"`
		CoordinatorSignature string          `json:"coordinator_signature"`
		CoordinatorProof     *Proof          `json:"coordinator_proof"`
		CountersignedAt      time.Time       `json:"countersigned_at"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var errs []error
	decode := func(field, v string) []byte {
		if v == "" {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not base64", field))
		}
		return b
	}
	*s = Signed{
		Receipt:              w.Receipt,
		NodeKey:              decode("node_key", w.NodeKey),
		NodeSignature:        decode("node_signature", w.NodeSignature),
		NodeProof:            w.NodeProof,
		RequestID:            w.RequestID,
		CoordinatorKey:       decode("coordinator_key", w.CoordinatorKey),
		CoordinatorSignature: decode("coordinator_signature", w.CoordinatorSignature),
		CoordinatorProof:     w.CoordinatorProof,
		CountersignedAt:      w.CountersignedAt,
	}
	return errors.Join(errs...)
}
