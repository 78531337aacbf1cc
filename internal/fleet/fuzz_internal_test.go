package fleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))

// FuzzSessionFrames feeds what a node may send through the coordinator's decode and apply
// path: a register frame (signed with a test key, as decodeRegister needs), then one message of
// any frames (heartbeats, deltas, ends with receipts), as a session applies them. "$0" to "$7"
// in the message stand for the ids of the jobs the session runs. Whatever the bytes, nothing
// panics, a refusal's reason is short, a slot is never negative nor over its offer's, no job
// ends twice, and what the coordinator keeps is within the protocol's limits.
func FuzzSessionFrames(f *testing.F) {
	reg := func(r *protocol.Register) []byte {
		b, _ := json.Marshal(protocol.Frame{Type: protocol.TypeRegister, Register: r})
		return b
	}
	valid := reg(&protocol.Register{Version: protocol.Version, Name: "rig", Region: "DE", Engine: "sim",
		Offers: []protocol.Offer{{Model: "a", MaxConcurrent: 2}, {Model: "b", MaxConcurrent: 1, ContextLength: 8192}}})
	f.Add(valid, []byte(`{"t":"heartbeat","heartbeat":{"running":1,"loaded":["a"],"paused":"too hot","telemetry":{"gpus":[{"index":0,"temperature_c":90}],"processes":[{"pid":1,"name":"blender","used_mib":100}]}}}`+"\n"))
	f.Add(valid, []byte(`{"t":"delta","job":"$0","delta":{"n":2,"text":"Hello"}}
{"t":"end","job":"$0","delta":{"n":1,"text":"!"},"end":{"finish_reason":"stop","usage":{"prompt_tokens":3,"completion_tokens":3},"receipt":{"receipt":"e30=","node_key":"","node_signature":""}}}
{"t":"end","job":"$0","end":{"finish_reason":"stop"}}
`))
	f.Add(valid, []byte(`{"t":"end","job":"$1","end":{"error":{"status":400,"message":"bad request"}}}{"t":"end","job":"$2","end":{"usage":{"prompt_tokens":-1}}}`))
	f.Add(valid, []byte(`{"t":"delta","job":"$2","delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}],"n":1}}`))
	f.Add(valid, []byte(`{"t":"heartbeat","heartbeat":{"telemetry":{"gpus":[`+string(bytes.Repeat([]byte(`{"index":1},`), 70))+`{"index":2}]}}}`))
	f.Add(valid, []byte(`{"t":"register"}`))
	f.Add(valid, []byte(`{"t":"delta","job":"$0","delta":{"text":"x","n":99999999999999999999}}`))
	f.Add(reg(&protocol.Register{Version: protocol.Version, Region: "eu west", Offers: []protocol.Offer{{Model: "a", MaxConcurrent: 1}}}), []byte(`{}`))
	f.Add([]byte(`{"t":"register","register":{"version":1,"offers":[{"model":"a","max_concurrent":1},{"model":"a","max_concurrent":1}]}}`), []byte(`garbage`))

	nonce := bytes.Repeat([]byte{1}, protocol.NonceSize)
	f.Fuzz(func(t *testing.T, register, msg []byte) {
		fl := New(Config{})
		s := &session{fleet: fl, out: make(chan protocol.Frame, 4096), done: make(chan struct{}), jobs: make(map[string]*Job)}
		s.node = fuzzNode(t, s, register, nonce)
		checkNode(t, s.node)

		var jobs []*Job
		for _, o := range s.node.Offers[:min(len(s.node.Offers), 4)] {
			for range 2 {
				if !o.Acquire() {
					break
				}
				j, err := fl.Dispatch(context.Background(), o, &protocol.Request{Kind: protocol.KindChat, Model: o.Model})
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, j)
			}
		}
		for i, j := range jobs {
			msg = bytes.ReplaceAll(msg, fmt.Appendf(nil, "$%d", i), []byte(j.ID))
		}
		if len(msg) > protocol.MaxMessageBytes {
			return // the read limit refuses it
		}
		err := s.apply(msg)
		if err != nil && (!overLimit(err) || len(err.Error()) > 200) {
			t.Fatalf("refused with %q (limit %v); want a limitError with a short reason", err, overLimit(err))
		}
		checkNode(t, s.node)
		checkSlots(t, s.node, jobs)

		ends := make([]int, len(jobs))
		drain := func() {
			for i, j := range jobs {
				for {
					fr, ok := j.TryNext()
					if !ok {
						break
					}
					if ends[i] > 0 {
						t.Fatalf("job %d: a %s frame after its end", i, fr.Type)
					}
					switch fr.Type {
					case protocol.TypeDelta:
						if err := checkDelta(fr.Delta); err != nil {
							t.Fatalf("job %d: a delta over the limits: %v", i, err)
						}
					case protocol.TypeEnd:
						ends[i]++
						if e := fr.End.Error; e != nil && len(e.Message) > protocol.MaxErrorBytes {
							t.Fatalf("job %d: an error message of %d bytes", i, len(e.Message))
						}
					default:
						t.Fatalf("job %d: a %q frame", i, fr.Type)
					}
				}
				if signed, _, ok := j.Receipt(); ok && len(signed) > protocol.MaxReceiptBytes {
					t.Fatalf("job %d: a receipt of %d bytes", i, len(signed))
				}
			}
		}
		drain()
		s.endJobs(errNodeGone) // the session closes
		drain()
		for i, n := range ends {
			if n != 1 {
				t.Errorf("job %d ended %d times; want once", i, n)
			}
		}
		for _, o := range s.node.Offers {
			if n := o.Running(); n != 0 {
				t.Errorf("offer %q: %d slots taken after every job ended", o.Model, n)
			}
		}
	})
}

