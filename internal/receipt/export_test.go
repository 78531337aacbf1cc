package receipt

import (
	"crypto/ed25519"
	"time"
)

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

func LeafHash(data []byte) [32]byte {
	return leafHash("", func(b []byte) []byte { return append(b, data...) })
}

func NodeHash(l, r [32]byte) [32]byte { return nodeHash(l, r) }
