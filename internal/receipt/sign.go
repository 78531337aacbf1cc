package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors that say which signature failed to verify; Verify's and VerifyNode's errors wrap them.
var (
	ErrNodeSignature        = errors.New("the node's signature does not match the receipt: it was changed after the node signed it, or signed with another key")
	ErrNotCountersigned     = errors.New("the receipt is not countersigned by a coordinator")
	ErrUntrustedCoordinator = errors.New("the receipt is countersigned by a coordinator key other than the trusted one")
	ErrCoordinatorSignature = errors.New("the coordinator's signature does not match: the receipt, its node signature, request_id or countersigned_at was changed after the coordinator signed them")
)

// The domain strings that begin the signed messages.
const (
	nodeDomain        = "shareai-receipt-v1\n"
	coordinatorDomain = "shareai-receipt-countersign-v1\n"
)

// Sign signs a node's receipt with the node's key. It sets the receipt's version, and its times
// to UTC to the millisecond, and refuses a receipt that lacks a field or contradicts itself.
func Sign(key ed25519.PrivateKey, r Receipt) (Signed, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Signed{}, fmt.Errorf("sign receipt: a %d-byte key is not an ed25519 private key", len(key))
	}
	r.Version = Version
	r.StartedAt = r.StartedAt.UTC().Truncate(time.Millisecond)
	r.EndedAt = r.EndedAt.UTC().Truncate(time.Millisecond)
	if err := r.validate(); err != nil {
		return Signed{}, fmt.Errorf("sign receipt: %w", err)
	}
	b, err := json.Marshal(r) // compact, as verifiers compact it
	if err != nil {
		return Signed{}, fmt.Errorf("sign receipt: %w", err)
	}
	return Signed{
		Receipt:       b,
		NodeKey:       key.Public().(ed25519.PublicKey),
		NodeSignature: ed25519.Sign(key, nodeMessage(b)),
	}, nil
}

// Countersign checks the node's receipt in s (its signature, then its claim against what the
// coordinator saw of the job) and signs it with the coordinator's key for the buyer's request.
// A claim that differs from what the coordinator saw is refused with *MismatchErrors, one for
// each field that differs. s is changed only when Countersign succeeds.
func Countersign(key ed25519.PrivateKey, s *Signed, saw Expected, requestID string, now time.Time) error {
	switch {
	case len(key) != ed25519.PrivateKeySize:
		return fmt.Errorf("countersign: a %d-byte key is not an ed25519 private key", len(key))
	case requestID == "":
		return errors.New("countersign: no request id")
	case now.IsZero():
		return errors.New("countersign: no time")
	}
	r, msg, err := s.verifyNode()
	if err != nil {
		return fmt.Errorf("countersign: %w", err)
	}
	if err := saw.check(r, s.NodeKey); err != nil {
		return fmt.Errorf("countersign job %s: %w", saw.JobID, err)
	}
	c := *s
	c.Receipt = msg
	c.RequestID = requestID
	c.CoordinatorKey = key.Public().(ed25519.PublicKey)
	c.CountersignedAt = now.UTC().Truncate(time.Millisecond)
	c.CoordinatorSignature = ed25519.Sign(key, coordinatorMessage(msg, &c))
	*s = c
	return nil
}

// VerifyNode checks the node's signature and returns the receipt it signed. It checks nothing
// of the coordinator's part.
func (s *Signed) VerifyNode() (Receipt, error) {
	r, _, err := s.verifyNode()
	return r, err
}