// fuzzNode is the node that registers with the frame in b, signed with fuzzKey; a default
// node if the registration is refused.
func fuzzNode(t *testing.T, s *session, b, nonce []byte) *Node {
	var fr protocol.Frame
	if json.Unmarshal(b, &fr) == nil && fr.Register != nil {
		reg := *fr.Register
		reg.NodeKey = fuzzKey.Public().(ed25519.PublicKey)
		reg.Signature = ed25519.Sign(fuzzKey, protocol.RegisterMessage(nonce))
		msg, err := json.Marshal(protocol.Frame{Type: fr.Type, Register: &reg})
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRegister(msg, nonce)
		if err == nil {
			err = checkRegister(r)
		}
		if err == nil {
			return newNode(r, "acct", s.fleet.cfg.Now(), s)
		}
		if len(err.Error()) > 200 {
			t.Fatalf("a register refused with a reason of %d bytes: %q…", len(err.Error()), err.Error()[:200])
		}
	}
	return newNode(&protocol.Register{NodeKey: fuzzKey.Public().(ed25519.PublicKey),
		Offers: []protocol.Offer{{Model: "a", MaxConcurrent: 2}, {Model: "b", MaxConcurrent: 1}}}, "acct", s.fleet.cfg.Now(), s)
}

// checkNode fails unless what the coordinator keeps of a node is within the protocol's limits.
func checkNode(t *testing.T, n *Node) {
	t.Helper()
	switch {
	case len(n.Offers) == 0 || len(n.Offers) > protocol.MaxOffers:
		t.Fatalf("a node of %d offers", len(n.Offers))
	case !protocol.ValidRegion(n.Region):
		t.Fatalf("a node in region %q", n.Region)
	case len(n.Name) > protocol.MaxNameBytes || len(n.Hardware.GPUs) > protocol.MaxGPUs:
		t.Fatalf("a node named %d bytes with %d GPUs", len(n.Name), len(n.Hardware.GPUs))
	case len(n.Paused()) > protocol.MaxPauseReasonBytes:
		t.Fatalf("a pause reason of %d bytes", len(n.Paused()))
	}
	for _, o := range n.Offers {
		if len(o.Model) > protocol.MaxModelBytes || o.MaxConcurrent < 1 || o.MaxConcurrent > protocol.MaxOfferConcurrent {
			t.Fatalf("an offer of a %d-byte model with %d slots", len(o.Model), o.MaxConcurrent)
		}
	}
	if tm, _ := n.Telemetry(); tm != nil {
		if len(tm.GPUs) > protocol.MaxGPUs || len(tm.Processes) > protocol.MaxGPUProcesses {
			t.Fatalf("a reading of %d GPUs and %d processes", len(tm.GPUs), len(tm.Processes))
		}
		for _, p := range tm.Processes {
			if len(p.Name) > protocol.MaxProcessNameBytes {
				t.Fatalf("a process named %d bytes", len(p.Name))
			}
		}
	}
}

// checkSlots fails unless each offer's slots taken are as many as its jobs not ended, within
// its max_concurrent.
func checkSlots(t *testing.T, n *Node, jobs []*Job) {
	t.Helper()
	for _, o := range n.Offers {
		open := 0
		for _, j := range jobs {
			j.mu.Lock()
			if j.Offer == o && !j.ended {
				open++
			}
			j.mu.Unlock()
		}
		if r := o.Running(); r != open || r > o.MaxConcurrent {
			t.Fatalf("offer %q: %d slots taken of %d, for %d jobs not ended", o.Model, r, o.MaxConcurrent, open)
		}
	}
}
