package agent_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/guard"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/testenv"
)

const model = "sim/llama-3.1-8b"

func ask(env *testenv.Env) error {
	client := env.Client()
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	return err
}

// pausedWait bounds how long a request waits in the queue for a paused node.
var pausedWait = queue.Config{Timeout: 200 * time.Millisecond}

// wantPaused checks that a request is refused with a 503 that counts the node as paused,
// once it has waited in the queue for it.
func wantPaused(t *testing.T, err error) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || !strings.Contains(apiErr.Message, "1 paused") {
		t.Fatalf("request to a paused node: %v; want a 503 saying the node is paused", err)
	}
}

// nodePaused waits until the coordinator sees the agent's node paused (or not).
func nodePaused(env *testenv.Env, a *agent.Agent, paused bool) {
	env.WaitFor("the coordinator to see the node's state", func() bool {
		n := env.Coordinator().Fleet.Node(a.NodeID())
		return n != nil && (n.Paused() != "") == paused
	})
}

// The owner pauses the node: the coordinator stops sending it jobs at once, with a 503 that
// says why, and sends them again after resume.
func TestAgent_PauseAndResume(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Core.Queue = pausedWait })
	a := env.Agents[0]
	if err := ask(env); err != nil {
		t.Fatal(err)
	}
	a.Pause()
	if got := a.Paused(); got != "paused by its owner" {
		t.Errorf("Paused() = %q", got)
	}
	nodePaused(env, a, true)
	wantPaused(t, ask(env))
	a.Resume()
	nodePaused(env, a, false)
	if err := ask(env); err != nil {
		t.Errorf("request after resume: %v", err)
	}
}

// An owner's pause outlives a restart of the agent.
func TestAgent_PauseSurvivesRestart(t *testing.T) {
	cfg := agent.Config{Coordinator: "http://127.0.0.1:1", Token: "spt-x", DataDir: t.TempDir(), Engine: sim.New(sim.Config{})}
	restart := func() *agent.Agent {
		a, err := agent.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	restart().Pause()
	a := restart()
	if got := a.Paused(); got != "paused by its owner" {
		t.Errorf("after a restart, Paused() = %q; want the owner's pause kept", got)
	}
	a.Resume()
	if got := restart().Paused(); got != "" {
		t.Errorf("after resume and a restart, Paused() = %q; want none", got)
	}
}

// toggle is a schedule whose windows open and close when the test says.
type toggle struct{ open atomic.Bool }

func (s *toggle) Open(time.Time) bool { return s.open.Load() }
func (s *toggle) String() string      { return "mon-fri 08:00-18:00" }

// Outside its windows a node registers but takes no job; when a window opens it does.
func TestAgent_AvailabilityWindows(t *testing.T) {
	var sched toggle
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Core.Queue = pausedWait
		c.EachAgent = func(i int, c *agent.Config) {
			c.Schedule, c.Windows, c.Timezone = &sched, sched.String(), "Europe/Berlin"
			c.CheckEvery = 20 * time.Millisecond
		}
	})
	a := env.Agents[0]
	nodePaused(env, a, true)
	if got := a.Paused(); !strings.Contains(got, "outside its availability windows (mon-fri 08:00-18:00)") {
		t.Errorf("Paused() = %q", got)
	}
	wantPaused(t, ask(env))
	if n := env.Coordinator().Fleet.Node(a.NodeID()); n.Windows != "mon-fri 08:00-18:00" || n.Timezone != "Europe/Berlin" {
		t.Errorf("the coordinator has windows %q in %q; want what the node declared", n.Windows, n.Timezone)
	}
	sched.open.Store(true)
	nodePaused(env, a, false)
	env.WaitFor("the node's onboarding checks, made once it takes jobs", func() bool {
		return env.Coordinator().Fleet.Node(a.NodeID()).Level() == "verified"
	})
	if err := ask(env); err != nil {
		t.Errorf("request inside a window: %v", err)
	}
}

// script plays a recorded sequence of GPU readings, one per check, and a guard that pauses the
// node while a reading is too hot.
type script struct {
	mu       sync.Mutex
	readings []*protocol.Telemetry
}

func (s *script) next(context.Context) (*protocol.Telemetry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.readings[0]
	if len(s.readings) > 1 {
		s.readings = s.readings[1:]
	}
	return t, nil
}

func reading(tempC float64) *protocol.Telemetry {
	return &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0, TemperatureC: &tempC}}}
}

// Heartbeats carry the node's GPU readings to the coordinator, and the guard pauses the node
// from them.
func TestAgent_TelemetryAndGuard(t *testing.T) {
	s := &script{readings: []*protocol.Telemetry{reading(60), reading(60), reading(60), reading(86)}}
	g, err := guard.New(guard.Config{MaxTemperatureC: 83, ResumeTemperatureC: 75})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Fleet.HeartbeatInterval = 100 * time.Millisecond
		c.EachAgent = func(i int, c *agent.Config) {
			c.Telemetry, c.Guard, c.CheckEvery = s.next, g, 20*time.Millisecond
		}
	})
	a := env.Agents[0]
	nodePaused(env, a, true)
	if got := a.Paused(); !strings.Contains(got, "GPU 0 is at 86 °C (limit 83 °C); resuming below 75 °C") {
		t.Errorf("Paused() = %q", got)
	}
	n := env.Coordinator().Fleet.Node(a.NodeID())
	tel, at := n.Telemetry()
	if tel == nil || len(tel.GPUs) != 1 || *tel.GPUs[0].TemperatureC != 86 || at.IsZero() {
		t.Errorf("the coordinator's latest reading = %+v at %v; want the node's 86 °C", tel, at)
	}
}

// The control API pauses and resumes the node for its owner, and only with the token kept in
// the node's data directory.
func TestAgent_ControlAPI(t *testing.T) {
	dir := t.TempDir()
	// An empty token file (a crash, a touch) must never mean "no token".
	if err := os.WriteFile(filepath.Join(dir, "control.token"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.EachAgent = func(i int, c *agent.Config) { c.DataDir = dir } })
	a := env.Agents[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.ServeControl(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeControl: %v", err)
		}
	})
	addr := ln.Addr().String()
	var st agent.Status
	testenv.WaitFor(t, "the control API to answer", func() bool {
		st, err = agent.Control(ctx, addr, dir, "status")
		return err == nil
	})
	if st.NodeID != a.NodeID() || !st.Connected || st.Paused != "" {
		t.Errorf("status = %+v; want the connected node, taking jobs", st)
	}
	if st, err = agent.Control(ctx, addr, dir, "pause"); err != nil || st.Paused != "paused by its owner" {
		t.Fatalf("pause: %+v, %v", st, err)
	}
	nodePaused(env, a, true)
	if st, err = agent.Control(ctx, addr, dir, "resume"); err != nil || st.Paused != "" {
		t.Fatalf("resume: %+v, %v", st, err)
	}
	if _, err := agent.Control(ctx, addr, t.TempDir(), "pause"); err == nil {
		t.Error("pause with another data directory (no token) worked")
	}
	for _, auth := range []string{"Bearer wrong", "Bearer ", ""} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/pause", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || a.Paused() != "" {
			t.Errorf("pause with Authorization %q: %d, paused %q; want 401 and the node untouched", auth, resp.StatusCode, a.Paused())
		}
	}
}
