package verify

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/protocol"
)

const testModel = "sim/llama-3.1-8b"

func TestProbe_Deterministic(t *testing.T) {
	for i := -3 * NumProbes; i < 3*NumProbes; i++ {
		a, b := Probe(i, testModel), Probe(i, testModel)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Probe(%d) = %+v, then %+v", i, a, b)
		}
		if a == b || a.Seed == b.Seed || a.Temperature == b.Temperature {
			t.Fatalf("Probe(%d) returned shared values; want a new request each call", i)
		}
	}
}

// TestProbe_AsTheGateway checks that each probe is exactly the job the gateway makes of a
// buyer's body with the same messages and parameters.
func TestProbe_AsTheGateway(t *testing.T) {
	for i := range 2 * NumProbes {
		got := Probe(i, testModel)
		body := `{"model":"` + testModel + `","messages":` + string(got.Messages) +
			`,"temperature":0,"seed":` + jsonOf(t, *got.Seed) + `,"max_tokens":` + jsonOf(t, got.MaxTokens) + `}`
		var c api.ChatRequest
		if err := api.Decode(strings.NewReader(body), &c); err != nil {
			t.Fatalf("probe %d: decode the buyer's body: %v", i, err)
		}
		want, apiErr := c.Job()
		if apiErr != nil {
			t.Fatalf("probe %d: the gateway refuses it: %v", i, apiErr.Message)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("probe %d:\n got %+v\nwant %+v (the gateway's job)", i, got, want)
		}
	}
}

func TestProbe_Shape(t *testing.T) {
	for i := range NumProbes {
		req := Probe(i, testModel)
		if req.Kind != protocol.KindChat || req.Model != testModel {
			t.Errorf("probe %d: kind %q, model %q; want %q, %q", i, req.Kind, req.Model, protocol.KindChat, testModel)
		}
		if req.Temperature == nil || *req.Temperature != 0 || req.Seed == nil {
			t.Errorf("probe %d: temperature %v, seed %v; want 0 and a seed", i, req.Temperature, req.Seed)
		}
		if req.MaxTokens < 48 || req.MaxTokens > 96 {
			t.Errorf("probe %d: max_tokens %d; want 48 to 96", i, req.MaxTokens)
		}
		if req.TopP != nil || req.Stop != nil || req.Tools != nil || req.ToolChoice != nil || req.ResponseFormat != nil || req.Continue || req.Prompt != "" {
			t.Errorf("probe %d sets more than a plain chat: %+v", i, req)
		}

		var msgs []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(req.Messages, &msgs); err != nil {
			t.Fatalf("probe %d: messages are not a JSON array of messages: %v", i, err)
		}
		if last := msgs[len(msgs)-1]; last.Role != "user" {
			t.Errorf("probe %d ends with a %q message; want the user's (an assistant's asks for a continuation)", i, last.Role)
		}
		// As clients send it: compact, role first, no HTML escapes, UTF-8 unescaped.
		var compact bytes.Buffer
		if err := json.Compact(&compact, req.Messages); err != nil || !bytes.Equal(compact.Bytes(), req.Messages) {
			t.Errorf("probe %d: messages are not compact JSON: %s", i, req.Messages)
		}
		if !bytes.HasPrefix(req.Messages, []byte(`[{"role":`)) {
			t.Errorf("probe %d: messages do not start with a role: %.40s", i, req.Messages)
		}
		if bytes.Contains(req.Messages, []byte(`\u00`)) || bytes.Contains(req.Messages, []byte(`\u2`)) {
			t.Errorf("probe %d: messages hold \\u escapes, which common clients do not write: %s", i, req.Messages)
		}
	}
}

func TestProbe_Varied(t *testing.T) {
	seen := map[string]int{}
	roles := map[string]int{} // conversations by shape
	tokens, seeds := map[int]bool{}, map[int64]bool{}
	for i := range NumProbes {
		req := Probe(i, testModel)
		var msgs []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(req.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		last := string(msgs[len(msgs)-1].Content)
		if j, ok := seen[last]; ok {
			t.Errorf("probes %d and %d ask the same: %s", j, i, last)
		}
		seen[last] = i
		switch {
		case len(msgs) > 2:
			roles["multi-turn"]++
		case msgs[0].Role == "system":
			roles["system+user"]++
		case msgs[0].Content[0] == '[':
			roles["content parts"]++
		default:
			roles["one user message"]++
		}
		tokens[req.MaxTokens] = true
		seeds[*req.Seed] = true
	}
	if NumProbes < 40 {
		t.Errorf("NumProbes = %d; want at least 40", NumProbes)
	}
	for _, shape := range []string{"multi-turn", "system+user", "content parts", "one user message"} {
		if roles[shape] == 0 {
			t.Errorf("no probe is a %s chat", shape)
		}
	}
	if len(tokens) < 6 || len(seeds) < 6 {
		t.Errorf("probes use %d max_tokens and %d seeds; want them to vary", len(tokens), len(seeds))
	}
	t.Logf("shapes %v; %d distinct max_tokens, %d distinct seeds", roles, len(tokens), len(seeds))
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
