package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/money"
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

// A coordinator killed with streams in flight leaves their holds open; the next start closes
// each of them once: a request whose delivery was checkpointed is billed for that, one without
// a checkpoint is voided, and the ledger still balances.
func TestCrash_OpenHoldsClosedOnceAtRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlstore.Open(ctx, filepath.Join(dir, "coordinator.db"))
	if err != nil {
		t.Fatal(err)
	}
	buyer, err := localnet.EnsureAccount(ctx, st, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	prov, _ := localnet.EnsureAccount(ctx, st, "gpu-owner")
	apiKey, k := store.NewKey(buyer.ID, store.KeyBuyer, "", time.Now())
	token, pk := store.NewKey(prov.ID, store.KeyProvider, "", time.Now())
	for _, key := range []*store.Key{k, pk} {
		if err := st.CreateKey(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Deposit(ctx, buyer.ID, money.USD, "start", time.Now()); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	coord := startCoordinator(t, addr, dir)
	a, err := agent.New(agent.Config{
		Coordinator: "http://" + addr, Token: token, DataDir: t.TempDir(), MaxConcurrent: 8,
		Engine: sim.New(sim.Config{TokensPerSecond: 5}), InputPrice: 50_000_000, OutputPrice: 100_000_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	go a.Run(actx)
	<-a.Ready()

	stream := func(i int) {
		body := fmt.Sprintf(`{"model":"sim/llama-3.1-8b","stream":true,"messages":[{"role":"user","content":"story %d"}]}`, i)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		bufio.NewReader(resp.Body).ReadString('\n') // the stream has started: its hold is placed
	}
	const long, short = 3, 2
	for i := range long {
		stream(i)
	}
	testenv.WaitFor(t, "the long streams' checkpoints", func() bool {
		hs, _ := st.OpenHolds(ctx)
		n := 0
		for _, h := range hs {
			if h.Checkpoint != nil && h.Checkpoint.Debit > 0 {
				n++
			}
		}
		return n == long
	})
	for i := range short {
		stream(long + i)
	}
	holds, err := st.OpenHolds(ctx)
	if err != nil || len(holds) != long+short {
		t.Fatalf("open holds before the crash: %d, %v; want %d", len(holds), err, long+short)
	}
	var billed money.Nanos
	for _, h := range holds {
		if h.Checkpoint != nil {
			billed += h.Checkpoint.Debit
		}
	}

	coord.Process.Kill() // no shutdown, no settlement
	coord.Wait()
	startCoordinator(t, addr, dir)

	if holds, _ := st.OpenHolds(ctx); len(holds) != 0 {
		t.Errorf("%d holds still open after the restart", len(holds))
	}
	b, _ := st.Balance(ctx, buyer.ID)
	if b.Held != 0 || b.Spent != billed || b.Credits != money.USD-billed || billed == 0 {
		t.Errorf("buyer after the restart %+v; want nothing held and exactly the checkpointed %s spent", b, billed)
	}
	for _, h := range holds {
		u, err := st.UsageByRequest(ctx, h.RequestID)
		want := money.Nanos(0)
		if h.Checkpoint != nil {
			want = h.Checkpoint.Debit
		}
		if err != nil || u.Outcome != store.OutcomeError || u.Cost != want {
			t.Errorf("request %s after the restart: %+v, %v; want a record of the failure costing %s", h.RequestID, u, err, want)
		}
	}
	if p, _ := st.Balance(ctx, prov.ID); p.Pending == 0 || p.Pending >= billed {
		t.Errorf("provider pending %s after the restart; want its share of the %s delivered", p.Pending, billed)
	}
	if sum, _ := st.LedgerSum(ctx); sum != 0 {
		t.Errorf("ledger sum %d, want 0", sum)
	}
}
