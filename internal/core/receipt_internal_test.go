package core

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

var (
	testNodeKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	testCoordKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	testOtherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
)

// syncBuffer is a log's output, read while the notary may write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// honestJob returns a node's signed receipt of a job and what the coordinator saw of it, in
// agreement; edit, if not nil, changes what the node signs.
func honestJob(t *testing.T, jobID string, edit func(*receipt.Receipt)) jobReceipt {
	t.Helper()
	now := time.Now()
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: "Hello, world."})
	r := receipt.Receipt{JobID: jobID, NodeID: "node_a", Model: "m", PromptTokens: 5, CompletionTokens: 4,
		OutputSHA256: h.Sum(), OutputBytes: h.Len(), FinishReason: "stop", StartedAt: now.Add(-time.Second), EndedAt: now}
	saw := receipt.Expected{JobID: jobID, NodeID: "node_a", NodeKey: testNodeKey.Public().(ed25519.PublicKey), Model: "m",
		Usage: protocol.Usage{PromptTokens: 5, CompletionTokens: 4}, FinishReason: "stop", OutputSHA256: h.Sum(), OutputBytes: h.Len(),
		Sent: now.Add(-1100 * time.Millisecond), Ended: now.Add(time.Millisecond)}
	key := testNodeKey
	if edit != nil {
		edit(&r)
		if r.Model == "signed by another key" {
			key, r.Model = testOtherKey, "m"
		}
	}
	s, err := receipt.Sign(key, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return jobReceipt{signed: b, saw: saw}
}

// The notary countersigns and stores a receipt that agrees with what the coordinator saw, and
// refuses one that does not: not countersigned, not stored, logged with the node and what
// differs, and the node flagged once in the request's settlement. The bill settles after the
// receipts are stored, whatever they were.
func TestNotary_RefusesWhatTheCoordinatorDidNotSee(t *testing.T) {
	tampered := func(edit func(*receipt.Receipt)) func(t *testing.T) jobReceipt {
		return func(t *testing.T) jobReceipt { return honestJob(t, "job_bad", edit) }
	}
	tests := []struct {
		name string
		job  func(t *testing.T) jobReceipt
		want string // in the log's warning
	}{
		{"output the coordinator did not relay", tampered(func(r *receipt.Receipt) {
			var h receipt.Hasher
			h.Add(protocol.Delta{Text: "Hello, world!"})
			r.OutputSHA256 = h.Sum()
		}), "output_sha256"},
		{"more tokens than its end frame said", tampered(func(r *receipt.Receipt) { r.CompletionTokens = 400 }), "completion_tokens"},
		{"another job's id", tampered(func(r *receipt.Receipt) { r.JobID = "job_other" }), "job_id"},
		{"another model", tampered(func(r *receipt.Receipt) { r.Model = "bigger-model" }), "model"},
		{"signed by a key the node did not register", tampered(func(r *receipt.Receipt) { r.Model = "signed by another key" }), "node_key"},
		{"changed after signing", func(t *testing.T) jobReceipt {
			j := honestJob(t, "job_bad", nil)
			// The receipt travels as JSON inside the signed one: 4 tokens become 5, as the
			// coordinator saw too, but not as the node signed.
			j.signed = bytes.Replace(j.signed, []byte(`"completion_tokens":4`), []byte(`"completion_tokens":5`), 1)
			j.saw.Usage.CompletionTokens = 5
			return j
		}, "node's signature does not match"},
		{"not a receipt", func(t *testing.T) jobReceipt {
			j := honestJob(t, "job_bad", nil)
			j.signed = json.RawMessage(`{"receipt":{},"node_key":"%%%"}`)
			return j
		}, "not a signed receipt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := sqlstoretest.Open(t, "sqlite")
			var logs syncBuffer
			settled := make(chan *ledger.Bill, 1)
			n := newNotary(testCoordKey, db, func(b *ledger.Bill, u *store.Usage) { settled <- b }, slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
			defer n.close()

			bill := &ledger.Bill{Settlement: &store.Settlement{RequestID: "req_1"}}
			good, bad := honestJob(t, "job_good", nil), tt.job(t)
			n.queue(&notarized{requestID: "req_1", jobs: []jobReceipt{good, bad}, bill: bill, usage: &store.Usage{RequestID: "req_1"}})
			b := <-settled

			if !slices.Equal(b.Settlement.Flagged, []string{"node_a"}) {
				t.Errorf("flagged %v; want the node once", b.Settlement.Flagged)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "node=node_a") || !strings.Contains(l, "job_bad") || !strings.Contains(l, tt.want) {
				t.Errorf("log %q; want a warning naming the node, the job and %q", l, tt.want)
			}
			// The bill carries the receipts to its settlement's transaction: only the good one.
			carried := b.Settlement.Receipts
			if len(carried) != 1 || carried[0].JobID != "job_good" {
				t.Fatalf("the bill carries %+v; want only job_good's receipt", carried)
			}
			var s receipt.Signed
			if err := json.Unmarshal(carried[0].Signed, &s); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(testCoordKey.Public().(ed25519.PublicKey)); err != nil || s.RequestID != "req_1" {
				t.Errorf("the stored receipt: %v, request %q; want countersigned for req_1", err, s.RequestID)
			}
		})
	}
}

// Receipts queued after the notary closed are dropped, and their bills settle all the same:
// both bills are settled, only the first carrying its receipt.
func TestNotary_AfterClose(t *testing.T) {
	db := sqlstoretest.Open(t, "sqlite")
	var bills []*ledger.Bill
	n := newNotary(testCoordKey, db, func(b *ledger.Bill, _ *store.Usage) { bills = append(bills, b) }, slog.New(slog.DiscardHandler), time.Now)
	n.queue(&notarized{requestID: "req_1", jobs: []jobReceipt{honestJob(t, "job_1", nil)},
		bill: &ledger.Bill{Settlement: &store.Settlement{RequestID: "req_1"}}, usage: &store.Usage{}})
	n.close() // stores what is queued
	n.queue(&notarized{requestID: "req_2", jobs: []jobReceipt{honestJob(t, "job_2", nil)},
		bill: &ledger.Bill{Settlement: &store.Settlement{RequestID: "req_2"}}, usage: &store.Usage{}})
	n.close()
	if len(bills[0].Settlement.Receipts) != 1 || len(bills[1].Settlement.Receipts) != 0 {
		t.Errorf("bills carry %d and %d receipts; want 1 and 0", len(bills[0].Settlement.Receipts), len(bills[1].Settlement.Receipts))
	}
}

// A request whose jobs sent no receipt (agents older than receipts) settles at once, without
// waiting for the notary.
func TestKeepReceipts_NoneToKeep(t *testing.T) {
	settled := 0
	var logs syncBuffer
	n := newNotary(testCoordKey, nil, func(*ledger.Bill, *store.Usage) { settled++ }, slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
	n.close() // what is queued now is dropped with a warning: nothing must be
	c := &Core{notary: n}
	c.keepReceipts(context.Background(), &Request{ID: "req_1", ran: []*fleet.Job{{}, {}}, usage: &store.Usage{}}, &ledger.Bill{Settlement: &store.Settlement{}})
	c.keepReceipts(context.Background(), &Request{ID: "req_2"}, nil) // refused before any job: nothing at all
	if settled != 1 || logs.String() != "" {
		t.Errorf("%d bills settled, log %q; want 1, directly", settled, logs.String())
	}
}
