package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// Errors that say which signature failed to verify; Verify's and VerifyNode's errors wrap them.
var (
	ErrNodeSignature        = errors.New("the node's signature does not match the receipt: it was changed after the node signed it, or signed with another key")
	ErrNotCountersigned     = errors.New("the receipt is not countersigned by a coordinator")
	ErrUntrustedCoordinator = errors.New("the receipt is countersigned by a coordinator key other than the trusted one")
	ErrCoordinatorSignature = errors.New("the coordinator's signature does not match: the receipt, its node signature, request_id or countersigned_at was changed after the coordinator signed them")
)

// The domain strings that begin the signed messages: of a receipt signed alone (the first
// format), and of a batch's leaves and root.
const (
	nodeDomain            = "shareai-receipt-v1\n"
	coordinatorDomain     = "shareai-receipt-countersign-v1\n"
	nodeLeafDomain        = "shareai-receipt-leaf-v2\n"
	nodeRootDomain        = "shareai-receipt-root-v2\n"
	coordinatorLeafDomain = "shareai-receipt-countersign-leaf-v2\n"
	coordinatorRootDomain = "shareai-receipt-countersign-root-v2\n"
)

// Sign signs a node's receipt alone with the node's key, in the first format (no proof): what
// a node sends a coordinator that does not verify batches. It sets the receipt's version, and
// its times to UTC to the millisecond, and refuses a receipt that lacks a field or
// contradicts itself. A [Signer] signs receipts in batches.
func Sign(key ed25519.PrivateKey, r Receipt) (Signed, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Signed{}, fmt.Errorf("sign receipt: a %d-byte key is not an ed25519 private key", len(key))
	}
	b, err := encode(r)
	if err != nil {
		return Signed{}, err
	}
	return Signed{
		Receipt:       b,
		NodeKey:       key.Public().(ed25519.PublicKey),
		NodeSignature: ed25519.Sign(key, nodeMessage(b)),
	}, nil
}

// encode is the compact JSON a node signs of its receipt: its version set, its times in UTC
// to the millisecond, checked.
func encode(r Receipt) ([]byte, error) {
	r.Version = Version
	r.StartedAt = r.StartedAt.UTC().Truncate(time.Millisecond)
	r.EndedAt = r.EndedAt.UTC().Truncate(time.Millisecond)
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	b, err := r.appendJSON(make([]byte, 0, 320+len(r.JobID)+len(r.NodeID)+len(r.Model)+len(r.FinishReason)))
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	return b, nil
}

// appendJSON appends r as encoding/json's Marshal encodes it, byte for byte
// (TestReceipt_AppendJSONAsEncodingJSON): compact, as verifiers compact it. A node encodes a
// receipt for every job.
func (r *Receipt) appendJSON(b []byte) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"version":`...), int64(r.Version), 10)
	b = protocol.AppendString(append(b, `,"job_id":`...), r.JobID, true)
	b = protocol.AppendString(append(b, `,"node_id":`...), r.NodeID, true)
	b = protocol.AppendString(append(b, `,"model":`...), r.Model, true)
	b = strconv.AppendInt(append(b, `,"prompt_tokens":`...), int64(r.PromptTokens), 10)
	b = strconv.AppendInt(append(b, `,"completion_tokens":`...), int64(r.CompletionTokens), 10)
	if r.UsageEstimated {
		b = append(b, `,"usage_estimated":true`...)
	}
	b = protocol.AppendString(append(b, `,"output_sha256":`...), r.OutputSHA256, true)
	b = strconv.AppendInt(append(b, `,"output_bytes":`...), r.OutputBytes, 10)
	if r.FinishReason != "" {
		b = protocol.AppendString(append(b, `,"finish_reason":`...), r.FinishReason, true)
	}
	var err error
	if b, err = r.StartedAt.AppendText(append(b, `,"started_at":"`...)); err != nil {
		return nil, err
	}
	if b, err = r.EndedAt.AppendText(append(b, `","ended_at":"`...)); err != nil {
		return nil, err
	}
	return append(b, `"}`...), nil
}

// Countersign checks the node's receipt in s (its signature, then its claim against what the
// coordinator saw of the job) and signs it with the coordinator's key for the buyer's request:
// a batch of one of a [Countersigner]. A claim that differs from what the coordinator saw is
// refused with *MismatchErrors, one for each field that differs. s is changed only when
// Countersign succeeds.
func Countersign(key ed25519.PrivateKey, s *Signed, saw Expected, requestID string, now time.Time) error {
	c, err := NewCountersigner(key)
	if err != nil {
		return err
	}
	one := &Countersigning{Signed: s, Saw: saw, RequestID: requestID}
	if err := c.Countersign([]*Countersigning{one}, now); err != nil {
		return err
	}
	return one.Err
}

// VerifyNode checks the node's signature and returns the receipt it signed. It checks nothing
// of the coordinator's part.
func (s *Signed) VerifyNode() (Receipt, error) {
	r, _, err := s.verifyNode(ed25519.Verify)
	return r, err
}