// Verify checks the node's signature and the coordinator's countersignature, and returns the
// receipt. trusted is the coordinator key to trust; with nil, the key the receipt names is
// taken as it is, which proves only that whoever holds that key countersigned it.
func (s *Signed) Verify(trusted ed25519.PublicKey) (Receipt, error) {
	r, msg, err := s.verifyNode()
	if err != nil {
		return Receipt{}, err
	}
	switch {
	case len(s.CoordinatorKey) == 0 && len(s.CoordinatorSignature) == 0:
		return Receipt{}, ErrNotCountersigned
	case len(s.CoordinatorKey) != ed25519.PublicKeySize:
		return Receipt{}, fmt.Errorf("coordinator_key is %d bytes; an ed25519 public key is %d", len(s.CoordinatorKey), ed25519.PublicKeySize)
	case len(s.CoordinatorSignature) != ed25519.SignatureSize:
		return Receipt{}, fmt.Errorf("coordinator_signature is %d bytes; an ed25519 signature is %d", len(s.CoordinatorSignature), ed25519.SignatureSize)
	case s.RequestID == "":
		return Receipt{}, errors.New("the countersigned receipt has no request_id")
	case s.CountersignedAt.IsZero():
		return Receipt{}, errors.New("the countersigned receipt has no countersigned_at")
	case trusted != nil && !trusted.Equal(s.CoordinatorKey):
		return Receipt{}, fmt.Errorf("%w: it names key %s", ErrUntrustedCoordinator, keyPrefix(s.CoordinatorKey))
	case !ed25519.Verify(s.CoordinatorKey, coordinatorMessage(msg, s), s.CoordinatorSignature):
		return Receipt{}, ErrCoordinatorSignature
	}
	return r, nil
}

// keyPrefix shows a public key by the start of its base64, enough to tell keys apart.
func keyPrefix(k ed25519.PublicKey) string {
	s := base64.StdEncoding.EncodeToString(k)
	if len(s) > 12 {
		s = s[:12] + "…"
	}
	return s
}

// verifyNode checks the node's signature and returns the receipt and the bytes it signed.
func (s *Signed) verifyNode() (Receipt, []byte, error) {
	if len(s.NodeKey) != ed25519.PublicKeySize {
		return Receipt{}, nil, fmt.Errorf("node_key is %d bytes; an ed25519 public key is %d", len(s.NodeKey), ed25519.PublicKeySize)
	}
	if len(s.NodeSignature) != ed25519.SignatureSize {
		return Receipt{}, nil, fmt.Errorf("node_signature is %d bytes; an ed25519 signature is %d", len(s.NodeSignature), ed25519.SignatureSize)
	}
	// Compacting undoes pretty-printing and nothing else.
	var buf bytes.Buffer
	if err := json.Compact(&buf, s.Receipt); err != nil {
		return Receipt{}, nil, fmt.Errorf("the receipt is not JSON: %w", err)
	}
	msg := buf.Bytes()
	if !ed25519.Verify(s.NodeKey, nodeMessage(msg), s.NodeSignature) {
		return Receipt{}, nil, ErrNodeSignature
	}
	r, err := decode(msg)
	if err != nil {
		return Receipt{}, nil, err
	}
	return r, msg, nil
}

// decode decodes a signed receipt strictly: a field this build does not know is one it could not
// check.
func decode(b []byte) (Receipt, error) {
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Receipt{}, fmt.Errorf("the signed receipt does not decode: %w", err)
	}
	if v.Version != Version {
		return Receipt{}, fmt.Errorf("receipt version %d; this build of shareai reads version %d", v.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Receipt
	if err := dec.Decode(&r); err != nil {
		return Receipt{}, fmt.Errorf("the signed receipt does not decode: %w", err)
	}
	if err := r.validate(); err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// nodeMessage is what the node signs: its domain string, then the receipt's compact JSON.
func nodeMessage(receipt []byte) []byte {
	return append([]byte(nodeDomain), receipt...)
}

// coordinatorMessage is what the coordinator signs: its domain string; then the receipt's
// compact JSON, the node's key, the node's signature and the request id, each after its length
// (big-endian uint64); then countersigned_at in nanoseconds since 1970 UTC (big-endian int64).
func coordinatorMessage(receipt []byte, s *Signed) []byte {
	m := []byte(coordinatorDomain)
	for _, f := range [][]byte{receipt, s.NodeKey, s.NodeSignature, []byte(s.RequestID)} {
		m = binary.BigEndian.AppendUint64(m, uint64(len(f)))
		m = append(m, f...)
	}
	m = binary.BigEndian.AppendUint64(m, uint64(s.CountersignedAt.Unix()))
	return binary.BigEndian.AppendUint32(m, uint32(s.CountersignedAt.Nanosecond()))
}
