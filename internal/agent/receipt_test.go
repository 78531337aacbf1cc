package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
)

var testKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// The node signs the domain string and the nonce, never bytes the coordinator chose alone, and
// refuses a nonce of any other size than 32 bytes.
func TestSignChallenge(t *testing.T) {
	pub := testKey.Public().(ed25519.PublicKey)
	nonce := bytes.Repeat([]byte{9}, protocol.NonceSize)
	sig, err := signChallenge(testKey, &protocol.Challenge{Nonce: nonce})
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(pub, append([]byte("shareai-register-v1\n"), nonce...), sig) {
		t.Error("the signature is not of \"shareai-register-v1\\n\" + nonce")
	}
	if ed25519.Verify(pub, nonce, sig) {
		t.Error("the signature verifies for the bare nonce")
	}
	for _, n := range []int{0, 16, 31, 33, 64, 400} {
		if _, err := signChallenge(testKey, &protocol.Challenge{Nonce: make([]byte, n)}); err == nil {
			t.Errorf("a %d-byte nonce was signed; want it refused", n)
		}
	}
}

// failing sends a few pieces, then fails.
type failing struct{ *sim.Engine }

func (failing) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	out.Delta(protocol.Delta{Text: "Hello, "})
	out.Flush()
	out.Delta(protocol.Delta{Reasoning: "hmm"})
	out.Delta(protocol.Delta{Text: "wor"}) // held, then sent with the end frame
	return engine.Result{}, errors.New("upstream reset")
}

// silent sends a piece, then says it waits, and waits to be cancelled.
type silent struct {
	*sim.Engine
	waiting chan struct{}
}

func (e silent) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	out.Delta(protocol.Delta{Text: "Hi"})
	out.Flush()
	out.Delta(protocol.Delta{Text: " there"}) // held: never sent
	close(e.waiting)
	<-ctx.Done()
	return engine.Result{}, ctx.Err()
}

// Every job that runs ends with a receipt, signed with the node key, whose output hash is of
// the deltas sent (those of the end frame too) and whose usage is the end frame's.
func TestRun_SignsReceipt(t *testing.T) {
	seed := int64(3)
	req := &protocol.Request{Kind: protocol.KindChat, Model: "sim/llama-3.1-8b", Messages: json.RawMessage(`[{"role":"user","content":"Hi"}]`), Seed: &seed, MaxTokens: 20}
	tests := []struct {
		name   string
		eng    engine.Engine
		finish string
	}{
		{"ok", sim.New(sim.Config{}), "length"},
		{"engine error", failing{sim.New(sim.Config{})}, ""},
		{"cancelled", silent{sim.New(sim.Config{}), make(chan struct{})}, protocol.FinishCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{cfg: Config{Engine: tt.eng, Now: time.Now}, log: slog.New(slog.DiscardHandler), key: testKey,
				metrics: metrics.NewAgent(nil, metrics.AgentView{})}
			c := &conn{a: a, out: make(chan protocol.Frame, 1024), done: make(chan struct{}), nodeID: "node_test"}
			ctx, cancel := context.WithCancelCause(context.Background())
			if s, ok := tt.eng.(silent); ok {
				go func() { <-s.waiting; cancel(nil) }()
			}
			started := time.Now()
			end, _ := c.run(ctx, "job_1", &job{cancel: cancel, credit: make(chan int, 4)}, req, started)
			cancel(nil)

			var h receipt.Hasher
			var text strings.Builder
			for len(c.out) > 0 {
				fr := <-c.out
				h.Add(*fr.Delta)
				text.WriteString(fr.Delta.Text)
			}
			if end.Delta != nil {
				h.Add(*end.Delta)
				text.WriteString(end.Delta.Text)
			}
			var s receipt.Signed
			if err := json.Unmarshal(end.End.Receipt, &s); err != nil {
				t.Fatalf("end frame's receipt %s: %v", end.End.Receipt, err)
			}
			r, err := s.VerifyNode()
			if err != nil {
				t.Fatal(err)
			}
			if !s.NodeKey.Equal(testKey.Public()) || r.JobID != "job_1" || r.NodeID != "node_test" || r.Model != req.Model {
				t.Errorf("receipt of job %q, node %q, model %q, key %x; want job_1, node_test, %s, the node key", r.JobID, r.NodeID, r.Model, s.NodeKey, req.Model)
			}
			e := end.End
			if r.FinishReason != tt.finish || e.FinishReason != tt.finish || r.PromptTokens != e.Usage.PromptTokens ||
				r.CompletionTokens != e.Usage.CompletionTokens || r.UsageEstimated != e.Estimated {
				t.Errorf("receipt claims %q, %d + %d (estimated %v); the end frame %q, %+v (estimated %v); want %q both",
					r.FinishReason, r.PromptTokens, r.CompletionTokens, r.UsageEstimated, e.FinishReason, e.Usage, e.Estimated, tt.finish)
			}
			if r.OutputSHA256 != h.Sum() || r.OutputBytes != h.Len() {
				t.Errorf("receipt's output %s (%d bytes); the deltas sent (%q) hash to %s (%d bytes)", r.OutputSHA256, r.OutputBytes, text.String(), h.Sum(), h.Len())
			}
			if r.StartedAt.Before(started.Truncate(time.Millisecond)) || r.EndedAt.Before(r.StartedAt) || r.EndedAt.After(time.Now()) {
				t.Errorf("receipt's job ran from %v to %v; it started at %v", r.StartedAt, r.EndedAt, started)
			}
		})
	}
}

// To a coordinator that takes batched receipts, a job's end frame says its receipt follows,
// and the receipts of jobs that end together come after their ends, in receipt frames, under
// one signature, each verifying on its own.
func TestSignReceipts_Batches(t *testing.T) {
	a := &Agent{cfg: Config{Now: time.Now}, log: slog.New(slog.DiscardHandler), key: testKey}
	c := &conn{a: a, out: make(chan protocol.Frame, 64), done: make(chan struct{}), nodeID: "node_test",
		batched: true, receipts: make(chan pendingReceipt, receipt.MaxBatch)}
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: "Hi"})
	now := time.Now()
	const n = 5
	for i := range n {
		id := fmt.Sprintf("job_%d", i)
		c.receipts <- pendingReceipt{id, receipt.Receipt{JobID: id, NodeID: "node_test", Model: "m", OutputSHA256: h.Sum(), OutputBytes: h.Len(),
			StartedAt: now, EndedAt: now}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.signReceipts(ctx) }()
	sigs := map[string]bool{}
	for i := range n {
		fr := <-c.out
		if fr.Type != protocol.TypeReceipt || fr.Job != fmt.Sprintf("job_%d", i) {
			t.Fatalf("frame %d: %s for %s; want job_%d's receipt", i, fr.Type, fr.Job, i)
		}
		var s receipt.Signed
		if err := json.Unmarshal(fr.Receipt, &s); err != nil {
			t.Fatal(err)
		}
		r, err := s.VerifyNode()
		if err != nil || r.JobID != fr.Job || s.NodeProof == nil || s.NodeProof.Size != n {
			t.Fatalf("receipt of %s: %+v, proof %+v, %v; want it verified in a batch of %d", fr.Job, r, s.NodeProof, err, n)
		}
		sigs[string(s.NodeSignature)] = true
	}
	if len(sigs) != 1 {
		t.Errorf("%d signatures for %d receipts that came together; want 1", len(sigs), n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
