package receipt_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/receipt"
)

// The receipts in testdata were signed by an earlier build (5946794), from the fixed keys and
// jobs of these tests: one of a batch of three, and one signed and countersigned alone. Buyers
// keep receipts for years, so every later build must verify them and sign the same jobs to the
// same bytes: how a leaf, a message or the JSON is put together may be rewritten, never
// changed.

func TestVerify_GoldenReceipts(t *testing.T) {
	for name, want := range map[string][]byte{"batch.json": goldenBatch(t), "alone.json": goldenAlone(t)} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + name)
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.TrimSpace(b)
			var s receipt.Signed
			if err := s.UnmarshalJSON(b); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(pub(coordinatorKey)); err != nil {
				t.Errorf("the stored receipt no longer verifies: %v", err)
			}
			if !bytes.Equal(want, b) {
				t.Errorf("signing the same job today gives\n%s\nnot the stored\n%s", want, b)
			}
		})
	}
}

// goldenBatch signs and countersigns three jobs in one batch each way, and returns the
// second's receipt.
func goldenBatch(t *testing.T) []byte {
	var (
		rs   []receipt.Receipt
		saws []receipt.Expected
	)
	for i := range 3 {
		r, saw := job()
		r.JobID, saw.JobID = fmt.Sprintf("job_%d", i+1), fmt.Sprintf("job_%d", i+1)
		rs, saws = append(rs, r), append(saws, saw)
	}
	signed, errs := receipt.SignBatch(nodeKey, rs)
	var cs []*receipt.Countersigning
	for i := range signed {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		cs = append(cs, &receipt.Countersigning{Signed: &signed[i], Saw: saws[i], RequestID: fmt.Sprintf("req_%d", i+1)})
	}
	c, err := receipt.NewCountersigner(coordinatorKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Countersign(cs, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	b, err := signed[1].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenAlone is a job's receipt signed and countersigned alone.
func goldenAlone(t *testing.T) []byte {
	s := countersigned(t)
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
