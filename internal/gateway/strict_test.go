package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// errorMember is the error member of an error body.
type errorMember struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errorOf decodes an error body.
func errorOf(t *testing.T, body []byte) errorMember {
	t.Helper()
	var e struct{ Error errorMember }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an error body: %v\n%s", err, body)
	}
	return e.Error
}

// orEmpty is a nullable string member, "" for null.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// goNames are what an error text must never hold: Go's names of types and fields.
var goNames = []string{"Routing", "Sampling", "Hints", "ChatRequest", "api.", "matcher.", "Go value", "Go struct",
	"[]string", "map[", "json.", "RawMessage", "float64", "int64", "unmarshal"}

// TestStrict_Refusals: what OpenAI refuses, the gateway refuses with OpenAI's words, naming
// the member at fault by its JSON path.
func TestStrict_Refusals(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	chat := func(more string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],` + more + `}`
	}
	completion := func(more string) string { return `{"model":"` + model + `","prompt":"hi",` + more + `}` }
	tests := []struct {
		name, path, body string
		code, param      string
		message          string // "" for any
	}{
		{"unknown member", "/chat/completions", chat(`"max_token":5`), "unknown_parameter", "max_token",
			"Unrecognized request argument supplied: max_token"},
		{"unknown member of a completion", "/completions", completion(`"max_token":5`), "unknown_parameter", "max_token",
			"Unrecognized request argument supplied: max_token"},
		{"a chat member in a completion", "/completions", completion(`"messages":[]`), "unknown_parameter", "messages",
			"Unrecognized request argument supplied: messages"},
		{"frequency_penalty range", "/chat/completions", chat(`"frequency_penalty":2.5`), "invalid_value", "frequency_penalty",
			"Invalid 'frequency_penalty': expected a number between -2 and 2, but got 2.5 instead."},
		{"presence_penalty range", "/completions", completion(`"presence_penalty":-3`), "invalid_value", "presence_penalty", ""},
		{"top_logprobs range", "/chat/completions", chat(`"top_logprobs":21`), "invalid_value", "top_logprobs", ""},
		{"logit_bias range", "/chat/completions", chat(`"logit_bias":{"1":-101}`), "invalid_value", "logit_bias", ""},
		{"response_format type", "/chat/completions", chat(`"response_format":{"type":"yaml"}`), "invalid_value", "response_format.type",
			`Invalid value for 'response_format.type': "yaml". Supported values are: 'text', 'json_object' and 'json_schema'.`},
		{"json_schema without a name", "/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`),
			"invalid_value", "response_format.json_schema.name", ""},
		{"service_tier", "/chat/completions", chat(`"service_tier":"scale"`), "invalid_value", "service_tier",
			`Invalid value for 'service_tier': "scale". Supported values are: 'auto', 'default', 'flex' and 'priority'.`},
		{"service_tier of a completion", "/completions", completion(`"service_tier":"turbo"`), "invalid_value", "service_tier", ""},
		{"split weight", "/chat/completions", chat(`"split":{"sim/qwen-2.5-7b":2}`), "invalid_value", "split.sim/qwen-2.5-7b",
			"Invalid 'split.sim/qwen-2.5-7b': a weight is a number greater than 0 and at most 1, got 2."},
		{"split of a completion", "/completions", completion(`"split":{"sim/qwen-2.5-7b":"half"}`), "invalid_value", "split.sim/qwen-2.5-7b",
			"Invalid type for 'split.sim/qwen-2.5-7b': expected a number, but got a string instead."},
		{"models not an array", "/chat/completions", chat(`"models":"x"`), "invalid_value", "models",
			"Invalid type for 'models': expected an array, but got a string instead."},
		{"max_tokens not an integer", "/chat/completions", chat(`"max_tokens":10.5`), "invalid_value", "max_tokens",
			"Invalid type for 'max_tokens': expected an integer, but got 10.5 instead."},
		{"messages not an array", "/chat/completions", `{"model":"` + model + `","messages":5}`, "invalid_value", "messages", ""},
		{"provider not an object", "/chat/completions", chat(`"provider":[]`), "invalid_value", "provider",
			"Invalid type for 'provider': expected an object, but got an array instead."},
		{"provider.sort", "/chat/completions", chat(`"provider":{"sort":5}`), "invalid_value", "provider.sort", ""},
		{"provider.order", "/chat/completions", chat(`"provider":{"order":"x"}`), "invalid_value", "provider.order", ""},
		{"provider.max_price", "/chat/completions", chat(`"provider":{"max_price":{"prompt":[]}}`), "invalid_value", "provider.max_price.prompt", ""},
		{"a body that is no object", "/chat/completions", `[1]`, "invalid_json", "", "The request body must be a JSON object."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rawRequest(t, env, http.MethodPost, tt.path, tt.body)
			e := errorOf(t, body)
			if status != http.StatusBadRequest || orEmpty(e.Code) != tt.code || orEmpty(e.Param) != tt.param || e.Type != "invalid_request_error" {
				t.Errorf("got %d %s on %q (%s); want 400 %s on %q", status, orEmpty(e.Code), orEmpty(e.Param), e.Message, tt.code, tt.param)
			}
			if tt.message != "" && e.Message != tt.message {
				t.Errorf("message %q\nwant %q", e.Message, tt.message)
			}
			for _, g := range goNames {
				if strings.Contains(e.Message, g) || strings.Contains(orEmpty(e.Param), g) {
					t.Errorf("message %q (param %q) holds Go's %q", e.Message, orEmpty(e.Param), g)
				}
			}
		})
	}
}

