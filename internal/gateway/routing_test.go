package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// routed sends a chat request with extra body fields and returns the status, the serving
// node, the answer's model and the error's code and message.
func routed(t *testing.T, env *testenv.Env, extra string, header ...string) (status int, node, model, code, msg string) {
	t.Helper()
	body := `{"model":"sim/llama-3.1-8b","max_tokens":4,"messages":[{"role":"user","content":"route me"}]` + extra + `}`
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Model string `json:"model"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	json.Unmarshal(b, &out)
	return resp.StatusCode, resp.Header.Get("X-Shareai-Node"), out.Model, out.Error.Code, out.Error.Message + " param=" + out.Error.Param
}

func TestRouting_Preferences(t *testing.T) {
	env := testenv.New(t, testenv.Providers(3), func(c *testenv.Config) { c.Regions = []string{"de", "us", "jp"} })
	nodeIn := map[string]string{}
	for i, r := range []string{"de", "us", "jp"} {
		nodeIn[r] = env.Agents[i].NodeID()
	}

	t.Run("regions are strict", func(t *testing.T) {
		for range 10 {
			if status, node, _, _, msg := routed(t, env, `,"provider":{"regions":["eu"]}`); status != 200 || node != nodeIn["de"] {
				t.Fatalf("regions eu: %d from %s (%s); want the node in de", status, node, msg)
			}
		}
		status, _, _, code, msg := routed(t, env, `,"provider":{"regions":["fr"]}`)
		if status != 503 || code != "no_provider_available" || !strings.Contains(msg, "3 nodes serve sim/llama-3.1-8b: 3 outside region fr") {
			t.Errorf("regions fr: %d %s %q; want 503 saying why", status, code, msg)
		}
	})
	t.Run("order", func(t *testing.T) {
		order := fmt.Sprintf(`,"provider":{"order":[%q]}`, nodeIn["jp"])
		for range 5 {
			if _, node, _, _, _ := routed(t, env, order); node != nodeIn["jp"] {
				t.Fatalf("order jp: served by %s", node)
			}
		}
	})
	t.Run("ignore and only", func(t *testing.T) {
		for range 5 {
			if _, node, _, _, _ := routed(t, env, fmt.Sprintf(`,"provider":{"ignore":[%q,%q]}`, nodeIn["de"], nodeIn["us"])); node != nodeIn["jp"] {
				t.Fatalf("ignore de and us: served by %s", node)
			}
		}
	})
	t.Run("max price", func(t *testing.T) {
		status, _, _, code, msg := routed(t, env, `,"provider":{"max_price":{"prompt":0.01}}`)
		if status != 503 || code != "no_provider_available" || !strings.Contains(msg, "over max price") {
			t.Errorf("max price below every ask: %d %s %q", status, code, msg)
		}
		if status, _, _, _, _ := routed(t, env, `,"provider":{"max_price":{"prompt":0.05,"completion":"0.1"}}`); status != 200 {
			t.Errorf("max price at the ask: %d, want 200", status)
		}
	})
	t.Run("bad preferences", func(t *testing.T) {
		status, _, _, code, msg := routed(t, env, `,"provider":{"sort":"fastest"}`)
		if status != 400 || code != api.CodeInvalidValue || !strings.Contains(msg, "param=provider.sort") {
			t.Errorf("sort fastest: %d %s %q; want 400 naming provider.sort", status, code, msg)
		}
	})
	t.Run("fallback models and suffixes", func(t *testing.T) {
		status, _, model, _, _ := routed(t, env, `,"models":["no/such-model","sim/qwen-2.5-7b"]`)
		if status != 200 || model != "sim/llama-3.1-8b" {
			t.Errorf("served first choice: %d %q", status, model)
		}
		body := `,"models":["sim/qwen-2.5-7b"]`
		status, _, model, _, _ = routedModel(t, env, "no/such-model", body)
		if status != 200 || model != "sim/qwen-2.5-7b" {
			t.Errorf("fallback: %d, answered by model %q; want the fallback sim/qwen-2.5-7b", status, model)
		}
		if status, _, model, _, _ := routedModel(t, env, "sim/llama-3.1-8b:floor", ""); status != 200 || model != "sim/llama-3.1-8b" {
			t.Errorf(":floor: %d %q", status, model)
		}
	})
	t.Run("affinity", func(t *testing.T) {
		_, first, _, _, _ := routed(t, env, `,"user":"alice"`)
		for range 8 {
			if _, node, _, _, _ := routed(t, env, `,"user":"alice"`); node != first {
				t.Fatalf("user alice moved from %s to %s", first, node)
			}
		}
		_, sfirst, _, _, _ := routed(t, env, ``, "X-Session-Id", "chat-42")
		for range 8 {
			if _, node, _, _, _ := routed(t, env, ``, "X-Session-Id", "chat-42"); node != sfirst {
				t.Fatalf("session chat-42 moved from %s to %s", sfirst, node)
			}
		}
	})
}

func routedModel(t *testing.T, env *testenv.Env, model, extra string) (int, string, string, string, string) {
	t.Helper()
	return routed(t, env, `,"model":`+fmt.Sprintf("%q", model)+extra)
}

func TestModels_Marketplace(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Regions = []string{"de", "us"} })
	client := env.Client()
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("warm up the stats", 1)); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Regions []string `json:"regions"`
			Pricing struct {
				PromptMin     json.Number `json:"prompt_min"`
				CompletionMax json.Number `json:"completion_max"`
			} `json:"pricing"`
		} `json:"data"`
	}
	var resp *http.Response
	if _, err := client.Models.List(context.Background(), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	raw := getJSON(t, env, "/models", &list)
	m := list.Data[0]
	if m.Pricing.PromptMin != "0.05" || m.Pricing.CompletionMax != "0.1" || strings.Join(m.Regions, ",") != "de,us" {
		t.Errorf("model %s: %s", m.ID, raw)
	}
	var eps struct {
		Data struct {
			Endpoints []struct {
				NodeID      string   `json:"node_id"`
				Region      string   `json:"region"`
				Latency     *float64 `json:"latency_ms"`
				Reliability float64  `json:"reliability"`
			} `json:"endpoints"`
		} `json:"data"`
	}
	raw = getJSON(t, env, "/models/sim/llama-3.1-8b/endpoints", &eps)
	measured := 0
	for _, e := range eps.Data.Endpoints {
		if e.Latency != nil {
			measured++
		} else if e.Reliability != reputation.Prior {
			// Scored or not yet, a node with no record shows what reputation makes of one.
			t.Errorf("endpoint %s, with no record, shows reliability %v; want %v", e.NodeID, e.Reliability, reputation.Prior)
		}
	}
	if len(eps.Data.Endpoints) != 2 || measured != 1 {
		t.Errorf("endpoints: %s; want both nodes, the one that answered with its latency", raw)
	}
}

func getJSON(t *testing.T, env *testenv.Env, path string, v any) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An API key's routing preferences are the defaults of its requests, and its list of models
// limits what it may use.
func TestRouting_KeyRules(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Regions = []string{"de", "us"} })
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	secret, ruled := store.NewKey(k.AccountID, store.KeyBuyer, "ruled", time.Now())
	ruled.Routing = []byte(`{"regions":["de"]}`)
	ruled.Models = []string{"sim/qwen-2.5-7b"}
	if err := env.Store.CreateKey(ctx, ruled); err != nil {
		t.Fatal(err)
	}
	send := func(model string) (int, string, string) {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, model)
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Shareai-Node"), string(b)
	}
	if status, _, body := send("sim/llama-3.1-8b"); status != http.StatusForbidden || !strings.Contains(body, `"model_not_allowed"`) {
		t.Errorf("a model the key may not use: %d %s", status, body)
	}
	for range 6 {
		if status, node, body := send("sim/qwen-2.5-7b"); status != 200 || node != env.Agents[0].NodeID() {
			t.Fatalf("allowed model: %d from %s (%s); want the node in de, the key's region", status, node, body)
		}
	}
}
