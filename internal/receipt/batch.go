package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// MaxBatch bounds the receipts one signature covers.
const MaxBatch = 1024

// SignBatch signs a node's receipts of a batch with the node's key, under one signature over
// the root of their Merkle tree, each with its proof. Each receipt is checked and normalized
// as Sign does; errs[i] says why receipt i was refused (out[i] is then empty), and the rest
// are signed without it. At most MaxBatch receipts.
func SignBatch(key ed25519.PrivateKey, rs []Receipt) (out []Signed, errs []error) {
	out, errs = make([]Signed, len(rs)), make([]error, len(rs))
	if len(key) != ed25519.PrivateKeySize {
		err := fmt.Errorf("sign receipt: a %d-byte key is not an ed25519 private key", len(key))
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	if len(rs) > MaxBatch {
		panic(fmt.Sprintf("receipt: a batch of %d receipts, more than MaxBatch", len(rs)))
	}
	var (
		msgs   [][]byte
		at     []int // the index in rs of each message
		leaves []digest
	)
	for i, r := range rs {
		msg, err := encode(r)
		if err != nil {
			errs[i] = err
			continue
		}
		msgs, at = append(msgs, msg), append(at, i)
		leaves = append(leaves, nodeLeaf(msg))
	}
	if len(leaves) == 0 {
		return out, errs
	}
	t := newTree(leaves)
	pub := key.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(key, rootMessage(nodeRootDomain, t.root()))
	for k, i := range at {
		out[i] = Signed{Receipt: msgs[k], NodeKey: pub, NodeSignature: sig, NodeProof: t.proof(k)}
	}
	return out, errs
}

// Countersigning is a receipt of a batch a [Countersigner] countersigns.
type Countersigning struct {
	Signed    *Signed // the node's receipt; countersigned in place unless Err is set
	Saw       Expected
	RequestID string
	// Err says why the receipt was refused, after Countersign: its node signature fails, or
	// its claim differs from what the coordinator saw (*MismatchErrors, one per field).
	Err error
}

// Countersigner countersigns batches of receipts with a coordinator's key: one signature per
// batch. It remembers the node batches whose signatures it verified lately, so that a node's
// batch of many jobs costs one verification, whichever coordinator batches its receipts come
// in. Not safe for concurrent use: one goroutine (the core's notary) countersigns.
type Countersigner struct {
	key      ed25519.PrivateKey
	pub      ed25519.PublicKey
	verified map[verifiedRoot]struct{}
}

// verifiedRoot is a node batch's signature verified: the node key ‖ the root ‖ the signature.
type verifiedRoot [ed25519.PublicKeySize + sha256.Size + ed25519.SignatureSize]byte

// maxVerified bounds the node batches a Countersigner remembers as verified.
const maxVerified = 4096

// NewCountersigner returns a countersigner with a coordinator's key.
func NewCountersigner(key ed25519.PrivateKey) (*Countersigner, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("countersign: a %d-byte key is not an ed25519 private key", len(key))
	}
	return &Countersigner{key: key, pub: key.Public().(ed25519.PublicKey), verified: make(map[verifiedRoot]struct{})}, nil
}

// Countersign checks each receipt of batch (its node's signature, then its claim against what
// the coordinator saw), then countersigns those that pass, for their requests, at now, under
// one signature: each gets its proof. Those refused get their Err and are left unchanged. The
// error is for the batch as a whole (no time).
func (c *Countersigner) Countersign(batch []*Countersigning, now time.Time) error {
	if now.IsZero() {
		return errors.New("countersign: no time")
	}
	now = now.UTC().Truncate(time.Millisecond)
	var (
		ok     []*Countersigning
		out    []Signed
		leaves []digest
	)
	for _, b := range batch {
		if b.RequestID == "" {
			b.Err = errors.New("countersign: no request id")
			continue
		}
		r, msg, err := b.Signed.verifyNode(c.verify)
		if err != nil {
			b.Err = fmt.Errorf("countersign: %w", err)
			continue
		}
		if err := b.Saw.check(r, b.Signed.NodeKey); err != nil {
			b.Err = fmt.Errorf("countersign job %s: %w", b.Saw.JobID, err)
			continue
		}
		s := *b.Signed
		s.Receipt, s.RequestID, s.CoordinatorKey, s.CountersignedAt = msg, b.RequestID, c.pub, now
		ok, out = append(ok, b), append(out, s)
		leaves = append(leaves, coordinatorLeaf(msg, &s))
	}
	if len(ok) == 0 {
		return nil
	}
	t := newTree(leaves)
	sig := ed25519.Sign(c.key, rootMessage(coordinatorRootDomain, t.root()))
	for i, b := range ok {
		out[i].CoordinatorSignature, out[i].CoordinatorProof = sig, t.proof(i)
		*b.Signed = out[i]
	}
	return nil
}

// verify is ed25519.Verify that remembers the node batches' roots it verified; a receipt signed
// alone (the first format) is verified each time.
func (c *Countersigner) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	root, ok := bytes.CutPrefix(msg, []byte(nodeRootDomain))
	if !ok || len(root) != len(digest{}) || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return ed25519.Verify(pub, msg, sig)
	}
	var k verifiedRoot
	n := copy(k[:], pub)
	n += copy(k[n:], root)
	copy(k[n:], sig)
	if _, ok := c.verified[k]; ok {
		return true
	}
	if !ed25519.Verify(pub, msg, sig) {
		return false
	}
	if len(c.verified) >= maxVerified {
		clear(c.verified) // the batches of the last moments are what comes next
	}
	c.verified[k] = struct{}{}
	return true
}