// TestStrict_OpenAIMembers: a request with OpenAI's members that reach no engine, at values
// that leave the answer as it is, is served.
func TestStrict_OpenAIMembers(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	params := chatParams("hi", 4)
	params.FrequencyPenalty = openai.Float(0)
	params.PresencePenalty = openai.Float(0)
	params.TopLogprobs = openai.Int(0)
	params.Logprobs = openai.Bool(false)
	params.Store = openai.Bool(true)
	params.Metadata = shared.Metadata{"team": "search"}
	params.User = openai.String("user-1")
	params.SafetyIdentifier = openai.String("hashed-user-1")
	params.PromptCacheKey = openai.String("greeting")
	params.ReasoningEffort = shared.ReasoningEffortLow
	params.Verbosity = openai.ChatCompletionNewParamsVerbosityLow
	params.ServiceTier = openai.ChatCompletionNewParamsServiceTierFlex
	params.Modalities = []string{"text"}
	params.MaxCompletionTokens = openai.Int(8)
	client := env.Client()
	if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatalf("chat: %v", err)
	}
	// Every nullable member as null, as some clients send them.
	status, body := rawRequest(t, env, http.MethodPost, "/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],
		"max_tokens":4,"temperature":null,"top_p":null,"n":null,"stop":null,"seed":null,"stream":null,"stream_options":null,
		"frequency_penalty":null,"presence_penalty":null,"logit_bias":null,"logprobs":null,"top_logprobs":null,"user":null,
		"tools":null,"tool_choice":null,"response_format":null,"audio":null,"modalities":null,"prediction":null,"store":null,
		"metadata":null,"reasoning_effort":null,"verbosity":null,"service_tier":null,"web_search_options":null,"moderation":null,
		"functions":null,"function_call":null,"prompt_cache_key":null,"prompt_cache_retention":null,"prompt_cache_options":null,
		"safety_identifier":null,"parallel_tool_calls":null,"provider":null,"models":null,"route":null,"split":null}`)
	if status != http.StatusOK {
		t.Errorf("nulls: %d %s", status, body)
	}
}

// TestStrict_ModelsOfKey: a key limited to some models sees only those in /v1/models, and the
// others do not exist for it.
func TestStrict_ModelsOfKey(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	const allowed, other = "sim/qwen-2.5-7b", "sim/llama-3.1-8b"
	secret, limited := store.NewKey(k.AccountID, store.KeyBuyer, "limited", time.Now())
	limited.Models = []string{allowed, "sim/not-served"}
	if err := env.Store.CreateKey(ctx, limited); err != nil {
		t.Fatal(err)
	}
	ids := func(key string) []string {
		t.Helper()
		status, body := rawRequestAs(t, env, key, http.MethodGet, "/models", "")
		var list struct{ Data []struct{ ID string } }
		if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
			t.Fatalf("GET /models: %d %s", status, body)
		}
		var out []string
		for _, m := range list.Data {
			out = append(out, m.ID)
		}
		return out
	}
	if got := ids(secret); len(got) != 1 || got[0] != allowed {
		t.Errorf("the limited key sees %v; want [%s]", got, allowed)
	}
	if got := ids(env.APIKey); len(got) < 2 {
		t.Errorf("an unlimited key sees %v; want every model served", got)
	}
	for _, tt := range []struct {
		path   string
		status int
	}{
		{"/models/" + allowed, http.StatusOK},
		{"/models/" + allowed + "/endpoints", http.StatusOK},
		{"/models/" + other, http.StatusNotFound},
		{"/models/" + other + "/endpoints", http.StatusNotFound},
	} {
		if status, body := rawRequestAs(t, env, secret, http.MethodGet, tt.path, ""); status != tt.status {
			t.Errorf("GET %s with the limited key: %d %s; want %d", tt.path, status, body, tt.status)
		}
		if status, body := rawRequest(t, env, http.MethodGet, tt.path, ""); status != http.StatusOK {
			t.Errorf("GET %s with an unlimited key: %d %s; want 200", tt.path, status, body)
		}
	}
}

// TestStrict_RevokedKey: a key revoked in the store, by another process as `shareai keys
// revoke` does, stops working once the key cache's TTL has passed (keycache_internal_test.go
// holds the bound exactly, on a clock of its own).
func TestStrict_RevokedKey(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.KeyCacheTTL = 50 * time.Millisecond })
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	secret, key := store.NewKey(k.AccountID, store.KeyBuyer, "to revoke", time.Now())
	if err := env.Store.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if status, body := rawRequestAs(t, env, secret, http.MethodGet, "/models", ""); status != http.StatusOK {
		t.Fatalf("before revocation: %d %s", status, body) // and now the key is cached
	}
	if _, err := env.Store.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	var last []byte
	env.WaitFor("the revoked key refused", func() bool {
		var status int
		status, last = rawRequestAs(t, env, secret, http.MethodGet, "/models", "")
		return status == http.StatusUnauthorized
	})
	if e := errorOf(t, last); orEmpty(e.Code) != "invalid_api_key" || !strings.Contains(e.Message, "revoked") {
		t.Errorf("refusal %+v; want invalid_api_key saying the key was revoked", e)
	}
}
