package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/testenv"
)

// sseAnswer reads a streamed chat answer: its text, chunk ids, finish reasons, whether it ended
// with [DONE], and any error event.
type sseAnswer struct {
	text    strings.Builder
	ids     map[string]bool
	finish  []string
	done    bool
	errText string
}

func readStream(t *testing.T, resp *http.Response, onChunk func(n int)) *sseAnswer {
	t.Helper()
	a := &sseAnswer{ids: map[string]bool{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			a.done = true
			continue
		}
		var ch struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", line, err)
		}
		if ch.Error != nil {
			a.errText = ch.Error.Message
			continue
		}
		a.ids[ch.ID] = true
		for _, c := range ch.Choices {
			a.text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				a.finish = append(a.finish, *c.FinishReason)
			}
		}
		n++
		if onChunk != nil {
			onChunk(n)
		}
	}
	return a
}

func streamReq(t *testing.T, env *testenv.Env, prompt string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "seed": 5,
		"stream_options": map[string]bool{"include_usage": true},
		"messages":       []map[string]string{{"role": "user", "content": prompt}}})
	resp := env.Post("/chat/completions", string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	return resp
}

func agentIndex(env *testenv.Env, node string) int {
	for i, a := range env.Agents {
		if a.NodeID() == node {
			return i
		}
	}
	return -1
}

// A node that vanishes mid-stream is replaced, and the buyer gets one unbroken answer: the same
// text as an undisturbed run, one id, one [DONE]; both nodes are paid for their parts.
func TestFailover_NodeDropsMidStream(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	const prompt = "Tell a long story about failover."
	resp := streamReq(t, env, prompt)
	defer resp.Body.Close()
	first := resp.Header.Get("X-Shareai-Node")
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.StopAgent(agentIndex(env, first)) // the node's machine goes away
		}
	})
	if want := want(t, prompt, 5); a.text.String() != want {
		t.Errorf("answer after failover:\n%q\nwant the undisturbed answer\n%q", a.text.String(), want)
	}
	if len(a.ids) != 1 || !a.done || a.errText != "" || len(a.finish) != 1 || a.finish[0] != "stop" {
		t.Errorf("ids %v, done %v, error %q, finish %v; want one id, [DONE], no error, one stop", a.ids, a.done, a.errText, a.finish)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
	prov, _ := env.Store.Account(context.Background(), "local-provider")
	earn, err := env.Store.Earnings(context.Background(), prov.ID, time.Now().Add(-time.Hour))
	if err != nil || len(earn) != 2 {
		t.Errorf("earnings %+v, %v; want both nodes paid for their parts", earn, err)
	}
}

// A node whose owner takes the GPU back mid-answer stops taking jobs, and when its drain
// deadline passes it hands the running job back: another node finishes the answer, and both
// are paid for their parts.
func TestFailover_NodeStepsAside(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 100}
		c.EachAgent = func(i int, c *agent.Config) {
			c.Drain, c.CheckEvery = 50*time.Millisecond, 20*time.Millisecond
		}
	})
	const prompt = "Tell a long story about a gamer taking the GPU back."
	resp := streamReq(t, env, prompt)
	defer resp.Body.Close()
	first := agentIndex(env, resp.Header.Get("X-Shareai-Node"))
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.Agents[first].Pause()
		}
	})
	if w := want(t, prompt, 5); a.text.String() != w {
		t.Errorf("answer after the node stepped aside:\n%q\nwant the undisturbed answer\n%q", a.text.String(), w)
	}
	if len(a.ids) != 1 || !a.done || a.errText != "" || len(a.finish) != 1 || a.finish[0] != "stop" {
		t.Errorf("ids %v, done %v, error %q, finish %v; want one id, [DONE], no error, one stop", a.ids, a.done, a.errText, a.finish)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
	prov, _ := env.Store.Account(context.Background(), "local-provider")
	earn, err := env.Store.Earnings(context.Background(), prov.ID, time.Now().Add(-time.Hour))
	if err != nil || len(earn) != 2 {
		t.Errorf("earnings %+v, %v; want both nodes paid for their parts", earn, err)
	}
}

// stalling is a simulated engine that stops sending after a few pieces, without failing.
type stalling struct{ *sim.Engine }

func (e stalling) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	n := 0
	return e.Engine.Run(ctx, req, engine.Emit(func(d protocol.Delta) error {
		if n++; n > 4 && !req.Continue {
			out.Flush()
			<-ctx.Done() // silent until cancelled
			return ctx.Err()
		}
		if err := out.Delta(d); err != nil {
			return err
		}
		return out.Flush()
	}))
}

