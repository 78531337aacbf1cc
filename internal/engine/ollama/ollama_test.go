package ollama

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// answer is what a fake Ollama replays.
type answer struct {
	status      int
	contentType string
	body        []byte
}

// file is an answer of status 200 with the body of testdata/name, replayed verbatim.
func file(t testing.TB, name string) answer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ct := "application/json; charset=utf-8"
	if strings.HasSuffix(name, ".ndjson") {
		ct = "application/x-ndjson"
	}
	return answer{status: http.StatusOK, contentType: ct, body: b}
}

// jsonAnswer is an answer with a JSON body.
func jsonAnswer(status int, body string) answer {
	return answer{status: status, contentType: "application/json; charset=utf-8", body: []byte(body)}
}

func (a answer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", a.contentType)
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// request is a request a fake Ollama got.
type request struct {
	method, path string
	body         []byte
}

// fake is an Ollama server that answers each route ("GET /api/tags") with its handler and
// every other request as Ollama does an unknown path.
type fake struct {
	mu  sync.Mutex
	got []request
}

// requests returns the requests the fake got for path.
func (f *fake) requests(path string) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs []request
	for _, r := range f.got {
		if r.path == path {
			rs = append(rs, r)
		}
	}
	return rs
}

// last returns the last request the fake got for path; it fails the test if there is none.
func (f *fake) last(t testing.TB, path string) request {
	t.Helper()
	rs := f.requests(path)
	if len(rs) == 0 {
		t.Fatalf("no request to %s", path)
	}
	return rs[len(rs)-1]
}

// serve starts a fake Ollama and returns an engine for it, configured by cfg but for its
// BaseURL, whose tool call ids are call_1, call_2, ...
func serve(t *testing.T, cfg Config, routes map[string]http.Handler) (*Engine, *fake) {
	t.Helper()
	f := &fake{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound) // as Ollama's router does
	})
	for route, h := range routes {
		mux.Handle(route, h)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, request{r.Method, r.URL.Path, body})
		f.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	e.newID = func() string {
		n++
		return "call_" + strconv.Itoa(n)
	}
	return e, f
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		wantErr  string
		wantBase string
	}{
		{"default", Config{}, "", "http://127.0.0.1:11434"},
		{"trailing slash", Config{BaseURL: " http://gpu-box:11434/ "}, "", "http://gpu-box:11434"},
		{"no scheme", Config{BaseURL: "localhost:11434"}, "scheme must be http or https", ""},
		{"no host", Config{BaseURL: "http://"}, "no host", ""},
		{"query", Config{BaseURL: "http://h:11434?x=1"}, "query or fragment", ""},
		{"bad", Config{BaseURL: "http://h:port"}, "base URL", ""},
		{"negative num_ctx", Config{NumCtx: -1}, "num_ctx -1 is negative", ""},
		{"empty model", Config{Models: []string{"llama3.2", " "}}, "a configured model has no name", ""},
		{"empty pull", Config{Pull: []string{""}}, "a configured model has no name", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%+v) error = %v, want one containing %q", tt.cfg, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v): %v", tt.cfg, err)
			}
			if e.base != tt.wantBase {
				t.Errorf("base = %q, want %q", e.base, tt.wantBase)
			}
			if got := e.Name(); got != "ollama" {
				t.Errorf("Name() = %q, want ollama", got)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct{ name, want string }{
		{"llama3.2", "llama3.2:latest"},
		{"llama3.2:latest", "llama3.2:latest"},
		{" Llama3.2:3B ", "llama3.2:3b"},
		{"registry.ollama.ai/library/llama3.2", "llama3.2:latest"},
		{"hf.co/bartowski/Qwen2.5-0.5B-GGUF:Q4_K_M", "hf.co/bartowski/qwen2.5-0.5b-gguf:q4_k_m"},
		{"localhost:5000/team/model", "localhost:5000/team/model:latest"},
	}
	for _, tt := range tests {
		if got := canonical(tt.name); got != tt.want {
			t.Errorf("canonical(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// closedURL is the address of a server that is gone: connecting to it is refused.
func closedURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}
