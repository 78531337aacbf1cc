package gateway_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/testenv"
)

func receiptsPath(id string) string { return "generation/receipts?id=" + url.QueryEscape(id) }

// receiptKey fetches GET /v1/receipts/key, without an API key: it is public.
func receiptKey(t *testing.T, env *testenv.Env) ed25519.PublicKey {
	t.Helper()
	resp, err := http.Get(env.BaseURL() + "/receipts/key")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k gateway.ReceiptKey
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/receipts/key: %d, %v", resp.StatusCode, err)
	}
	b, err := base64.StdEncoding.DecodeString(k.Key)
	if err != nil || len(b) != ed25519.PublicKeySize || k.Algorithm != "ed25519" {
		t.Fatalf("GET /v1/receipts/key = %+v; want an ed25519 public key in base64", k)
	}
	return b
}

// verifiedReceipts fetches a request's receipts and checks each against the coordinator's key.
func verifiedReceipts(t *testing.T, env *testenv.Env, id string, key ed25519.PublicKey) ([]receipt.Signed, []receipt.Receipt) {
	t.Helper()
	var body struct {
		Receipts []receipt.Signed `json:"receipts"`
	}
	mustGet(t, env.Client(), receiptsPath(id), &body)
	var rs []receipt.Receipt
	for i, s := range body.Receipts {
		r, err := s.Verify(key)
		if err != nil {
			t.Fatalf("receipt %d does not verify: %v", i, err)
		}
		rs = append(rs, r)
	}
	return body.Receipts, rs
}

func outputHash(text string) (string, int64) {
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: text})
	return h.Sum(), h.Len()
}

