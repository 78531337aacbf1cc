package fleet_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// honestRegister is a registration within every limit, offering models of its own so that no
// buyer's request for the network's models reaches it.
func honestRegister(models ...string) protocol.Register {
	r := protocol.Register{Name: "hostile", Region: "de", Engine: "hand", Agent: "test"}
	for _, m := range models {
		r.Offers = append(r.Offers, protocol.Offer{Model: m, MaxConcurrent: 1})
	}
	return r
}

func long(n int) string { return strings.Repeat("x", n) }

// checkRefused fails unless the coordinator closed h's connection with status and a reason
// holding want, short and quoting nothing at length, and logged the refusal once.
func checkRefused(ctx context.Context, t *testing.T, env *testenv.Env, h *testenv.Hostile, err error, status websocket.StatusCode, want string) {
	t.Helper()
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		// Not refused yet, or a write cut short by the close: the close frame follows.
		ce, err = h.Closed(ctx)
	} else {
		err = nil
	}
	if err != nil {
		t.Fatalf("want the connection closed with %v %q; got %v", status, want, err)
	}
	if ce.Code != status || !strings.Contains(ce.Reason, want) {
		t.Errorf("closed with %v %q; want %v saying %q", ce.Code, ce.Reason, status, want)
	}
	if len(ce.Reason) > 123 || strings.Contains(ce.Reason, long(30)) {
		t.Errorf("a close reason that echoes what the node sent: %q", ce.Reason)
	}
	// The node is known by its key, unless its register was too large to read.
	id := fleet.NodeID(h.Key.Public().(ed25519.PublicKey))
	if status == websocket.StatusMessageTooBig && h.NodeID == "" {
		id = "read register"
	}
	testenv.WaitFor(t, "the refusal logged", func() bool { return len(env.Logs.Lines("node refused: over a protocol limit", id)) > 0 })
	if lines := env.Logs.Lines("node refused", id); len(lines) != 1 {
		t.Errorf("the refusal logged %d times; want once:\n%s", len(lines), strings.Join(lines, "\n"))
	} else if strings.Contains(lines[0], long(200)) {
		t.Errorf("the refusal's log line echoes what the node sent at length: %.300s…", lines[0])
	}
}

