package receipt

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxBatch bounds the receipts one signature covers.
const MaxBatch = 1024

// Signer signs a node's receipts in batches, by group commit: a job's receipt that comes while
// another batch is being signed waits for it, then goes in the next batch with every receipt
// that came meanwhile. One job at a time is signed alone, as fast as Sign; under load, one
// signature covers every receipt that came during the previous one. Safe for concurrent use.
type Signer struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey

	mu      sync.Mutex
	pending []*signing // receipts to sign in the next batch, in arrival order
	leading bool       // a caller is signing a batch; the next batch is handed to pending[0]
}

// signing is a receipt waiting in a Signer's batch.
type signing struct {
	msg  []byte // the receipt's compact JSON
	out  Signed
	done chan bool // true: sign the next batch; false: out is signed
}

// NewSigner returns a signer of receipts with a node's key.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign receipt: a %d-byte key is not an ed25519 private key", len(key))
	}
	return &Signer{key: key, pub: key.Public().(ed25519.PublicKey)}, nil
}

// Sign signs a node's receipt in a batch with those that come meanwhile, as Sign checks and
// normalizes it, and returns it with its proof.
func (s *Signer) Sign(r Receipt) (Signed, error) {
	msg, err := encode(r)
	if err != nil {
		return Signed{}, err
	}
	w := &signing{msg: msg, done: make(chan bool, 1)}
	s.mu.Lock()
	s.pending = append(s.pending, w)
	if s.leading {
		s.mu.Unlock()
		if lead := <-w.done; !lead {
			return w.out, nil
		}
	} else {
		s.leading = true
		s.mu.Unlock()
	}
	// This caller leads: it signs what waits (its own receipt first among them), then hands
	// the lead to the first receipt that came meanwhile, if any.
	s.mu.Lock()
	n := min(len(s.pending), MaxBatch)
	batch := s.pending[:n:n]
	s.pending = s.pending[n:]
	s.mu.Unlock()
	s.sign(batch, w)
	s.mu.Lock()
	if len(s.pending) > 0 {
		next := s.pending[0]
		s.mu.Unlock()
		next.done <- true
	} else {
		s.leading = false
		s.pending = nil
		s.mu.Unlock()
	}
	return w.out, nil
}

// sign signs a batch's root and gives each receipt its proof; all but self are told.
func (s *Signer) sign(batch []*signing, self *signing) {
	leaves := make([]digest, len(batch))
	for i, w := range batch {
		leaves[i] = leafHash([]byte(nodeLeafDomain), w.msg)
	}
	t := newTree(leaves)
	sig := ed25519.Sign(s.key, rootMessage(nodeRootDomain, t.root()))
	for i, w := range batch {
		w.out = Signed{Receipt: w.msg, NodeKey: s.pub, NodeSignature: sig, NodeProof: t.proof(i)}
		if w != self {
			w.done <- false
		}
	}
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
	verified map[string]struct{} // node key ‖ signed root message ‖ signature, verified
}

// maxVerified bounds the node batches a Countersigner remembers as verified.
const maxVerified = 4096

// NewCountersigner returns a countersigner with a coordinator's key.
func NewCountersigner(key ed25519.PrivateKey) (*Countersigner, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("countersign: a %d-byte key is not an ed25519 private key", len(key))
	}
	return &Countersigner{key: key, pub: key.Public().(ed25519.PublicKey), verified: make(map[string]struct{})}, nil
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
		leaves = append(leaves, leafHash([]byte(coordinatorLeafDomain), coordinatorMessage("", msg, &s)))
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

// verify is ed25519.Verify that remembers the node batches' roots it verified: a root message
// is short, a receipt signed alone (the first format) is not and is verified each time.
func (c *Countersigner) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(msg) > len(nodeRootDomain)+len(digest{}) {
		return ed25519.Verify(pub, msg, sig)
	}
	k := string(pub) + string(msg) + string(sig)
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