// Verify checks the node's signature and the coordinator's countersignature, and returns the
// receipt. trusted is the coordinator key to trust; with nil, the key the receipt names is
// taken as it is, which proves only that whoever holds that key countersigned it.
func (s *Signed) Verify(trusted ed25519.PublicKey) (Receipt, error) {
	r, msg, err := s.verifyNode(ed25519.Verify)
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
	}
	signed := coordinatorMessage(coordinatorDomain, msg, s)
	if p := s.CoordinatorProof; p != nil {
		root, err := p.rootFrom(coordinatorLeaf(msg, s))
		if err != nil {
			return Receipt{}, fmt.Errorf("%w: coordinator_proof: %w", ErrCoordinatorSignature, err)
		}
		signed = rootMessage(coordinatorRootDomain, root)
	}
	if !ed25519.Verify(s.CoordinatorKey, signed, s.CoordinatorSignature) {
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

// verifyNode checks the node's signature with verify (ed25519.Verify, or a Countersigner's,
// which remembers the batches it verified) and returns the receipt and its compact JSON.
func (s *Signed) verifyNode(verify func(ed25519.PublicKey, []byte, []byte) bool) (Receipt, []byte, error) {
	if len(s.NodeKey) != ed25519.PublicKeySize {
		return Receipt{}, nil, fmt.Errorf("node_key is %d bytes; an ed25519 public key is %d", len(s.NodeKey), ed25519.PublicKeySize)
	}
	if len(s.NodeSignature) != ed25519.SignatureSize {
		return Receipt{}, nil, fmt.Errorf("node_signature is %d bytes; an ed25519 signature is %d", len(s.NodeSignature), ed25519.SignatureSize)
	}
	msg, err := compact(s.Receipt)
	if err != nil {
		return Receipt{}, nil, err
	}
	var signed []byte
	if s.NodeProof == nil {
		signed = nodeMessage(msg)
	} else {
		root, err := s.NodeProof.rootFrom(nodeLeaf(msg))
		if err != nil {
			return Receipt{}, nil, fmt.Errorf("%w: node_proof: %w", ErrNodeSignature, err)
		}
		signed = rootMessage(nodeRootDomain, root)
	}
	if !verify(s.NodeKey, signed, s.NodeSignature) {
		return Receipt{}, nil, ErrNodeSignature
	}
	r, err := decode(msg)
	if err != nil {
		return Receipt{}, nil, err
	}
	return r, msg, nil
}

// compact returns the receipt's JSON compacted, which undoes pretty-printing and nothing
// else: the bytes themselves when they hold no white space, as a node sends them.
func compact(receipt []byte) ([]byte, error) {
	if !bytes.ContainsAny(receipt, " \t\r\n") && json.Valid(receipt) {
		return receipt, nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(receipt)))
	if err := json.Compact(buf, receipt); err != nil {
		return nil, fmt.Errorf("the receipt is not JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// decode decodes a signed receipt strictly: a field this build does not know is one it could not
// check.
func decode(b []byte) (Receipt, error) {
	if r, ok := decodeFast(b); ok && r.Version == Version {
		if err := r.validate(); err != nil {
			return Receipt{}, err
		}
		return r, nil
	}
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&r)
	if err != nil || r.Version != Version {
		// A receipt of another version may have fields this one does not: say which version
		// it is rather than which field.
		var v struct {
			Version int `json:"version"`
		}
		if json.Unmarshal(b, &v) == nil && v.Version != Version {
			return Receipt{}, fmt.Errorf("receipt version %d; this build of shareai reads version %d", v.Version, Version)
		}
		return Receipt{}, fmt.Errorf("the signed receipt does not decode: %w", err) // err is not nil: else r.Version is v's
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

// rootMessage is what a signer signs of a batch: its domain string, then the tree's root.
func rootMessage(domain string, root digest) []byte {
	return append([]byte(domain), root[:]...)
}

// coordinatorMessage is what the coordinator vouches for: domain (for a receipt countersigned
// alone; "" for a batch's leaf, whose hash has a domain of its own); then the receipt's compact
// JSON, the node's key, the node's signature and the request id, each after its length
// (big-endian uint64); then countersigned_at, its seconds since 1970 UTC (big-endian uint64)
// and nanoseconds (big-endian uint32).
func coordinatorMessage(domain string, receipt []byte, s *Signed) []byte {
	return appendCoordinatorMessage([]byte(domain), receipt, s)
}

// appendCoordinatorMessage appends coordinatorMessage's fields, after its domain, to m.
func appendCoordinatorMessage(m, receipt []byte, s *Signed) []byte {
	m = appendField(m, receipt)
	m = appendField(m, s.NodeKey)
	m = appendField(m, s.NodeSignature)
	m = appendField(m, s.RequestID)
	m = binary.BigEndian.AppendUint64(m, uint64(s.CountersignedAt.Unix()))
	return binary.BigEndian.AppendUint32(m, uint32(s.CountersignedAt.Nanosecond()))
}

// appendField appends f after its length.
func appendField[F ~string | ~[]byte](m []byte, f F) []byte {
	return append(binary.BigEndian.AppendUint64(m, uint64(len(f))), f...)
}

// nodeLeaf is the leaf of a node's batch for a receipt's compact JSON.
func nodeLeaf(receipt []byte) digest {
	return leafHash(nodeLeafDomain, func(b []byte) []byte { return append(b, receipt...) })
}

// coordinatorLeaf is the leaf of a coordinator's batch for s, whose compact JSON is receipt.
func coordinatorLeaf(receipt []byte, s *Signed) digest {
	return leafHash(coordinatorLeafDomain, func(b []byte) []byte { return appendCoordinatorMessage(b, receipt, s) })
}