// A node that stalls mid-stream is replaced once it has been silent too long.
func TestFailover_Stall(t *testing.T) {
	var which atomic.Int32
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Core.StallTimeout = 300 * time.Millisecond
		c.Sim = sim.Config{TokensPerSecond: 200}
		c.NewEngine = func(i int) (engine.Engine, error) {
			which.Add(1)
			return stalling{sim.New(sim.Config{TokensPerSecond: 200})}, nil
		}
	})
	const prompt = "A story that stalls."
	resp := streamReq(t, env, prompt)
	defer resp.Body.Close()
	a := readStream(t, resp, nil)
	if w := want(t, prompt, 5); a.text.String() != w || !a.done {
		t.Errorf("answer after a stall:\n%q (done %v)\nwant\n%q", a.text.String(), a.done, w)
	}
}

// toolThenDrop sends the start of a tool call, then fails.
type toolThenDrop struct{ *sim.Engine }

func (toolThenDrop) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	out.Delta(protocol.Delta{ToolCalls: json.RawMessage(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]`)})
	out.Flush()
	return engine.Result{}, errors.New("upstream connection reset")
}

// A stream carrying tool calls is not continued as text: it ends with an error, never as a
// complete answer.
func TestFailover_ToolCallStreamEndsWithError(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return toolThenDrop{sim.New(sim.Config{})}, nil
		}
	})
	resp := streamReq(t, env, "call a tool")
	defer resp.Body.Close()
	a := readStream(t, resp, nil)
	if a.done || a.errText == "" || len(a.finish) != 1 || a.finish[0] != "error" || !strings.Contains(a.errText, "tool calls") {
		t.Errorf("done %v, finish %v, error %q; want finish_reason error, an error event saying why, no [DONE]", a.done, a.finish, a.errText)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// When no node can continue, the stream ends with an error that says why.
func TestFailover_NoNodeLeft(t *testing.T) {
	// The continuation waits for the node to come back, up to the queue's deadline.
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 100}
		c.Coordinator.Core.Queue = queue.Config{Timeout: 300 * time.Millisecond}
	})
	resp := streamReq(t, env, "Tell a long story.")
	defer resp.Body.Close()
	a := readStream(t, resp, func(n int) {
		if n == 3 {
			env.StopAgent(0)
		}
	})
	if a.done || len(a.finish) != 1 || a.finish[0] != "error" || !strings.Contains(a.errText, "no node could continue") {
		t.Errorf("done %v, finish %v, error %q; want an error end that says no node could continue", a.done, a.finish, a.errText)
	}
}

// failsMidAnswer is a simulated engine whose first job of an answer fails after a few pieces;
// continuations run whole.
type failsMidAnswer struct{ *sim.Engine }

func (e failsMidAnswer) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	if req.Continue {
		return e.Engine.Run(ctx, req, out)
	}
	n := 0
	errCut := errors.New("engine crashed mid-answer")
	_, err := e.Engine.Run(ctx, req, engine.Emit(func(d protocol.Delta) error {
		if n++; n > 4 {
			return errCut
		}
		if err := out.Delta(d); err != nil {
			return err
		}
		return out.Flush()
	}))
	return engine.Result{}, err
}

// A non-streamed answer fails over the same way: the buyer just receives the whole answer.
func TestFailover_NonStreamed(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return failsMidAnswer{sim.New(sim.Config{})}, nil
		}
	})
	client := env.Client()
	const prompt = "A whole answer, please."
	got, err := client.Chat.Completions.New(context.Background(), chatParams(prompt, 5))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Choices[0]; c.Message.Content != want(t, prompt, 5) || c.FinishReason != "stop" {
		t.Errorf("answer %q (%s); want the whole undisturbed answer", c.Message.Content, c.FinishReason)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	prov, _ := env.Store.Account(context.Background(), "local-provider")
	if earn, _ := env.Store.Earnings(context.Background(), prov.ID, time.Now().Add(-time.Hour)); len(earn) != 2 {
		t.Errorf("earnings %+v; want both nodes paid for their parts", earn)
	}
	ledgerSumIsZero(t, env)
}

// A legacy completion fails over too, with its answer exact.
func TestFailover_Completion(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	resp := env.Post("/completions", `{"model":"sim/llama-3.1-8b","stream":true,"seed":9,"max_tokens":120,"prompt":"Once upon a time"}`)
	defer resp.Body.Close()
	first := resp.Header.Get("X-Shareai-Node")
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(line), &ch)
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
		}
		if n++; n == 4 {
			env.StopAgent(agentIndex(env, first))
		}
	}
	seed := int64(9)
	req := &protocol.Request{Kind: protocol.KindCompletion, Model: model, Prompt: "Once upon a time", Seed: &seed, MaxTokens: 120}
	var w strings.Builder
	sim.New(sim.Config{}).Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error { w.WriteString(d.Text); return nil }))
	if text.String() != w.String() || !done {
		t.Errorf("completion after failover %q (done %v)\nwant %q", text.String(), done, w.String())
	}
}
