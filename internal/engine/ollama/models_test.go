package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
)

// modelRoutes answers as an Ollama 0.5.1 with the models of the API documentation: tags and
// show (the same answer, llama3's, for every model) recorded, version as documented.
func modelRoutes(t *testing.T) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /api/tags":    file(t, "recorded/ollama_api_tags.json"),
		"POST /api/show":   file(t, "handmade/api_show_llama3.json"),
		"GET /api/version": jsonAnswer(200, `{"version":"0.5.1"}`),
		"GET /api/ps":      file(t, "recorded/ollama_api_ps.json"),
	}
}

// The models of recorded/ollama_api_tags.json, with the context length of
// handmade/api_show_llama3.json.
var (
	deepseekR1 = engine.Model{Name: "deepseek-r1:latest", ContextLength: 8192, Continues: true,
		Quantization: "Q4_K_M", Parameters: 7.6, SizeBytes: 4683075271}
	llama32 = engine.Model{Name: "llama3.2:latest", ContextLength: 8192, Continues: true,
		Quantization: "Q4_K_M", Parameters: 3.2, SizeBytes: 2019393189}
)

func named(m engine.Model, name string) engine.Model {
	m.Name = name
	return m
}

func withContext(m engine.Model, n int) engine.Model {
	m.ContextLength = n
	return m
}

func TestModels(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		routes map[string]http.Handler // replacing modelRoutes'
		want   []engine.Model
	}{{
		name: "every installed model",
		want: []engine.Model{deepseekR1, llama32},
	}, {
		name: "allow-list as configured, installed only",
		cfg:  Config{Models: []string{"llama3.2", "mistral"}},
		want: []engine.Model{named(llama32, "llama3.2")},
	}, {
		name: "models to pull are offered",
		cfg:  Config{Models: []string{"llama3.2"}, Pull: []string{"deepseek-r1:latest", "llama3.2:latest"}},
		want: []engine.Model{named(llama32, "llama3.2"), deepseekR1},
	}, {
		name: "num_ctx below the model's",
		cfg:  Config{NumCtx: 4096},
		want: []engine.Model{withContext(deepseekR1, 4096), withContext(llama32, 4096)},
	}, {
		name: "num_ctx above the model's",
		cfg:  Config{NumCtx: 32768},
		want: []engine.Model{deepseekR1, llama32},
	}, {
		name:   "show fails",
		routes: map[string]http.Handler{"POST /api/show": jsonAnswer(500, `{"error":"boom"}`)},
		want:   []engine.Model{withContext(deepseekR1, 0), withContext(llama32, 0)},
	}, {
		name:   "show fails, num_ctx",
		cfg:    Config{NumCtx: 4096},
		routes: map[string]http.Handler{"POST /api/show": jsonAnswer(500, `{"error":"boom"}`)},
		want:   []engine.Model{withContext(deepseekR1, 4096), withContext(llama32, 4096)},
	}, {
		name: "parameters from show when the list has none",
		routes: map[string]http.Handler{"GET /api/tags": jsonAnswer(200,
			`{"models":[{"name":"custom:latest","size":5,"digest":"d","details":{"parameter_size":"","quantization_level":""}}]}`)},
		want: []engine.Model{{Name: "custom:latest", ContextLength: 8192, Continues: true, Parameters: 8.030261248, SizeBytes: 5}},
	}, {
		name:   "Ollama before 0.2.8 does not continue",
		routes: map[string]http.Handler{"GET /api/version": jsonAnswer(200, `{"version":"0.2.7"}`)},
		want: []engine.Model{{Name: "deepseek-r1:latest", ContextLength: 8192, Quantization: "Q4_K_M", Parameters: 7.6, SizeBytes: 4683075271},
			{Name: "llama3.2:latest", ContextLength: 8192, Quantization: "Q4_K_M", Parameters: 3.2, SizeBytes: 2019393189}},
	}, {
		name:   "nothing installed",
		routes: map[string]http.Handler{"GET /api/tags": jsonAnswer(200, `{"models":[]}`)},
		want:   []engine.Model{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routes := modelRoutes(t)
			for k, v := range tt.routes {
				routes[k] = v
			}
			e, f := serve(t, tt.cfg, routes)
			got, err := e.Models(context.Background())
			if err != nil {
				t.Fatalf("Models: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Models() =\n%+v\nwant\n%+v", got, tt.want)
			}
			for _, r := range f.requests("/api/show") {
				var body map[string]string
				if err := json.Unmarshal(r.body, &body); err != nil || body["model"] == "" || body["name"] != body["model"] {
					t.Errorf("show body = %s, want the model's name as model and name", r.body)
				}
			}
		})
	}
}

