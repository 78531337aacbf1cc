package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// joined connects a hostile node serving models and registers it.
func joined(ctx context.Context, t *testing.T, env *testenv.Env, models ...string) *testenv.Hostile {
	t.Helper()
	h, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register(ctx, honestRegister(models...)); err != nil {
		t.Fatal(err)
	}
	return h
}

// answer answers the hostile node's jobs until ctx ends, the i-th with the frames of
// frames(job, i).
func answer(ctx context.Context, h *testenv.Hostile, frames func(job string, i int) []protocol.Frame) {
	for i := 0; ; i++ {
		job, err := h.NextJob(ctx)
		if err != nil {
			return
		}
		h.Send(ctx, frames(job.Job, i)...)
	}
}

// text is the frames of an answer of text, whose node claims completion tokens.
func text(job, text string, completion int) []protocol.Frame {
	return []protocol.Frame{{Type: protocol.TypeDelta, Job: job, Delta: &protocol.Delta{Text: text, Pieces: 1}},
		{Type: protocol.TypeEnd, Job: job, End: &protocol.End{FinishReason: "stop",
			Usage: protocol.Usage{PromptTokens: 12, CompletionTokens: completion}}}}
}

// ask sends a buyer's chat request for model, routed to node only, and returns the answer
// and the completion tokens billed.
func ask(t *testing.T, env *testenv.Env, model, node string) (string, int) {
	t.Helper()
	resp := env.Post("/chat/completions", `{"model":"`+model+`","provider":{"only":["`+node+`"]},"messages":[{"role":"user","content":"Tell me about Paris."}]}`)
	defer resp.Body.Close()
	var got struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || len(got.Choices) == 0 {
		t.Fatalf("request to %s: %d, %v", node, resp.StatusCode, err)
	}
	return got.Choices[0].Message.Content, got.Usage.CompletionTokens
}

// The inflation scenario, from a node of its own: 96 bytes of answer, 97 tokens
// claimed. Where the model's family is known, the buyer pays at most 10% more than the honest
// count; elsewhere, once the coordinator has learned the model's tokens per byte from the
// honest answers of verified nodes, at most 25% more; and the node is flagged every time.
func TestHostileNode_InflatedClaims(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const answerText = "Paris is the capital of France. It sits on the Seine, and three million people live in the city."
	if len(answerText) != 96 {
		t.Fatalf("the answer is %d bytes, want 96", len(answerText))
	}
	for _, tt := range []struct {
		model  string
		honest int     // the tokens an honest node of the model would claim
		most   float64 // the most the buyer may pay, as a multiple of it
	}{
		{"hostile/llama-3.1-8b", meter.Count(meter.Llama3, answerText), 1.10},
		{"hostile/mystery-7b", meter.Count(meter.Unknown, answerText), 1.25}, // a family the meter does not know
	} {
		t.Run(tt.model, func(t *testing.T) {
			if meter.FamilyOf(tt.model) == meter.Unknown {
				// A verified node serving the model answers honestly first: its tokenizer
				// makes as many tokens as cl100k's.
				honest := joined(ctx, t, env, tt.model)
				corpus := []string{
					"Rivers carry water from the mountains to the sea, shaping valleys over many thousands of years.",
					"A good answer is short, clear and honest about what it does not know, and it names its sources.",
					"Winter mornings in the city are quiet; the first trams run empty, and the bakeries open early.",
				}
				go answer(ctx, honest, func(job string, i int) []protocol.Frame {
					s := corpus[i%len(corpus)]
					return text(job, s, meter.Count(meter.Unknown, s))
				})
				for range 10 {
					ask(t, env, tt.model, honest.NodeID)
				}
			}
			h := joined(ctx, t, env, tt.model)
			go answer(ctx, h, func(job string, _ int) []protocol.Frame { return text(job, answerText, 97) })
			const requests = 3
			for range requests {
				got, billed := ask(t, env, tt.model, h.NodeID)
				if got != answerText {
					t.Fatalf("answer %q, want the node's %q", got, answerText)
				}
				t.Logf("honest %d tokens, claimed 97, billed %d", tt.honest, billed)
				if float64(billed) > tt.most*float64(tt.honest) {
					t.Errorf("billed %d completion tokens of an honest %d; want at most %.0f%% more", billed, tt.honest, 100*(tt.most-1))
				}
			}
			testenv.WaitFor(t, "every over-claim recorded", func() bool {
				n, err := env.Store.Node(ctx, h.NodeID)
				return err == nil && n.Overclaims == requests
			})
		})
	}
}

