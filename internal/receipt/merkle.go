package receipt

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// Receipts are signed in batches: a signer (the node, then the coordinator) hashes each
// receipt of a batch into a leaf of a Merkle tree, signs the tree's root once, and gives
// each receipt the inclusion proof of its leaf. One signature then covers many jobs, and
// each receipt is still checked on its own, offline: its leaf, its proof, the root, the
// signature. The tree is RFC 9162's (Certificate Transparency v2, section 2.1): a leaf is
// SHA-256(0x00 ‖ data), an inner node SHA-256(0x01 ‖ left ‖ right), and a tree of n leaves
// splits at the largest power of two below n.

// digest is a SHA-256 digest: a leaf's, an inner node's or a root.
type digest = [sha256.Size]byte

// maxProofSize bounds the trees a proof may come from: 2³² leaves, 32 hashes of path.
const maxProofSize = 1 << 32

// Proof is the inclusion proof of a receipt's leaf in the tree whose root was signed: the
// leaf's index, the tree's size (its leaves) and the audit path, from the leaf up. In JSON
// the path's hashes are base64 (standard, padded).
type Proof struct {
	Index uint64   `json:"index"`
	Size  uint64   `json:"size"`
	Path  [][]byte `json:"path"`
}

// leafHash is the hash of a leaf whose data is domain, then what msg appends: written whole
// in a pooled buffer and hashed at once, which allocates nothing.
func leafHash(domain string, msg func([]byte) []byte) digest {
	b := leaves.Get().(*[]byte)
	*b = msg(append(append((*b)[:0], 0), domain...))
	d := sha256.Sum256(*b)
	if cap(*b) <= maxPooledLeaf {
		leaves.Put(b)
	}
	return d
}

// leaves are the buffers leafHash writes leaves' data in: a receipt each, a kilobyte or so.
var leaves = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledLeaf bounds the buffers leaves keeps.
const maxPooledLeaf = 64 << 10

// nodeHash is the hash of an inner node over its children.
func nodeHash(left, right digest) digest {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+sha256.Size:], right[:])
	return sha256.Sum256(b[:])
}

// tree is a Merkle tree over leaves, kept by level so that proofs are read, not recomputed.
// levels[0] are the leaves; a level of odd length carries its last hash up unpaired, which
// gives RFC 9162's shape.
type tree struct{ levels [][]digest }

// newTree builds the tree over leaves (at least one).
func newTree(leaves []digest) *tree {
	t := &tree{levels: [][]digest{leaves}}
	for level := leaves; len(level) > 1; {
		up := make([]digest, 0, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			up = append(up, nodeHash(level[i], level[i+1]))
		}
		if len(level)%2 == 1 {
			up = append(up, level[len(level)-1])
		}
		t.levels = append(t.levels, up)
		level = up
	}
	return t
}

// root is the tree's root.
func (t *tree) root() digest { return t.levels[len(t.levels)-1][0] }

// proof is the inclusion proof of leaf i.
func (t *tree) proof(i int) *Proof {
	p := &Proof{Index: uint64(i), Size: uint64(len(t.levels[0])), Path: make([][]byte, 0, len(t.levels)-1)} // [] in JSON, not null
	for _, level := range t.levels[:len(t.levels)-1] {
		if sib := i ^ 1; sib < len(level) {
			p.Path = append(p.Path, level[sib][:])
		} // else: the last hash of an odd level goes up unpaired
		i /= 2
	}
	return p
}

// rootFrom computes the root a proof leads to from leaf, as RFC 9162 section 2.1.3.2
// verifies an inclusion proof; an error when the proof cannot be one of a tree of its size.
func (p *Proof) rootFrom(leaf digest) (digest, error) {
	switch {
	case p.Size == 0 || p.Size > maxProofSize:
		return digest{}, fmt.Errorf("the proof's tree has %d leaves", p.Size)
	case p.Index >= p.Size:
		return digest{}, fmt.Errorf("the proof's leaf %d is not in a tree of %d", p.Index, p.Size)
	case len(p.Path) > bits.Len64(p.Size-1):
		return digest{}, fmt.Errorf("the proof's path has %d hashes; a tree of %d leaves needs at most %d", len(p.Path), p.Size, bits.Len64(p.Size-1))
	}
	fn, sn := p.Index, p.Size-1
	r := leaf
	for _, b := range p.Path {
		if len(b) != sha256.Size {
			return digest{}, fmt.Errorf("a hash of the proof's path is %d bytes, not %d", len(b), sha256.Size)
		}
		if sn == 0 {
			return digest{}, errors.New("the proof's path is longer than its tree is deep")
		}
		sib := digest(b)
		if fn&1 == 1 || fn == sn {
			r = nodeHash(sib, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, sib)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return digest{}, errors.New("the proof's path is shorter than its tree is deep")
	}
	return r, nil
}
