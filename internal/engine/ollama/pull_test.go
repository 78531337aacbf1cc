package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// progressCall is one call of a Pull progress function.
type progressCall struct {
	status           string
	completed, total int64
}

func TestPull(t *testing.T) {
	tests := []struct {
		name    string
		a       answer
		want    []progressCall
		wantErr string
	}{{
		name: "documented stream",
		a:    file(t, "recorded/ollama_api_pull_stream_doc.ndjson"),
		want: []progressCall{
			{"pulling manifest", 0, 0},
			{"pulling digestname", 241970, 2142590208},
			{"verifying sha256 digest", 0, 0},
			{"writing manifest", 0, 0},
			{"removing any unused layers", 0, 0},
			{"success", 0, 0},
		},
	}, {
		name:    "error line",
		a:       file(t, "handmade/pull_stream_error.ndjson"),
		want:    []progressCall{{"pulling manifest", 0, 0}},
		wantErr: "ollama engine: pull llama3.2: pull model manifest: file does not exist",
	}, {
		name:    "stream cut before success",
		a:       answer{200, "application/x-ndjson", []byte("{\"status\":\"pulling manifest\"}\n{\"status\":\"pulling dde5")},
		want:    []progressCall{{"pulling manifest", 0, 0}},
		wantErr: "unexpected EOF",
	}, {
		name:    "stream ended before success",
		a:       answer{200, "application/x-ndjson", []byte("{\"status\":\"pulling manifest\"}\n")},
		want:    []progressCall{{"pulling manifest", 0, 0}},
		wantErr: `stream ended before "success"`,
	}, {
		name:    "status",
		a:       jsonAnswer(500, `{"error":"mkdir /usr/share/ollama: permission denied"}`),
		wantErr: "500: mkdir /usr/share/ollama: permission denied",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, f := serve(t, Config{}, map[string]http.Handler{"POST /api/pull": tt.a})
			var got []progressCall
			err := e.Pull(context.Background(), "llama3.2", func(status string, completed, total int64) {
				got = append(got, progressCall{status, completed, total})
			})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("progress = %v, want %v", got, tt.want)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Pull error = %v, want one containing %q", err, tt.wantErr)
			}
			if body := string(f.last(t, "/api/pull").body); body != `{"model":"llama3.2","name":"llama3.2","stream":true}` {
				t.Errorf("pull body = %s", body)
			}
		})
	}
}

func TestPull_cancel(t *testing.T) {
	started, gone := make(chan struct{}), make(chan struct{})
	e, _ := serve(t, Config{}, map[string]http.Handler{"POST /api/pull": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, "{\"status\":\"pulling manifest\"}\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(gone)
	})})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	err := e.Pull(ctx, "llama3.2", nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Pull error = %v, want context.Canceled", err)
	}
	<-gone
}

func TestEnsurePulled(t *testing.T) {
	layers := file(t, "handmade/pull_stream_layers.ndjson")
	missing := file(t, "handmade/pull_stream_error.ndjson")
	routes := map[string]http.Handler{
		"GET /api/tags": file(t, "recorded/ollama_api_tags.json"),
		"POST /api/pull": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req pullRequest
			json.NewDecoder(r.Body).Decode(&req)
			if req.Model == "no-such-model" {
				missing.ServeHTTP(w, r)
				return
			}
			layers.ServeHTTP(w, r)
		}),
	}
	e, f := serve(t, Config{Pull: []string{"llama3.2", "qwen3:0.6b", "no-such-model", "deepseek-r1:latest"}}, routes)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	err := e.EnsurePulled(context.Background(), log)
	if err == nil || !strings.Contains(err.Error(), "pull no-such-model: pull model manifest: file does not exist") {
		t.Errorf("EnsurePulled error = %v, want the failed pull of no-such-model", err)
	}
	var pulled []string
	for _, r := range f.requests("/api/pull") {
		var req pullRequest
		json.Unmarshal(r.body, &req)
		pulled = append(pulled, req.Model)
	}
	if want := []string{"qwen3:0.6b", "no-such-model"}; !reflect.DeepEqual(pulled, want) {
		t.Errorf("pulled %q, want %q (the models not installed)", pulled, want)
	}
	want := `level=INFO msg="pulling model" model=qwen3:0.6b
level=INFO msg=pull model=qwen3:0.6b status="pulling manifest"
level=INFO msg=pull model=qwen3:0.6b status="pulling dde5aa3fc5ff" bytes=2019377376
level=INFO msg=pull model=qwen3:0.6b status="pulling dde5aa3fc5ff" percent=50
level=INFO msg=pull model=qwen3:0.6b status="pulling dde5aa3fc5ff" percent=100
level=INFO msg=pull model=qwen3:0.6b status="pulling 966de95ca8a6" bytes=1429
level=INFO msg=pull model=qwen3:0.6b status="verifying sha256 digest"
level=INFO msg=pull model=qwen3:0.6b status="writing manifest"
level=INFO msg=pull model=qwen3:0.6b status=success
level=INFO msg="pulled model" model=qwen3:0.6b
level=INFO msg="pulling model" model=no-such-model
level=INFO msg=pull model=no-such-model status="pulling manifest"
`
	if logs.String() != want {
		t.Errorf("log =\n%s\nwant\n%s", logs.String(), want)
	}
}

func TestEnsurePulled_nothingToPull(t *testing.T) {
	e, f := serve(t, Config{Models: []string{"llama3.2"}}, nil)
	if err := e.EnsurePulled(context.Background(), nil); err != nil {
		t.Errorf("EnsurePulled: %v", err)
	}
	if len(f.got) != 0 {
		t.Errorf("Ollama was asked %d requests, want none", len(f.got))
	}
}