// A completed request has one receipt, signed by the node that answered and countersigned by
// the coordinator for the request: it claims the tokens billed and the text the buyer got.
func TestReceipts_Completed(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	key := receiptKey(t, env)

	var resp *http.Response
	got, err := client.Chat.Completions.New(context.Background(), chatParams("Sign for this.", 7), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	reqID, node := resp.Header.Get(gateway.HeaderRequestID), resp.Header.Get(gateway.HeaderNode)
	rec := billed(t, env, reqID)
	for _, id := range []string{reqID, got.ID} {
		signed, rs := verifiedReceipts(t, env, id, key)
		if len(rs) != 1 {
			t.Fatalf("?id=%s: %d receipts; want 1", id, len(rs))
		}
		s, r := signed[0], rs[0]
		if s.RequestID != reqID || r.NodeID != node || r.Model != model || r.FinishReason != "stop" || !strings.HasPrefix(r.JobID, "job_") {
			t.Errorf("receipt for request %s, node %s, model %s, finish %q, job %q; want %s, %s, %s, stop, a job id",
				s.RequestID, r.NodeID, r.Model, r.FinishReason, r.JobID, reqID, node, model)
		}
		if r.PromptTokens != rec.PromptTokens || r.CompletionTokens != rec.CompletionTokens {
			t.Errorf("receipt claims %d + %d tokens; billed %d + %d", r.PromptTokens, r.CompletionTokens, rec.PromptTokens, rec.CompletionTokens)
		}
		if h, n := outputHash(got.Choices[0].Message.Content); r.OutputSHA256 != h || r.OutputBytes != n {
			t.Errorf("receipt's output %s (%d bytes); the answer's is %s (%d bytes)", r.OutputSHA256, r.OutputBytes, h, n)
		}
		if r.StartedAt.Before(rec.CreatedAt.Add(-time.Second)) || r.EndedAt.Before(r.StartedAt) || r.EndedAt.After(time.Now()) {
			t.Errorf("receipt's job ran from %v to %v; the request came at %v", r.StartedAt, r.EndedAt, rec.CreatedAt)
		}
	}

	// The receipts answer only the request's own account, and only with a key.
	_, err = get(t, env.Client(option.WithAPIKey("sk-wrong")), receiptsPath(reqID), new(any))
	assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")
	_, err = get(t, client, receiptsPath("req_doesnotexist"), new(any))
	assertAPIError(t, err, http.StatusNotFound, "not_found")
	_, err = get(t, client, "generation/receipts", new(any))
	assertAPIError(t, err, http.StatusBadRequest, "invalid_value")

	// The key is kept in the data directory: a restarted coordinator countersigns with it.
	if err := env.StopCoordinator(); err != nil {
		t.Fatal(err)
	}
	if err := env.StartCoordinator(); err != nil {
		t.Fatal(err)
	}
	if again := receiptKey(t, env); !again.Equal(key) {
		t.Errorf("after a restart the coordinator's key is %x; want %x, as before", again, key)
	}
}

// checkParts checks that the receipts' outputs are consecutive parts of the answer, in order,
// ending with its end, and returns the bytes of the answer before the first part.
func checkParts(t *testing.T, answer string, rs []receipt.Receipt) int {
	t.Helper()
	end := len(answer)
	for i := len(rs) - 1; i >= 0; i-- {
		start := end - int(rs[i].OutputBytes)
		if start < 0 {
			t.Fatalf("receipt %d claims %d bytes; only %d of the answer are left for it", i, rs[i].OutputBytes, end)
		}
		if h, _ := outputHash(answer[start:end]); rs[i].OutputSHA256 != h {
			t.Errorf("receipt %d's output is not the answer's bytes %d to %d, %q", i, start, end, answer[start:end])
		}
		end = start
	}
	return end
}

// A node that hands its job back mid-answer (its owner took the GPU) signs a receipt for its
// part; the node that finishes the answer signs one for the rest. Together they are the
// answer.
func TestReceipts_FailoverStepAside(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 100}
		c.EachAgent = func(i int, c *agent.Config) {
			c.Drain, c.CheckEvery = 50*time.Millisecond, 20*time.Millisecond
		}
	})
	key := receiptKey(t, env)
	const prompt = "Tell a long story about a gamer taking the GPU back."
	resp := streamReq(t, env, prompt)
	defer resp.Body.Close()
	first := resp.Header.Get(gateway.HeaderNode)
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.Agents[agentIndex(env, first)].Pause()
		}
	})
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, reqID)
	signed, rs := verifiedReceipts(t, env, reqID, key)
	if len(rs) != 2 {
		t.Fatalf("%d receipts; want 2, one per node", len(rs))
	}
	if rs[0].NodeID != first || rs[1].NodeID == first || rs[0].JobID == rs[1].JobID {
		t.Errorf("receipts by %s (job %s), then %s (job %s); want %s's first, then the other node's", rs[0].NodeID, rs[0].JobID, rs[1].NodeID, rs[1].JobID, first)
	}
	if rs[0].FinishReason != "" || rs[1].FinishReason != "stop" || signed[0].RequestID != reqID || signed[1].RequestID != reqID {
		t.Errorf("finish reasons %q, %q, requests %s, %s; want none (handed back) then stop, both %s", rs[0].FinishReason, rs[1].FinishReason, signed[0].RequestID, signed[1].RequestID, reqID)
	}
	if before := checkParts(t, a.text.String(), rs); before != 0 || rs[0].OutputBytes == 0 || rs[1].OutputBytes == 0 {
		t.Errorf("the parts leave %d bytes of the answer out; part sizes %d, %d", before, rs[0].OutputBytes, rs[1].OutputBytes)
	}
}

// A node that vanishes mid-answer cannot send its end frame, so it has no receipt (unless its
// end left just before its connection closed): the continuing node's receipt covers only the
// part it delivered.
func TestReceipts_FailoverNodeDrops(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	key := receiptKey(t, env)
	resp := streamReq(t, env, "Tell a long story about failover.")
	defer resp.Body.Close()
	first := resp.Header.Get(gateway.HeaderNode)
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.StopAgent(agentIndex(env, first))
		}
	})
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, reqID)
	_, rs := verifiedReceipts(t, env, reqID, key)
	if len(rs) == 0 || len(rs) > 2 || rs[len(rs)-1].NodeID == first {
		t.Fatalf("%d receipts (%+v); want the continuing node's last", len(rs), rs)
	}
	before := checkParts(t, a.text.String(), rs)
	if len(rs) == 1 && before == 0 {
		t.Errorf("the continuing node's receipt covers the whole answer; want only its part")
	}
	if len(rs) == 2 && before != 0 {
		t.Errorf("with both nodes' receipts, %d bytes of the answer are in neither", before)
	}
}

