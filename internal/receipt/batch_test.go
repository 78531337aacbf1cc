package receipt_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/receipt"
)

// mth is RFC 9162's Merkle tree hash, written as the RFC defines it: the reference the
// level-by-level tree must agree with.
func mth(leaves [][32]byte) [32]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1) // the largest power of two below n
	return receipt.NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

func leaves(n int) [][32]byte {
	ls := make([][32]byte, n)
	for i := range ls {
		ls[i] = receipt.LeafHash(fmt.Appendf(nil, "leaf %d", i))
	}
	return ls
}

func TestMerkle_RootsAndProofs(t *testing.T) {
	for n := 1; n <= 70; n++ {
		ls := leaves(n)
		root := receipt.MerkleRoot(ls)
		if want := mth(ls); root != want {
			t.Fatalf("%d leaves: root differs from RFC 9162's", n)
		}
		for i := range n {
			p := receipt.MerkleProof(ls, i)
			got, err := p.RootFrom(ls[i])
			if err != nil || got != root {
				t.Fatalf("%d leaves, leaf %d: proof %+v leads to %x, %v; want the root", n, i, p, got, err)
			}
			if i > 0 {
				if got, err := p.RootFrom(ls[i-1]); err == nil && got == root {
					t.Fatalf("%d leaves: leaf %d's proof also proves leaf %d", n, i, i-1)
				}
			}
		}
	}
}

func TestMerkle_ProofsTamperedFail(t *testing.T) {
	ls := leaves(13)
	root := receipt.MerkleRoot(ls)
	good := receipt.MerkleProof(ls, 6)
	clone := func() *receipt.Proof {
		p := *good
		p.Path = nil
		for _, h := range good.Path {
			p.Path = append(p.Path, append([]byte(nil), h...))
		}
		return &p
	}
	tests := map[string]func(*receipt.Proof){
		"another index":   func(p *receipt.Proof) { p.Index = 7 },
		"index past size": func(p *receipt.Proof) { p.Index = 13 },
		// (A size of the same shape, 16, proves the same: the root is what is signed.)
		"another size":      func(p *receipt.Proof) { p.Size = 7 },
		"size 0":            func(p *receipt.Proof) { p.Size = 0 },
		"a hash changed":    func(p *receipt.Proof) { p.Path[1][0] ^= 1 },
		"a hash short":      func(p *receipt.Proof) { p.Path[0] = p.Path[0][:31] },
		"a hash left out":   func(p *receipt.Proof) { p.Path = p.Path[:len(p.Path)-1] },
		"a hash added":      func(p *receipt.Proof) { p.Path = append(p.Path, make([]byte, 32)) },
		"hashes swapped":    func(p *receipt.Proof) { p.Path[0], p.Path[1] = p.Path[1], p.Path[0] },
		"a path far longer": func(p *receipt.Proof) { p.Path = make([][]byte, 40) },
	}
	for name, tamper := range tests {
		t.Run(name, func(t *testing.T) {
			p := clone()
			tamper(p)
			if got, err := p.RootFrom(ls[6]); err == nil && got == root {
				t.Errorf("a tampered proof %+v still leads to the root", p)
			}
		})
	}
}

// batchOf returns n receipts of jobs of the node, and what the coordinator saw of each.
func batchOf(n int) ([]receipt.Receipt, []receipt.Expected) {
	var rs []receipt.Receipt
	var saws []receipt.Expected
	for i := range n {
		r, saw := job()
		r.JobID, saw.JobID = fmt.Sprintf("job_%d", i), fmt.Sprintf("job_%d", i)
		rs, saws = append(rs, r), append(saws, saw)
	}
	return rs, saws
}

