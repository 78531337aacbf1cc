package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/shareai/shareai/internal/testenv"
)

// openAPI is OpenAI's published response schemas (testdata/openapi/responses.yaml), compiled.
type openAPI struct{ compiler *jsonschema.Compiler }

const (
	openAPIURL   = "mem://openai/openapi.json"
	chatSchema   = "CreateChatCompletionResponse"
	chunkSchema  = "CreateChatCompletionStreamResponse"
	textSchema   = "CreateCompletionResponse"
	errorSchema  = "ErrorResponse"
	toolsRequest = `,"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}],"tool_choice":"required"`
	// textChunkSchema is a chunk of a streamed legacy completion: a CreateCompletionResponse
	// whose finish_reason is null until the last chunk. OpenAI's own streams are so, but the
	// schema, written for the whole answer, has no null there; loadOpenAPI adds this one.
	textChunkSchema = "ShareAICompletionChunk"
)

// loadOpenAPI compiles the response schemas. The description is OpenAPI 3.1, whose schemas
// are JSON Schema 2020-12, but some still say "nullable: true" as OpenAPI 3.0 did, which JSON
// Schema ignores: each such schema becomes itself or null.
func loadOpenAPI(t testing.TB) *openAPI {
	t.Helper()
	b, err := os.ReadFile("testdata/openapi/responses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := yamlAt(doc, "components", "schemas")
	var chunk map[string]any
	if err := yaml.Unmarshal(b, &chunk); err != nil { // a copy
		t.Fatal(err)
	}
	schemas[textChunkSchema] = yamlAt(chunk, "components", "schemas", textSchema)
	yamlAt(schemas, textChunkSchema, "properties", "choices", "items", "properties", "finish_reason")["nullable"] = true
	// Through JSON, so that the validator sees JSON's types, not YAML's.
	js, err := json.Marshal(nullable(doc))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openAPIURL, v); err != nil {
		t.Fatal(err)
	}
	return &openAPI{compiler: c}
}

// yamlAt walks a YAML document's mappings by keys.
func yamlAt(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// nullable rewrites OpenAPI 3.0's {"nullable": true, …} as {"anyOf": [{…}, {"type": "null"}]}.
func nullable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = nullable(x)
		}
		if v["nullable"] == true {
			delete(v, "nullable")
			return map[string]any{"anyOf": []any{v, map[string]any{"type": "null"}}}
		}
	case []any:
		for i, x := range v {
			v[i] = nullable(x)
		}
	}
	return v
}

// validate checks a JSON body against the named component schema.
func (o *openAPI) validate(t testing.TB, name string, body []byte) {
	t.Helper()
	sch, err := o.compiler.Compile(openAPIURL + "#/components/schemas/" + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, body)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("the body is not a valid %s: %v\n%s", name, err, body)
	}
}

// validateAnswer checks a 200 answer of path (/chat/completions or /completions), streamed
// or not, against the schemas.
func (o *openAPI) validateAnswer(t testing.TB, path string, body []byte) {
	t.Helper()
	whole, chunk := chatSchema, chunkSchema
	if path == "/completions" {
		whole, chunk = textSchema, textChunkSchema
	}
	if !bytes.HasPrefix(body, []byte("data: ")) {
		o.validate(t, whole, body)
		return
	}
	for _, ev := range sseData(t, body) {
		o.validate(t, chunk, ev)
	}
}

// rawRequest sends a request to the buyer API with the network's key and returns the status and
// the body.
func rawRequest(t testing.TB, env *testenv.Env, method, path, body string) (int, []byte) {
	t.Helper()
	return rawRequestAs(t, env, env.APIKey, method, path, body)
}

// rawRequestAs is rawRequest with another key.
func rawRequestAs(t testing.TB, env *testenv.Env, key, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, env.BaseURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// sseData returns the data of a stream's server-sent events, but the final [DONE].
func sseData(t testing.TB, stream []byte) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		switch {
		case !ok:
		case string(data) == "[DONE]":
			done = true
		default:
			out = append(out, bytes.Clone(data))
		}
	}
	if !done || len(out) == 0 {
		t.Fatalf("the stream has %d events and done %v:\n%s", len(out), done, stream)
	}
	return out
}

// TestSchema_Responses checks every kind of answer against OpenAI's published schemas.
func TestSchema_Responses(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	spec := loadOpenAPI(t)
	chat := `{"model":"` + model + `","messages":[{"role":"user","content":"Hello there."}],"seed":3,"max_tokens":24`
	completion := `{"model":"` + model + `","prompt":"Once upon a time","seed":3,"max_tokens":24`
	for _, tt := range []struct{ name, path, body string }{
		{"chat", "/chat/completions", chat + `}`},
		{"chat with a tier", "/chat/completions", chat + `,"service_tier":"flex"}`},
		{"chat with tools", "/chat/completions", chat + toolsRequest + `}`},
		{"chat stream", "/chat/completions", chat + `,"stream":true}`},
		{"chat stream with usage", "/chat/completions", chat + `,"stream":true,"stream_options":{"include_usage":true}}`},
		{"chat stream with tools", "/chat/completions", chat + `,"stream":true` + toolsRequest + `}`},
		{"completion", "/completions", completion + `}`},
		{"completion stream", "/completions", completion + `,"stream":true,"stream_options":{"include_usage":true}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rawRequest(t, env, http.MethodPost, tt.path, tt.body)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			spec.validateAnswer(t, tt.path, body)
		})
	}
	t.Run("models", func(t *testing.T) {
		status, body := rawRequest(t, env, http.MethodGet, "/models", "")
		if status != http.StatusOK || !bytes.Contains(body, []byte(model)) {
			t.Fatalf("%d %s", status, body)
		}
		spec.validate(t, "ListModelsResponse", body)
		status, body = rawRequest(t, env, http.MethodGet, "/models/"+model, "")
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		spec.validate(t, "Model", body)
	})
	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			method, path, body string
			status             int
		}{
			{http.MethodPost, "/chat/completions", chat + `,"max_token":5}`, http.StatusBadRequest},
			{http.MethodPost, "/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, http.StatusNotFound},
			{http.MethodPost, "/completions", `{`, http.StatusBadRequest},
			{http.MethodGet, "/models/nope", "", http.StatusNotFound},
			{http.MethodGet, "/nowhere", "", http.StatusNotFound},
		} {
			status, body := rawRequest(t, env, tt.method, tt.path, tt.body)
			if status != tt.status {
				t.Errorf("%s %s: %d %s; want %d", tt.method, tt.path, status, body, tt.status)
			}
			spec.validate(t, errorSchema, body)
		}
	})
}