// A node that answers every check with the same text never gets verified, for a model other
// nodes serve (checked against their answers) or for one nobody does (reference-free checks),
// and gets no buyer traffic.
func TestHostileNode_GarbageNeverVerified(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Fleet.TrustNewNodes = false })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := joined(ctx, t, env, "sim/llama-3.1-8b", "hostile/new-model")
	go answer(ctx, h, func(job string, _ int) []protocol.Frame { return text(job, "hello world", 2) })
	testenv.WaitFor(t, "both models' onboarding checks to fail", func() bool {
		checks, _ := env.Store.NodeChecks(ctx, h.NodeID, 100)
		failed := map[string]int{}
		for _, c := range checks {
			if c.Passed {
				t.Fatalf("a garbage answer passed a check: %+v", c)
			}
			failed[c.Model]++
		}
		return failed["sim/llama-3.1-8b"] >= 3 && failed["hostile/new-model"] >= 3
	})
	if n, err := env.Store.Node(ctx, h.NodeID); err != nil || n.Level == store.LevelVerified || n.Level == store.LevelTrusted {
		t.Errorf("the garbage node's level: %v, %v; want never verified", n, err)
	}
	for _, m := range env.Coordinator().Fleet.Models() {
		if m.ID == "hostile/new-model" {
			t.Errorf("the garbage node's model is listed: %+v", m)
		}
	}
	resp := env.Post("/chat/completions", `{"model":"hostile/new-model","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("a buyer's request reached the garbage node")
	}
}

// One provider token cannot flood the fleet with nodes of throwaway keys: past its account's
// limit a node is refused before it is recorded, and a node of the account reconnecting is
// still taken.
func TestHostileNode_NodesPerAccount(t *testing.T) {
	const limit = 3
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Fleet.MaxNodesPerAccount = limit })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []*testenv.Hostile
	for range limit - 1 { // the network's own agent is the account's first node
		h, err := env.DialHostile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Register(ctx, honestRegister("hostile/many")); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, h)
	}
	h, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Register(ctx, honestRegister("hostile/many"))
	checkRefused(ctx, t, env, h, err, websocket.StatusPolicyViolation, "too many nodes for this provider: 3 connected")
	if _, err := env.Store.Node(ctx, h.NodeID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused node was recorded: %v", err)
	}
	// A node that leaves makes room.
	nodes[0].Close()
	f := env.Coordinator().Fleet
	testenv.WaitFor(t, "the node gone", func() bool { return f.Node(nodes[0].NodeID) == nil })
	again, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Register(ctx, honestRegister("hostile/many")); err != nil {
		t.Errorf("a node refused with room left: %v", err)
	}
}

// A node that answers a job with a "cancelled" end before anything else (only the coordinator
// cancels jobs) is a node refusing the request: the buyer gets an error, and the request's
// hold is closed at once, not left open until a restart.
func TestHostileNode_CancelledAtOnce(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := joined(ctx, t, env, "hostile/cancels")
	go answer(ctx, h, func(job string, _ int) []protocol.Frame {
		return []protocol.Frame{{Type: protocol.TypeEnd, Job: job, End: &protocol.End{FinishReason: protocol.FinishCancelled}}}
	})
	resp := env.Post("/chat/completions", `{"model":"hostile/cancels","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("status %d; want an error", resp.StatusCode)
	}
	testenv.WaitFor(t, "the hold closed", func() bool {
		hs, err := env.Store.OpenHolds(ctx)
		return err == nil && len(hs) == 0
	})
}

// A node whose tool calls are not OpenAI's failed the answer: a buyer of a whole answer gets
// an error that costs nothing, not an empty 200 billed as if the buyer had gone away.
func TestHostileNode_MalformedToolCalls(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := joined(ctx, t, env, "hostile/tools")
	go answer(ctx, h, func(job string, _ int) []protocol.Frame {
		bad := protocol.Frame{Type: protocol.TypeDelta, Job: job, Delta: &protocol.Delta{ToolCalls: json.RawMessage(`{"x":1}`), Pieces: 1}}
		delta, end := text(job, long(1000), 200)[0], text(job, "", 200)[1]
		return []protocol.Frame{delta, bad, end}
	})
	resp := env.Post("/chat/completions", `{"model":"hostile/tools","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("status %d; want an error", resp.StatusCode)
	}
	testenv.WaitFor(t, "the request settled", func() bool {
		u, err := env.Store.UsageByRequest(ctx, resp.Header.Get("X-Request-Id"))
		return err == nil && u != nil
	})
	u, _ := env.Store.UsageByRequest(ctx, resp.Header.Get("X-Request-Id"))
	if u.Cost != 0 || u.Outcome != store.OutcomeError {
		t.Errorf("usage %+v; want an error that cost nothing", u)
	}
}

// Handshakes at the same time count against the limit as they start: of many nodes of one
// account connecting at once, only as many as the limit allows join, and only they are
// recorded.
func TestHostileNode_NodesPerAccountConcurrent(t *testing.T) {
	const limit, tries = 4, 12
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Fleet.MaxNodesPerAccount = limit })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs := make([]*testenv.Hostile, tries)
	for i := range hs {
		h, err := env.DialHostile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	joined := make(chan bool, tries)
	for _, h := range hs {
		go func() {
			_, err := h.Register(ctx, honestRegister("hostile/many"))
			joined <- err == nil
		}()
	}
	n := 0
	for range tries {
		if <-joined {
			n++
		}
	}
	if n != limit-1 { // the network's own agent holds one place
		t.Errorf("%d nodes joined; want %d", n, limit-1)
	}
	recorded := 0
	for _, h := range hs {
		if _, err := env.Store.Node(ctx, h.NodeID); err == nil {
			recorded++
		}
	}
	if recorded != n {
		t.Errorf("%d nodes recorded; want the %d that joined", recorded, n)
	}
}
