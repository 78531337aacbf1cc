package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), []string{c.name, "--help"}, &out, &errb)
			help := out.String() + errb.String()
			if code != 0 || len(help) < 40 {
				t.Errorf("shareai %s --help = %d with %q; want 0 and an explanation", c.name, code, help)
			}
		})
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"no-such-command"}, &out, &out); code != 2 || !strings.Contains(out.String(), "unknown command") {
		t.Errorf("unknown command: %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"up", "--providers", "0"}, io.Discard, &out); code != 1 || !strings.Contains(out.String(), "--providers") {
		t.Errorf("bad flag value: %d %q; want 1 naming the flag", code, out.String())
	}
}

// upOnce runs `shareai up` until it prints its environment, sends one chat completion with it,
// and stops it. It returns the API key it printed.
func upOnce(t *testing.T, dataDir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"up", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--sim-ttft", "0", "--sim-tps", "0", "--log-level", "error", "--metrics-addr", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var baseURL, key, curl string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "export OPENAI_BASE_URL="):
			baseURL = strings.TrimPrefix(line, "export OPENAI_BASE_URL=")
		case strings.HasPrefix(line, "export OPENAI_API_KEY="):
			key = strings.TrimPrefix(line, "export OPENAI_API_KEY=")
		case strings.HasPrefix(line, "curl "):
			curl = line
		}
		if curl != "" {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if !strings.HasPrefix(baseURL, "http://127.0.0.1:") || !strings.HasPrefix(key, "sk-") || !strings.Contains(curl, `"model":"sim/`) {
		t.Fatalf("up printed base URL %q, key %q, curl %q", baseURL, key, curl)
	}
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/chat/completions",
		strings.NewReader(`{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hello"}],"max_tokens":8}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("chat completion against up: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("up exited %d after Ctrl-C, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop after Ctrl-C")
	}
	return key
}

// `shareai up` serves a request with the key it prints, stops cleanly, and a second run on the
// same data dir prints the same key.
func TestUp(t *testing.T) {
	dir := t.TempDir()
	first := upOnce(t, dir)
	if second := upOnce(t, dir); second != first {
		t.Errorf("second up printed key %s…, first %s…; want the same", second[:8], first[:8])
	}
}