// A node that stalls is cancelled; its end frame, with its receipt, comes after the relay has
// moved on, and is kept when it has come by the time the request is billed.
func TestReceipts_FailoverStall(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Core.StallTimeout = 300 * time.Millisecond
		c.NewEngine = func(i int) (engine.Engine, error) {
			return stalling{sim.New(sim.Config{TokensPerSecond: 200})}, nil
		}
	})
	key := receiptKey(t, env)
	resp := streamReq(t, env, "A story that stalls.")
	defer resp.Body.Close()
	first := resp.Header.Get(gateway.HeaderNode)
	a := readStream(t, resp, nil)
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, reqID)
	_, rs := verifiedReceipts(t, env, reqID, key)
	if len(rs) == 0 || rs[len(rs)-1].NodeID == first {
		t.Fatalf("%d receipts; want the continuing node's last", len(rs))
	}
	if len(rs) == 2 && (rs[0].NodeID != first || rs[0].FinishReason != protocol.FinishCancelled) {
		t.Errorf("first receipt by %s, finish %q; want the stalled node's, cancelled", rs[0].NodeID, rs[0].FinishReason)
	}
	if before := checkParts(t, a.text.String(), rs); len(rs) == 2 && before != 0 {
		t.Errorf("with both nodes' receipts, %d bytes of the answer are in neither", before)
	}
	t.Logf("%d receipts", len(rs))
}

// The receipt of a streamed answer read by the raw API is what 'shareai receipt verify' reads:
// {"receipts": [...]}, each with both signatures in base64.
func TestReceipts_Shape(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	resp := env.Post("/completions", `{"model":"`+model+`","prompt":"Once upon a time","stream":true,"max_tokens":8}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, reqID)
	var body map[string][]map[string]json.RawMessage
	mustGet(t, env.Client(), receiptsPath("cmpl-"+strings.TrimPrefix(reqID, "req_")), &body)
	if len(body) != 1 || len(body["receipts"]) != 1 {
		t.Fatalf("body %v; want {\"receipts\": [one]}", body)
	}
	for _, f := range []string{"receipt", "node_key", "node_signature", "request_id", "coordinator_key", "coordinator_signature", "countersigned_at"} {
		if _, ok := body["receipts"][0][f]; !ok {
			t.Errorf("the receipt has no %s", f)
		}
	}
}

// Requests that end together have their receipts signed in batches, by the node and by the
// coordinator: each receipt still verifies on its own, with its proofs, against the
// coordinator's key.
func TestReceipts_Batched(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	key := receiptKey(t, env)
	const n = 40
	ids := make([]string, n)
	done := make(chan error, n)
	for i := range n {
		go func() {
			var resp *http.Response
			_, err := client.Chat.Completions.New(context.Background(), chatParams("Sign with the others.", 5), option.WithResponseInto(&resp))
			if err == nil {
				ids[i] = resp.Header.Get(gateway.HeaderRequestID)
			}
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	nodeSigs, coordinatorSigs := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		billed(t, env, id) // settled: its receipts are stored
		signed, rs := verifiedReceipts(t, env, id, key)
		if len(rs) != 1 {
			t.Fatalf("%s: %d receipts, want 1", id, len(rs))
		}
		s := signed[0]
		if s.NodeProof == nil || s.CoordinatorProof == nil || s.RequestID != id {
			t.Fatalf("%s: receipt with node proof %v, coordinator proof %v, request %s; want both proofs", id, s.NodeProof, s.CoordinatorProof, s.RequestID)
		}
		nodeSigs[string(s.NodeSignature)], coordinatorSigs[string(s.CoordinatorSignature)] = true, true
	}
	t.Logf("%d receipts under %d node signatures and %d coordinator signatures", n, len(nodeSigs), len(coordinatorSigs))
}