// A hostile node is refused for each limit it breaks, or has the field clamped, and the
// network keeps serving honest nodes and buyers all the while.
func TestHostileNode(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := env.Coordinator().Fleet

	offers := func(n int) []protocol.Offer {
		os := make([]protocol.Offer, n)
		for i := range os {
			os[i] = protocol.Offer{Model: fmt.Sprintf("flood/%d", i), MaxConcurrent: 1}
		}
		return os
	}
	registers := []struct {
		name   string
		change func(r *protocol.Register)
		status websocket.StatusCode
		want   string
	}{
		{"flood of offers", func(r *protocol.Register) { r.Offers = offers(5000) }, websocket.StatusPolicyViolation, "too many offers: 5000 > 64"},
		{"long name", func(r *protocol.Register) { r.Name = long(10_000) }, websocket.StatusPolicyViolation, "name too long: 10000 > 128 bytes"},
		{"long model id", func(r *protocol.Register) { r.Offers[0].Model = long(5000) }, websocket.StatusPolicyViolation, "offer 0: model id too long: 5000 > 256 bytes"},
		{"long region", func(r *protocol.Register) { r.Region = long(1000) }, websocket.StatusPolicyViolation, "region too long: 1000 > 32 bytes"},
		{"invalid region", func(r *protocol.Register) { r.Region = `de"} 1` + "\n# fake metric" }, websocket.StatusPolicyViolation, `invalid region "de\"} 1\n# fake metric"`},
		{"too many GPUs", func(r *protocol.Register) { r.Hardware.GPUs = make([]protocol.GPU, 500) }, websocket.StatusPolicyViolation, "too many GPUs: 500 > 64"},
		{"long GPU name", func(r *protocol.Register) { r.Hardware.GPUs = []protocol.GPU{{Name: long(5000)}} }, websocket.StatusPolicyViolation, "gpu 0 name too long: 5000 > 128 bytes"},
		{"long agent version", func(r *protocol.Register) { r.Agent = long(5000) }, websocket.StatusPolicyViolation, "agent version too long: 5000 > 64 bytes"},
		{"ask schedule flood", func(r *protocol.Register) {
			s := &protocol.AskSchedule{Timezone: "UTC"}
			for i := range 5000 {
				s.Windows = append(s.Windows, protocol.AskWindow{Name: fmt.Sprint("w", i), When: "daily 01:00-02:00"})
			}
			r.Offers[0].AskSchedule = s
		}, websocket.StatusPolicyViolation, "ask schedule: too many windows: 5000 > 16"},
		{"ask schedule priced over the max", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "peak", When: "daily 09:00-17:00", InputPrice: 1 << 62}}}
		}, websocket.StatusPolicyViolation, `ask schedule: window "peak": prices must be between 0 and`},
		{"ask schedule of a long spec", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "peak", When: long(5000)}}}
		}, websocket.StatusPolicyViolation, `ask schedule: window "peak": times too long: 5000 > 512 bytes`},
		{"oversized register", func(r *protocol.Register) { r.Windows = long(protocol.MaxRegisterBytes) }, websocket.StatusMessageTooBig, "read limited at"},
	}
	for _, tt := range registers {
		t.Run("register/"+tt.name, func(t *testing.T) {
			h, err := env.DialHostile(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reg := honestRegister("hostile/" + tt.name)
			tt.change(&reg)
			_, err = h.Register(ctx, reg)
			checkRefused(ctx, t, env, h, err, tt.status, tt.want)
		})
	}

	frames := []struct {
		name   string
		msg    []byte
		status websocket.StatusCode
		want   string
	}{
		{"too many GPUs in a heartbeat", frame(protocol.Frame{Type: protocol.TypeHeartbeat, Heartbeat: &protocol.Heartbeat{
			Telemetry: &protocol.Telemetry{GPUs: make([]protocol.GPUStat, 100)}}}), websocket.StatusPolicyViolation, "too many GPUs in a heartbeat: 100 > 64"},
		{"too many loaded models", frame(protocol.Frame{Type: protocol.TypeHeartbeat, Heartbeat: &protocol.Heartbeat{
			Loaded: make([]string, 10_000)}}), websocket.StatusPolicyViolation, "too many loaded models in a heartbeat: 10000 > 256"},
		{"oversized delta", frame(protocol.Frame{Type: protocol.TypeDelta, Job: "job_x", Delta: &protocol.Delta{
			Text: long(2 * protocol.MaxDeltaBytes)}}), websocket.StatusPolicyViolation, fmt.Sprintf("delta too large: %d > %d bytes", 2*protocol.MaxDeltaBytes, protocol.MaxDeltaBytes)},
		{"oversized frame", frame(protocol.Frame{Type: protocol.TypeHeartbeat, Heartbeat: &protocol.Heartbeat{
			Paused: long(protocol.MaxMessageBytes)}}), websocket.StatusMessageTooBig, "read limited at"},
		{"oversized receipt", frame(protocol.Frame{Type: protocol.TypeReceipt, Job: "job_x", Receipt: json.RawMessage(`"` + long(2*protocol.MaxReceiptBytes) + `"`)}),
			websocket.StatusPolicyViolation, fmt.Sprintf("receipt of %d bytes not in 1..%d", 2*protocol.MaxReceiptBytes+2, protocol.MaxReceiptBytes)},
		{"unknown frame", frame(protocol.Frame{Type: long(5000)}), websocket.StatusPolicyViolation, `unexpected "xxxxxxxxxxxxxxxxxxxxx…" frame`},
		{"broken JSON", []byte(`{"t":"heartbeat","heartbeat":{"running":1` + strings.Repeat("1", 100_000) + `}}`), websocket.StatusPolicyViolation, "bad frame"},
	}
	for _, tt := range frames {
		t.Run("session/"+tt.name, func(t *testing.T) {
			h, err := env.DialHostile(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Register(ctx, honestRegister("hostile/"+tt.name)); err != nil {
				t.Fatalf("register: %v", err)
			}
			checkRefused(ctx, t, env, h, h.SendRaw(ctx, tt.msg), tt.status, tt.want)
			testenv.WaitFor(t, "the node gone", func() bool { return f.Node(h.NodeID) == nil })
		})
	}

	t.Run("session/clamped heartbeat", func(t *testing.T) {
		h, err := env.DialHostile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Register(ctx, honestRegister("hostile/clamped")); err != nil {
			t.Fatal(err)
		}
		procs := make([]protocol.GPUProcess, 1000)
		for i := range procs {
			procs[i] = protocol.GPUProcess{PID: i, Name: long(1000), UsedMiB: int64(i)}
		}
		hb := protocol.Frame{Type: protocol.TypeHeartbeat, Heartbeat: &protocol.Heartbeat{Paused: long(100_000),
			Telemetry: &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0}}, Processes: procs}}}
		if err := h.Send(ctx, hb, hb); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the heartbeat taken in", func() bool { return f.Node(h.NodeID) != nil && f.Node(h.NodeID).Paused() != "" })
		n := f.Node(h.NodeID)
		if got := len(n.Paused()); got > protocol.MaxPauseReasonBytes {
			t.Errorf("a pause reason of %d bytes kept; want at most %d", got, protocol.MaxPauseReasonBytes)
		}
		tm, _ := n.Telemetry()
		if tm == nil || len(tm.Processes) != protocol.MaxGPUProcesses || tm.Processes[0].UsedMiB != 999 || len(tm.Processes[0].Name) > protocol.MaxProcessNameBytes {
			t.Errorf("telemetry %v; want the %d processes using the most memory, names clamped", tm != nil, protocol.MaxGPUProcesses)
		}
		for _, field := range []string{"pause reason", "gpu processes", "gpu process name"} {
			if lines := env.Logs.Lines("clamped", h.NodeID, `"field":"`+field+`"`); len(lines) != 1 {
				t.Errorf("clamping the %s logged %d times; want once", field, len(lines))
			}
		}
	})

	t.Run("session/clamped error message", func(t *testing.T) {
		h, err := env.DialHostile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Register(ctx, honestRegister("hostile/errors")); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			job, err := h.NextJob(ctx)
			if err == nil {
				err = h.Send(ctx, protocol.Frame{Type: protocol.TypeEnd, Job: job.Job, End: &protocol.End{
					Error: &protocol.Error{Status: http.StatusBadRequest, Message: strings.Repeat("bad request ", 100_000)}}})
			}
			answered <- err
		}()
		resp := env.Post("/chat/completions", `{"model":"hostile/errors","messages":[{"role":"user","content":"hi"}]}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest || len(body) > 2*protocol.MaxErrorBytes {
			t.Errorf("status %d, a body of %d bytes; want 400 with the node's message clamped to %d bytes", resp.StatusCode, len(body), protocol.MaxErrorBytes)
		}
		if f.Node(h.NodeID) == nil {
			t.Error("the node was dropped for a long error message; want it clamped")
		}
	})

	// A node that says a job's receipt follows and sends none, then sends a receipt for a job it
	// never had: its buyer is answered and billed without a receipt, and the node stays.
	t.Run("session/receipt withheld", func(t *testing.T) {
		h, err := env.DialHostile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := h.Register(ctx, honestRegister("hostile/receipts"))
		if err != nil {
			t.Fatal(err)
		}
		if !reg.BatchedReceipts {
			t.Fatal("the coordinator does not say it takes batched receipts")
		}
		answered := make(chan error, 1)
		go func() {
			job, err := h.NextJob(ctx)
			if err == nil {
				err = h.Send(ctx, protocol.Frame{Type: protocol.TypeEnd, Job: job.Job, Delta: &protocol.Delta{Text: "Hi."},
					End: &protocol.End{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 3, CompletionTokens: 2}, ReceiptFollows: true}},
					protocol.Frame{Type: protocol.TypeReceipt, Job: "job_never_had", Receipt: json.RawMessage(`{"receipt":{}}`)})
			}
			answered <- err
		}()
		resp := env.Post("/chat/completions", `{"model":"hostile/receipts","messages":[{"role":"user","content":"hi"}]}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		id := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("status %d, request id %q; want the answer", resp.StatusCode, id)
		}
		testenv.WaitFor(t, "the request billed", func() bool {
			u, err := env.Store.UsageByRequest(ctx, id)
			return err == nil && u != nil
		})
		if rs, err := env.Store.Receipts(ctx, id); err != nil || len(rs) != 0 {
			t.Errorf("receipts %v, %v; want none stored", rs, err)
		}
		if f.Node(h.NodeID) == nil {
			t.Error("the node was dropped for a receipt frame of a job it never had")
		}
	})

	// The honest node still serves, and no refused node's offers reached the models list.
	c := env.Client()
	res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("still there?")},
	})
	if err != nil || len(res.Choices) == 0 || res.Choices[0].Message.Content == "" {
		t.Fatalf("the honest node's answer: %v", err)
	}
	for _, m := range f.Models() {
		if strings.HasPrefix(m.ID, "flood/") || len(m.ID) > protocol.MaxModelBytes {
			t.Errorf("model %.40q listed", m.ID)
		}
	}
}

func frame(fr protocol.Frame) []byte {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(fr)
	return b.Bytes()
}
