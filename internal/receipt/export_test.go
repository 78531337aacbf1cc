package receipt

import (
	"crypto/ed25519"
	"time"
)

// SignBatch signs receipts as one batch of a Signer, whatever the timing.
func SignBatch(key ed25519.PrivateKey, rs []Receipt) ([]Signed, error) {
	s, err := NewSigner(key)
	if err != nil {
		return nil, err
	}
	batch := make([]*signing, len(rs))
	for i, r := range rs {
		msg, err := encode(r)
		if err != nil {
			return nil, err
		}
		batch[i] = &signing{msg: msg, done: make(chan bool, 1)}
	}
	s.sign(batch, nil)
	out := make([]Signed, len(rs))
	for i, w := range batch {
		out[i] = w.out
	}
	return out, nil
}

// CountersignAlone countersigns a receipt in the first format, alone, as coordinators did
// before batches: receipts they stored must still verify.
func CountersignAlone(key ed25519.PrivateKey, s *Signed, requestID string, now time.Time) {
	s.RequestID, s.CoordinatorKey = requestID, key.Public().(ed25519.PublicKey)
	s.CountersignedAt = now.UTC().Truncate(time.Millisecond)
	s.CoordinatorSignature = ed25519.Sign(key, coordinatorMessage(coordinatorDomain, s.Receipt, s))
}

// MerkleRoot and MerkleProofRoot expose the tree to its tests.
func MerkleRoot(leaves [][32]byte) [32]byte { return newTree(leaves).root() }

func MerkleProof(leaves [][32]byte, i int) *Proof { return newTree(leaves).proof(i) }

func (p *Proof) RootFrom(leaf [32]byte) ([32]byte, error) { return p.rootFrom(leaf) }

func LeafHash(data []byte) [32]byte { return leafHash(data) }

func NodeHash(l, r [32]byte) [32]byte { return nodeHash(l, r) }