// TestBatch_SignCountersignVerify signs a node's batch once, countersigns the receipts in one
// coordinator batch with one refused among them, and verifies each receipt on its own,
// offline, from its JSON.
func TestBatch_SignCountersignVerify(t *testing.T) {
	rs, saws := batchOf(5)
	signed := signBatch(t, rs)
	for i := range signed {
		if string(signed[i].NodeSignature) != string(signed[0].NodeSignature) || signed[i].NodeProof == nil {
			t.Fatalf("receipt %d: not under the batch's one signature with a proof", i)
		}
		if _, err := signed[i].VerifyNode(); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	saws[3].Usage.CompletionTokens++ // the node claims a token fewer than the coordinator saw
	c, err := receipt.NewCountersigner(coordinatorKey)
	if err != nil {
		t.Fatal(err)
	}
	var batch []*receipt.Countersigning
	for i := range signed {
		batch = append(batch, &receipt.Countersigning{Signed: &signed[i], Saw: saws[i], RequestID: fmt.Sprintf("req_%d", i)})
	}
	if err := c.Countersign(batch, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	var mm *receipt.MismatchError
	if !errors.As(batch[3].Err, &mm) || mm.Field != "completion_tokens" {
		t.Errorf("the over-claim was not refused for its completion_tokens: %v", batch[3].Err)
	}
	if signed[3].CoordinatorSignature != nil {
		t.Error("the refused receipt was countersigned")
	}
	for i, b := range batch {
		if i == 3 {
			continue
		}
		if b.Err != nil {
			t.Fatalf("receipt %d refused: %v", i, b.Err)
		}
		if string(signed[i].CoordinatorSignature) != string(signed[0].CoordinatorSignature) || signed[i].CoordinatorProof.Size != 4 {
			t.Errorf("receipt %d: not under the coordinator batch's one signature over 4 receipts: %+v", i, signed[i].CoordinatorProof)
		}
		js, _ := json.Marshal(signed[i])
		var back receipt.Signed
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		r, err := back.Verify(pub(coordinatorKey))
		if err != nil || r.JobID != rs[i].JobID || back.RequestID != fmt.Sprintf("req_%d", i) {
			t.Errorf("receipt %d from its JSON: %+v, %v", i, r, err)
		}
	}

	// Each receipt stands alone: another's proof, or another's request id, breaks it.
	swapped := signed[0]
	swapped.NodeProof = signed[1].NodeProof
	if _, err := swapped.Verify(pub(coordinatorKey)); !errors.Is(err, receipt.ErrNodeSignature) {
		t.Errorf("a receipt with another's node proof: %v, want ErrNodeSignature", err)
	}
	moved := signed[0]
	moved.RequestID = "req_1"
	if _, err := moved.Verify(pub(coordinatorKey)); !errors.Is(err, receipt.ErrCoordinatorSignature) {
		t.Errorf("a receipt moved to another request: %v, want ErrCoordinatorSignature", err)
	}
	stripped := signed[0]
	stripped.NodeProof = nil
	if _, err := stripped.Verify(pub(coordinatorKey)); !errors.Is(err, receipt.ErrNodeSignature) {
		t.Errorf("a batched receipt without its proof: %v, want ErrNodeSignature", err)
	}
	stripped = signed[0]
	stripped.CoordinatorProof = nil
	if _, err := stripped.Verify(pub(coordinatorKey)); !errors.Is(err, receipt.ErrCoordinatorSignature) {
		t.Errorf("a receipt without its coordinator proof: %v, want ErrCoordinatorSignature", err)
	}
}

// TestCountersigner_RemembersOnlyWhatVerified: a node batch verified once is not verified
// again, yet a forged signature over the same batch, or another node's key, is still refused.
func TestCountersigner_RemembersOnlyWhatVerified(t *testing.T) {
	rs, saws := batchOf(3)
	signed := signBatch(t, rs)
	c, _ := receipt.NewCountersigner(coordinatorKey)
	now := t0.Add(2 * time.Second)
	first := &receipt.Countersigning{Signed: &signed[0], Saw: saws[0], RequestID: "req_0"}
	if err := c.Countersign([]*receipt.Countersigning{first}, now); err != nil || first.Err != nil {
		t.Fatal(err, first.Err)
	}
	forged := signed[1]
	forged.NodeSignature = append([]byte(nil), forged.NodeSignature...)
	forged.NodeSignature[10] ^= 1
	other := signed[2]
	other.NodeKey = pub(otherKey)
	b := []*receipt.Countersigning{
		{Signed: &forged, Saw: saws[1], RequestID: "req_1"},
		{Signed: &other, Saw: saws[2], RequestID: "req_2"},
		{Signed: &signed[2], Saw: saws[2], RequestID: "req_2"},
	}
	if err := c.Countersign(b, now); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b[0].Err, receipt.ErrNodeSignature) || !errors.Is(b[1].Err, receipt.ErrNodeSignature) {
		t.Errorf("forged signature: %v; another key: %v; want both ErrNodeSignature", b[0].Err, b[1].Err)
	}
	if b[2].Err != nil {
		t.Errorf("the batch's genuine receipt refused: %v", b[2].Err)
	}
}

// signBatch signs receipts of nodeKey as one batch.
func signBatch(t testing.TB, rs []receipt.Receipt) []receipt.Signed {
	t.Helper()
	out, errs := receipt.SignBatch(nodeKey, rs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	return out
}

// TestSignBatch_RefusesOneSignsTheRest: a receipt that contradicts itself is refused alone;
// the others of its batch are signed, under one signature, and verify.
func TestSignBatch_RefusesOneSignsTheRest(t *testing.T) {
	rs, _ := batchOf(3)
	rs[1].EndedAt = rs[1].StartedAt.Add(-time.Second)
	out, errs := receipt.SignBatch(nodeKey, rs)
	if errs[1] == nil || out[1].NodeSignature != nil {
		t.Errorf("a receipt that ended before it started was signed: %+v", out[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || out[i].NodeProof == nil || out[i].NodeProof.Size != 2 {
			t.Fatalf("receipt %d: %v, proof %+v; want it signed in a batch of 2", i, errs[i], out[i].NodeProof)
		}
		if _, err := out[i].VerifyNode(); err != nil {
			t.Errorf("receipt %d: %v", i, err)
		}
	}
	if string(out[0].NodeSignature) != string(out[2].NodeSignature) {
		t.Error("the batch's receipts are under different signatures")
	}
	if _, errs := receipt.SignBatch(nodeKey[:10], rs[:1]); errs[0] == nil {
		t.Error("signed with a key that is not one")
	}
}

// TestVerify_ReceiptsOfTheFirstFormat: receipts signed and countersigned alone, as agents and
// coordinators did before batches, still verify, and a batch signature is never taken for one.
func TestVerify_ReceiptsOfTheFirstFormat(t *testing.T) {
	r, saw := job()
	s, err := receipt.Sign(nodeKey, r) // the first format: no proof
	if err != nil {
		t.Fatal(err)
	}
	alone := s
	receipt.CountersignAlone(coordinatorKey, &alone, "req_1", t0.Add(2*time.Second))
	if _, err := alone.Verify(pub(coordinatorKey)); err != nil {
		t.Errorf("a receipt countersigned alone: %v", err)
	}
	// A coordinator of this build takes an agent's receipt of the first format.
	if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(pub(coordinatorKey)); err != nil || s.NodeProof != nil || s.CoordinatorProof == nil {
		t.Errorf("first-format node receipt countersigned in a batch: %v (node proof %v, coordinator proof %v)", err, s.NodeProof, s.CoordinatorProof)
	}
	// A batch of one's root signature given a proof-less receipt is not a receipt's signature.
	b := signBatch(t, []receipt.Receipt{r})
	b[0].NodeProof = nil
	if _, err := b[0].VerifyNode(); !errors.Is(err, receipt.ErrNodeSignature) {
		t.Errorf("a root signature taken as a receipt's: %v", err)
	}
}

// FuzzVerify_HostileProofs: a receipt's proofs are a stranger's input; whatever they hold, Verify
// refuses or accepts without panicking, and accepts only what was signed.
func FuzzVerify_HostileProofs(f *testing.F) {
	rs, saws := batchOf(3)
	signed := signBatch(f, rs)
	if err := receipt.Countersign(coordinatorKey, &signed[1], saws[1], "req_1", t0.Add(2*time.Second)); err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(signed[1])
	f.Add(good)
	f.Add([]byte(`{"node_proof":{"index":18446744073709551615,"size":0,"path":[]}}`))
	f.Add([]byte(`{"node_proof":{"index":3,"size":4294967296,"path":["AA=="]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s receipt.Signed
		if json.Unmarshal(b, &s) != nil {
			return
		}
		r, err := s.Verify(pub(coordinatorKey))
		if err == nil && (r.JobID != "job_1" || s.RequestID != "req_1") {
			t.Errorf("verified a receipt never signed: %+v for %s", r, s.RequestID)
		}
	})
}