func TestModels_showOncePerDigest(t *testing.T) {
	tags := `{"models":[{"name":"llama3.2:latest","size":5,"digest":"DIGEST","details":{"parameter_size":"3.2B"}}]}`
	routes := modelRoutes(t)
	routes["GET /api/tags"] = jsonAnswer(200, tags)
	e, f := serve(t, Config{}, routes)
	for range 2 {
		if _, err := e.Models(context.Background()); err != nil {
			t.Fatalf("Models: %v", err)
		}
	}
	if n := len(f.requests("/api/show")); n != 1 {
		t.Errorf("%d show requests for a model asked twice, want 1", n)
	}
	// A model pulled again has another digest, and maybe another context length.
	e.shown = map[string]modelInfo{"llama3.2:latest@OLD": {contextLength: 1}}
	got, err := e.Models(context.Background())
	if err != nil || len(got) != 1 || got[0].ContextLength != 8192 {
		t.Errorf("Models() = %+v, %v, want the new digest's context length 8192", got, err)
	}
}

func TestModels_error(t *testing.T) {
	routes := modelRoutes(t)
	routes["GET /api/tags"] = jsonAnswer(500, `{"error":"could not read manifests"}`)
	e, _ := serve(t, Config{}, routes)
	_, err := e.Models(context.Background())
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "could not read manifests") {
		t.Errorf("Models() error = %v, want one with 500 and the message", err)
	}
}

func TestModels_connectionRefused(t *testing.T) {
	e, _ := serve(t, Config{}, nil)
	e.base = closedURL(t)
	_, err := e.Models(context.Background())
	if err == nil {
		t.Fatal("Models() succeeded, want an error")
	}
	if _, ok := errors.AsType[*engine.RequestError](err); ok {
		t.Errorf("error %v is a *engine.RequestError, want a plain error", err)
	}
}

func TestContinues(t *testing.T) {
	tests := []struct {
		name    string
		version answer
		want    bool
	}{
		{"0.2.8", jsonAnswer(200, `{"version":"0.2.8"}`), true},
		{"0.2.8 release candidate (issue 5890)", jsonAnswer(200, `{"version":"0.2.8-rc1"}`), true},
		{"0.2.7", jsonAnswer(200, `{"version":"0.2.7"}`), false},
		{"0.1.48", jsonAnswer(200, `{"version":"0.1.48"}`), false},
		{"0.12.6", jsonAnswer(200, `{"version":"0.12.6"}`), true},
		{"1.0.0", jsonAnswer(200, `{"version":"1.0.0"}`), true},
		{"built from source", jsonAnswer(200, `{"version":"0.0.0"}`), true},
		{"unreadable", jsonAnswer(200, `{"version":"main-abc123"}`), true},
		{"no /api/version: before 0.1.3x", answer{404, "text/plain", []byte("404 page not found")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := serve(t, Config{}, map[string]http.Handler{"GET /api/version": tt.version})
			got, err := e.continues(context.Background())
			if err != nil || got != tt.want {
				t.Errorf("continues() = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseParameterSize(t *testing.T) {
	tests := []struct {
		s    string
		want float64
	}{
		{"8.0B", 8}, {"7.6B", 7.6}, {"494.03M", 0.49403}, {"137M", 0.137}, {"1.5T", 1500},
		{"22K", 0.000022}, {" 70B ", 70}, {"", 0}, {"8", 0}, {"B", 0}, {"-1B", 0}, {"eightB", 0},
	}
	for _, tt := range tests {
		if got := parseParameterSize(tt.s); abs(got-tt.want) > 1e-12 {
			t.Errorf("parseParameterSize(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func abs(f float64) float64 { return max(f, -f) }

func TestLoaded(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ps   answer
		want []string
	}{
		{"every model", Config{}, file(t, "recorded/ollama_api_ps.json"), []string{"mistral:latest"}},
		{"as configured", Config{Models: []string{"llama3.2", "Mistral"}}, file(t, "recorded/ollama_api_ps.json"), []string{"Mistral"}},
		{"not offered", Config{Models: []string{"llama3.2"}}, file(t, "recorded/ollama_api_ps.json"), []string{}},
		{"none loaded", Config{}, jsonAnswer(200, `{"models":[]}`), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := serve(t, tt.cfg, map[string]http.Handler{"GET /api/ps": tt.ps})
			got, err := e.Loaded(context.Background())
			if err != nil {
				t.Fatalf("Loaded: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Loaded() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoaded_error(t *testing.T) {
	e, _ := serve(t, Config{}, nil)
	if _, err := e.Loaded(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Loaded() error = %v, want one with 404", err)
	}
}
