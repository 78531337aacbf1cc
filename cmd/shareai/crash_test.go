package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/testenv"
)

// TestMain lets a test run this binary as `shareai`, in a process of its own that it can kill.
func TestMain(m *testing.M) {
	if os.Getenv("SHAREAI_TEST_AS_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // as main does
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// startCoordinator runs `shareai coordinator` in a child process.
func startCoordinator(t *testing.T, addr, dataDir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "coordinator", "--addr", addr, "--data-dir", dataDir, "--log-level", "warn", "--trust-new-nodes", "--metrics-addr", "")
	cmd.Env = append(os.Environ(), "SHAREAI_TEST_AS_MAIN=1")
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testenv.WaitFor(t, "the coordinator to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return cmd
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// crashNet is a coordinator in a child process, on a store of its own, with a buyer, a
// provider and one simulated node connected to it.
type crashNet struct {
	dir, addr, apiKey string
	st                *sqlstore.DB
	buyer, prov       *store.Account
	coord             *exec.Cmd
}

func newCrashNet(t *testing.T, tokensPerSecond float64) *crashNet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	n := &crashNet{dir: t.TempDir()}
	var err error
	n.st, err = sqlstore.Open(ctx, filepath.Join(n.dir, "coordinator.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.st.Close() })
	n.buyer, err = localnet.EnsureAccount(ctx, n.st, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	n.prov, _ = localnet.EnsureAccount(ctx, n.st, "gpu-owner")
	apiKey, k := store.NewKey(n.buyer.ID, store.KeyBuyer, "", time.Now())
	token, pk := store.NewKey(n.prov.ID, store.KeyProvider, "", time.Now())
	for _, key := range []*store.Key{k, pk} {
		if err := n.st.CreateKey(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	n.apiKey = apiKey
	if err := n.st.Deposit(ctx, n.buyer.ID, money.USD, "start", time.Now()); err != nil {
		t.Fatal(err)
	}
	n.addr = freeAddr(t)
	n.coord = startCoordinator(t, n.addr, n.dir)
	a, err := agent.New(agent.Config{
		Coordinator: "http://" + n.addr, Token: token, DataDir: t.TempDir(), MaxConcurrent: 16,
		Engine: sim.New(sim.Config{TokensPerSecond: tokensPerSecond}), InputPrice: 50_000_000, OutputPrice: 100_000_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	t.Cleanup(stopAgent)
	go a.Run(actx)
	<-a.Ready()
	return n
}

// longPrompts returns n prompts whose simulated answers hold at least 150 tokens.
func longPrompts(n int) []string {
	var ps []string
	for i := 0; len(ps) < n; i++ {
		p := fmt.Sprintf("story %d", i)
		msgs := fmt.Sprintf(`[{"role":"user","content":%q}]`, p)
		if len(strings.Fields(sim.New(sim.Config{}).Answer(&protocol.Request{Kind: protocol.KindChat, Model: "sim/llama-3.1-8b", Messages: []byte(msgs)}))) >= 150 {
			ps = append(ps, p)
		}
	}
	return ps
}

// post starts a chat request; the caller reads and closes the response. A request not
// streamed returns once it is answered.
func (n *crashNet) post(t *testing.T, prompt string, stream bool) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(n.request(prompt, stream))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("request %q: %d", prompt, resp.StatusCode)
	}
	return resp
}

func (n *crashNet) request(prompt string, stream bool) *http.Request {
	body := fmt.Sprintf(`{"model":"sim/llama-3.1-8b","stream":%v,"messages":[{"role":"user","content":%q}]}`, stream, prompt)
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+n.apiKey)
	return req
}

// A coordinator killed with answers in flight leaves their holds open; the next start closes
// each of them once: a request whose delivery was checkpointed is billed for that, one without
// a checkpoint (a non-streamed answer, of which its buyer got nothing) is voided, and the
// ledger still balances.
func TestCrash_OpenHoldsClosedOnceAtRestart(t *testing.T) {
	n := newCrashNet(t, 5)
	ctx := context.Background()
	const streams, whole = 3, 2
	prompts := longPrompts(streams + whole)
	for _, p := range prompts[:streams] {
		bufio.NewReader(n.post(t, p, true).Body).ReadString('\n') // the stream has started
	}
	for _, p := range prompts[streams:] {
		go func() { // its answer comes only whole, at its end: never, here
			if resp, err := http.DefaultClient.Do(n.request(p, false)); err == nil {
				resp.Body.Close()
			}
		}()
	}
	testenv.WaitFor(t, "the streams' checkpoints and the holds of the others", func() bool {
		hs, _ := n.st.OpenHolds(ctx)
		cps := 0
		for _, h := range hs {
			if h.Checkpoint != nil && h.Checkpoint.Debit > 0 {
				cps++
			}
		}
		return len(hs) == streams+whole && cps == streams
	})
	n.coord.Process.Kill() // no shutdown, no settlement
	n.coord.Wait()
	holds, err := n.st.OpenHolds(ctx) // as the crash left them
	if err != nil {
		t.Fatal(err)
	}
	n.coord = startCoordinator(t, n.addr, n.dir)

	var billed money.Nanos
	for _, h := range holds {
		if h.Checkpoint != nil {
			billed += h.Checkpoint.Debit
		}
	}
	if holds, _ := n.st.OpenHolds(ctx); len(holds) != 0 {
		t.Errorf("%d holds still open after the restart", len(holds))
	}
	b, _ := n.st.Balance(ctx, n.buyer.ID)
	if b.Held != 0 || b.Spent != billed || b.Credits != money.USD-billed || billed == 0 {
		t.Errorf("buyer after the restart %+v; want nothing held and exactly the checkpointed %s spent", b, billed)
	}
	for _, h := range holds {
		u, err := n.st.UsageByRequest(ctx, h.RequestID)
		want := money.Nanos(0)
		if h.Checkpoint != nil {
			want = h.Checkpoint.Debit
		}
		if err != nil || u.Outcome != store.OutcomeError || u.Cost != want {
			t.Errorf("request %s after the restart: %+v, %v; want a record of the failure costing %s", h.RequestID, u, err, want)
		}
	}
	if p, _ := n.st.Balance(ctx, n.prov.ID); p.Pending == 0 || p.Pending >= billed {
		t.Errorf("provider pending %s after the restart; want its share of the %s delivered", p.Pending, billed)
	}
	if sum, _ := n.st.LedgerSum(ctx); sum != 0 {
		t.Errorf("ledger sum %d, want 0", sum)
	}
}

// received is what a buyer has read of a streamed answer: its text, as the sim makes it a
// token a word.
type received struct {
	id     string
	mu     sync.Mutex
	tokens int
	done   chan struct{}
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tokens
}

func (n *crashNet) stream(t *testing.T, prompt string) *received {
	resp := n.post(t, prompt, true)
	r := &received{id: resp.Header.Get("X-Request-Id"), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(resp.Body)
		var text strings.Builder
		for sc.Scan() {
			var ch struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || json.Unmarshal([]byte(line), &ch) != nil || len(ch.Choices) == 0 {
				continue
			}
			text.WriteString(ch.Choices[0].Delta.Content)
			r.mu.Lock()
			r.tokens = meter.Words(text.String())
			r.mu.Unlock()
		}
	}()
	return r
}

// After kill -9 and a restart, no request is billed for more completion tokens than its buyer
// received, and every request that delivered output is billed for it, within the last 2
// seconds of output (a checkpoint's period), as GET /v1/generation shows.
func TestCrash_BillsWhatBuyersReceived(t *testing.T) {
	const tps = 20 // tokens a second
	n := newCrashNet(t, tps)
	var streams []*received
	prompts := longPrompts(6)
	for _, p := range prompts[:3] {
		streams = append(streams, n.stream(t, p))
	}
	testenv.WaitFor(t, "the first streams to run past two checkpoints", func() bool { return streams[0].count() >= 2*2*tps+5 })
	for _, p := range prompts[3:] { // and some that have just started
		streams = append(streams, n.stream(t, p))
	}
	// A stream's first checkpoint is queued 20 ms past its first token; until it commits, its
	// lazy hold is in the coordinator's memory alone, and a crash then leaves no record of it
	// (the README's "what a crash loses"). Kill once every stream's checkpoint is on disk.
	testenv.WaitFor(t, "every stream's first checkpoint", func() bool {
		hs, _ := n.st.OpenHolds(context.Background())
		cps := 0
		for _, h := range hs {
			if h.Checkpoint != nil && h.Checkpoint.Debit > 0 {
				cps++
			}
		}
		return cps == len(streams)
	})
	n.coord.Process.Kill()
	n.coord.Wait()
	for _, s := range streams {
		<-s.done // the buyer has read all it will ever get
	}
	n.coord = startCoordinator(t, n.addr, n.dir)

	var got, billed, unbilled, over int
	for _, s := range streams {
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.addr+"/v1/generation?id="+s.id, nil)
		req.Header.Set("Authorization", "Bearer "+n.apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var gen struct {
			Data struct {
				TokensCompletion int     `json:"tokens_completion"`
				CostUSD          string  `json:"cost_usd"`
				NodeID           *string `json:"node_id"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&gen)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("generation %s: %d, %v", s.id, resp.StatusCode, err)
		}
		g, r := gen.Data, s.count()
		got, billed = got+r, billed+g.TokensCompletion
		over += max(g.TokensCompletion-r, 0)
		unbilled += max(r-g.TokensCompletion, 0)
		if g.TokensCompletion > r || g.TokensCompletion == 0 || r-g.TokensCompletion > 2*tps+tps/2 || g.CostUSD == "0" || g.NodeID == nil {
			t.Errorf("request %s: buyer received %d tokens, billed %d (cost %s, node %v); want at most those received, and no fewer than 2 s of output less", s.id, r, g.TokensCompletion, g.CostUSD, g.NodeID)
		}
	}
	t.Logf("%d streams: buyers received %d completion tokens, billed %d: %d unbilled, %d over-billed", len(streams), got, billed, unbilled, over)
	if sum, _ := n.st.LedgerSum(context.Background()); sum != 0 {
		t.Errorf("ledger sum %d, want 0", sum)
	}
}
