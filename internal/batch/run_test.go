package batch_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// slowInput is n chat lines that each answer at length (max_tokens tokens, unless the
// simulated answer is shorter).
func slowInput(n, maxTokens int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"write a long story about line %d"}],"max_tokens":%d}}`+"\n",
			i, model, i, maxTokens)
	}
	return b.String()
}

// billing checks that the account paid exactly the batch's lines answered, each once: its
// debit is the sum of its usage records' costs, each answered line has one billed record, and
// no hold is left open.
func billing(t *testing.T, env *testenv.Env, account string, answered map[string]api.BatchOutput) {
	t.Helper()
	ctx := context.Background()
	us, err := env.Store.Usages(ctx, account, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var sum money.Nanos
	billed := map[string]bool{}
	for _, u := range us {
		sum += u.Cost
		if u.Cost > 0 {
			billed[u.RequestID] = true
		}
	}
	bal, err := env.Store.Balance(ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Spent != sum {
		t.Errorf("the account's debit is %s, its usage records cost %s", bal.Spent, sum)
	}
	for id, l := range answered {
		if !billed[l.Response.RequestID] {
			t.Errorf("line %s (request %s) answered, not billed", id, l.Response.RequestID)
		}
	}
	if len(billed) != len(answered) {
		t.Errorf("%d requests billed, %d lines answered: each answered line is billed once, nothing else", len(billed), len(answered))
	}
	if holds, err := env.Store.OpenHolds(ctx); err != nil || len(holds) != 0 {
		t.Errorf("open holds %v, %v", holds, err)
	}
}

// A batch cancelled mid-way starts no new line, lets those running finish, and bills only
// what ran: the lines of its output file.
func TestBatch_Cancel(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 4
		c.Sim.TokensPerSecond = 200
	})
	c, account := buyer(t, env, "canceller")
	const n = 40
	b := create(t, c, upload(t, c, slowInput(n, 40)).ID, "/v1/chat/completions")
	env.WaitFor("some lines answered", func() bool {
		got, err := c.Batches.Get(context.Background(), b.ID)
		return err == nil && got.RequestCounts.Completed >= 4
	})
	got, err := c.Batches.Cancel(context.Background(), b.ID)
	if err != nil || got.Status != openai.BatchStatusCancelling || got.CancellingAt == 0 {
		t.Fatalf("cancel: %+v, %v; want cancelling", got, err)
	}
	b = poll(t, c, b.ID, openai.BatchStatusCancelled)
	out := outputLines(t, c, b.OutputFileID)
	if len(out) == 0 || len(out) >= n || b.RequestCounts.Completed != int64(len(out)) {
		t.Errorf("%d lines in the output, %d completed, of %d: want some, not all", len(out), b.RequestCounts.Completed, n)
	}
	billing(t, env, account, out)
}

// A coordinator killed mid-batch and started again finishes the batch: every line answered
// once, and billed once.
func TestBatch_Restart(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 4
		c.Sim.TokensPerSecond = 200
	})
	c, account := buyer(t, env, "restarter")
	const n = 60
	b := create(t, c, upload(t, c, slowInput(n, 40)).ID, "/v1/chat/completions")
	env.WaitFor("some lines answered", func() bool {
		got, err := c.Batches.Get(context.Background(), b.ID)
		return err == nil && got.RequestCounts.Completed >= 8
	})
	env.StopReplica(0) // its lines in flight fail with their nodes' connections
	if err := env.StartCoordinator(); err != nil {
		t.Fatal(err)
	}
	b = poll(t, c, b.ID, openai.BatchStatusCompleted)
	out := outputLines(t, c, b.OutputFileID)
	if len(out) != n || b.RequestCounts.Completed != n {
		t.Fatalf("%d lines in the output, %d completed; want %d", len(out), b.RequestCounts.Completed, n)
	}
	billing(t, env, account, out)
}

// Live requests never wait behind batch lines: with every slot running a batch line, each live
// request preempts one (it is served, not refused), and the batch still completes with every
// line answered once.
func TestBatch_LiveFirst(t *testing.T) {
	const slots = 4
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = slots
		c.Sim.TokensPerSecond = 10
	})
	c, account := buyer(t, env, "batcher")
	const n = 8
	b := create(t, c, upload(t, c, slowInput(n, 100)).ID, "/v1/chat/completions")
	env.WaitFor("every slot running a batch line", func() bool { coord, _ := env.Running(); return coord == slots })
	live := env.Client()
	var wg sync.WaitGroup
	errs := make([]error, slots)
	for i := range slots {
		wg.Go(func() {
			_, errs[i] = live.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(2),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("live %d", i))}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("live request %d: %v", i, err)
		}
	}
	// A batch line takes 10 s (100 tokens at 10 a second): had a live request waited for one
	// to end, some line would be done by now. A live request gets a preempted batch line's
	// slot, or one another live request freed.
	if got, err := c.Batches.Get(context.Background(), b.ID); err != nil || got.RequestCounts.Completed != 0 {
		t.Errorf("live requests served after %+v batch lines completed (%v): they waited for batch lines to end", got.RequestCounts, err)
	}
	if got := len(env.Logs.Lines("preempted a job for a waiting request", `"batch":true`)); got < 1 {
		t.Errorf("no batch job preempted for %d live requests with every slot running a batch line", slots)
	}
	b = poll(t, c, b.ID, openai.BatchStatusCompleted)
	out := outputLines(t, c, b.OutputFileID)
	if len(out) != n {
		t.Fatalf("%d lines in the output, want %d", len(out), n)
	}
	for id, l := range out {
		if l.Response == nil || l.Response.StatusCode != http.StatusOK {
			t.Errorf("%s: %+v", id, l)
		}
	}
	billing(t, env, account, out)
}

// A node that refuses batch work (no_batch) gets no batch line.
func TestBatch_NoBatchNode(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) {
		c.EachAgent = func(i int, a *agent.Config) { a.NoBatch = i == 0 }
	})
	c, account := buyer(t, env, "picky")
	b := create(t, c, upload(t, c, input("/v1/chat/completions", 30)).ID, "/v1/chat/completions")
	poll(t, c, b.ID, openai.BatchStatusCompleted)
	refuser := env.Agents[0].NodeID()
	us, err := env.Store.Usages(context.Background(), account, 100)
	if err != nil || len(us) != 30 {
		t.Fatalf("usage %d, %v; want 30 records", len(us), err)
	}
	for _, u := range us {
		if u.NodeID == refuser || u.Outcome != store.OutcomeOK {
			t.Errorf("request %s: node %s, outcome %s; the node %s refuses batch work", u.RequestID, u.NodeID, u.Outcome, refuser)
		}
	}
}

// With several replicas a batch is run by one, its runner; killed mid-batch, a peer takes the
// batch over once the runner's lease expires and finishes it: every line answered once, and
// billed once.
func TestBatch_ReplicaTakeover(t *testing.T) {
	env := testenv.New(t, testenv.Replicas(2), testenv.Providers(2), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 4
		c.Sim.TokensPerSecond = 200
		c.Coordinator.Ledger.LeaseTTL = 500 * time.Millisecond
	})
	c, account := buyer(t, env, "replicated")
	const n = 60
	b := create(t, c, upload(t, c, slowInput(n, 40)).ID, "/v1/chat/completions")
	env.WaitFor("some lines answered", func() bool {
		got, err := c.Batches.Get(context.Background(), b.ID)
		return err == nil && got.RequestCounts.Completed >= 8
	})
	stored, err := env.Store.BatchByID(context.Background(), "", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	runner := slices.IndexFunc([]int{0, 1}, func(i int) bool { return env.ReplicaName(i) == stored.Runner })
	if runner < 0 {
		t.Fatalf("runner %q is no replica", stored.Runner)
	}
	env.StopReplica(runner)
	peer := openai.NewClient(append(c.Options, option.WithBaseURL(env.ReplicaURL(1-runner)+"/"))...)
	b = poll(t, peer, b.ID, openai.BatchStatusCompleted)
	out := outputLines(t, peer, b.OutputFileID)
	if len(out) != n {
		t.Fatalf("%d lines in the output, want %d", len(out), n)
	}
	if stored, err := env.Store.BatchByID(context.Background(), "", b.ID); err != nil || stored.Runner != env.ReplicaName(1-runner) {
		t.Errorf("runner %q, %v; want the peer %s", stored.Runner, err, env.ReplicaName(1-runner))
	}
	env.WaitFor("the dead replica's holds closed", func() bool {
		hs, err := env.Store.OpenHolds(context.Background())
		return err == nil && len(hs) == 0
	})
	billing(t, env, account, out)
}

// A batch not done within its 24-hour window expires: the lines that ran are in its output
// file and billed, the others in its error file as batch_expired, each custom_id once.
func TestBatch_Expired(t *testing.T) {
	var skew atomic.Int64 // how far the runner's clock is ahead
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 2
		c.Sim.TokensPerSecond = 200
		c.Coordinator.Batch.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	c, account := buyer(t, env, "late")
	const n = 40
	b := create(t, c, upload(t, c, slowInput(n, 40)).ID, "/v1/chat/completions")
	env.WaitFor("some lines answered", func() bool {
		got, err := c.Batches.Get(context.Background(), b.ID)
		return err == nil && got.RequestCounts.Completed >= 2
	})
	skew.Store(int64(25 * time.Hour))
	b = poll(t, c, b.ID, openai.BatchStatusExpired)
	if b.ExpiredAt == 0 {
		t.Error("no expired_at")
	}
	out, errs := outputLines(t, c, b.OutputFileID), outputLines(t, c, b.ErrorFileID)
	if len(out) == 0 || len(out)+len(errs) != n {
		t.Fatalf("%d answered and %d in the error file, want some answered and %d in all", len(out), len(errs), n)
	}
	for id, l := range errs {
		if _, twice := out[id]; twice || l.Error == nil || l.Error.Code != "batch_expired" || l.Response != nil {
			t.Errorf("%s: %+v; want batch_expired, and not answered", id, l)
		}
	}
	billing(t, env, account, out)
}
