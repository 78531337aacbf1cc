package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
)

// run is what a sim node's engine emits for req.
func run(t *testing.T, e *sim.Engine, req *protocol.Request) string {
	t.Helper()
	var b strings.Builder
	if _, err := e.Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
		b.WriteString(d.Text)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestKnownAnswer_Sim(t *testing.T) {
	honest := sim.New(sim.Config{})
	cheat := sim.New(sim.Config{Salt: "cheat"})
	for _, m := range sim.DefaultModels {
		for i := range NumProbes {
			req := Probe(i, m.Name)
			got, ok := KnownAnswer(req)
			if !ok {
				t.Fatalf("%s probe %d: no known answer", m.Name, i)
			}
			if want := run(t, honest, req); got != want {
				t.Errorf("%s probe %d: known answer\n%q\nwant an honest node's\n%q", m.Name, i, got, want)
			}
			if got == "" || !strings.HasPrefix(honest.Answer(req), got) {
				t.Errorf("%s probe %d: known answer %q is not a start of the whole answer", m.Name, i, got)
			}
			if n := len(strings.Fields(got)); n > req.MaxTokens {
				t.Errorf("%s probe %d: known answer of %d words; want at most max_tokens %d", m.Name, i, n, req.MaxTokens)
			}
			if salted := run(t, cheat, req); AgreeExact(salted, got) {
				t.Errorf("%s probe %d: a salted sim gives the known answer %q", m.Name, i, got)
			}
		}
	}
}

func TestKnownAnswer_OtherSimModel(t *testing.T) {
	req := Probe(3, "sim/custom-70b")
	got, ok := KnownAnswer(req)
	node := sim.New(sim.Config{Models: []engine.Model{{Name: "sim/custom-70b", ContextLength: 4096}}})
	if want := run(t, node, req); !ok || got != want {
		t.Errorf("KnownAnswer = %q, %v; want %q, true", got, ok, want)
	}
}

func TestKnownAnswer_None(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  *protocol.Request
	}{
		{"nil", nil},
		{"ollama model", Probe(0, "llama3.1:8b")},
		{"hugging face model", Probe(0, "meta-llama/Llama-3.1-8B-Instruct")},
		{"sim in the middle", Probe(0, "not-sim/llama")},
		{"malformed messages", &protocol.Request{Kind: protocol.KindChat, Model: testModel, Messages: []byte(`{"role":"user"}`)}},
		{"tool call", &protocol.Request{Kind: protocol.KindChat, Model: testModel, Messages: Probe(0, testModel).Messages,
			Tools:      []byte(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`),
			ToolChoice: []byte(`"required"`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := KnownAnswer(tt.req); ok {
				t.Errorf("KnownAnswer = %q, true; want none", got)
			}
		})
	}
}

func TestKnownAnswer_MaxTokens(t *testing.T) {
	req := Probe(5, testModel)
	req.MaxTokens = 0
	whole, ok := KnownAnswer(req)
	if want := sim.New(sim.Config{}).Answer(req); !ok || whole != want {
		t.Fatalf("without max_tokens: KnownAnswer = %q, %v; want the whole answer %q", whole, ok, want)
	}
	req.MaxTokens = 7
	cut, _ := KnownAnswer(req)
	if n := len(strings.Fields(cut)); n != 7 || !strings.HasPrefix(whole, cut) {
		t.Errorf("max_tokens 7: KnownAnswer = %q (%d words); want the first 7 tokens of %q", cut, n, whole)
	}
}
