package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/testenv"
)

// syncBuffer is a bytes.Buffer a child process and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// child runs this binary as `shareai args…`, its stderr (the logs) to logs.
func child(t *testing.T, logs io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SHAREAI_TEST_AS_MAIN=1")
	cmd.Stderr = logs
	return cmd
}

// A whole run at debug level — a network up, buyers' requests streamed and not, a wrong key,
// a console sign-up and log-ins, a provider agent joining with its token and one refused with
// a wrong token, a graceful stop — logs no secret: no key, token, password or session cookie
// in any line, and each line about a buyer's request carries its request id.
func TestLogs_NoSecretInAFullRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	var upLogs, agentLogs, refusedLogs syncBuffer
	up := child(t, &upLogs, "up", "--addr", addr, "--data-dir", dir, "--providers", "2", "--sim-ttft", "0", "--sim-tps", "500",
		"--log-level", "debug", "--log-format", "json", "--metrics-addr", "")
	stdout, _ := up.StdoutPipe()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Process.Kill(); up.Wait() })
	var apiKey string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "export OPENAI_API_KEY="); ok {
			apiKey = k
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if apiKey == "" {
		t.Fatalf("up printed no key; its logs:\n%s", upLogs.String())
	}
	var creds struct {
		ProviderToken string `json:"provider_token"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "local-credentials.json")); err != nil || json.Unmarshal(b, &creds) != nil || creds.ProviderToken == "" {
		t.Fatalf("read the network's provider token: %v", err)
	}

	// Buyers' requests: their ids must be on the lines about them.
	var requestIDs []string
	post := func(key, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, stream := range []bool{false, true} {
		resp := post(apiKey, fmt.Sprintf(`{"model":"sim/llama-3.1-8b","stream":%t,"messages":[{"role":"user","content":"hello"}]}`, stream))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat: %d", resp.StatusCode)
		}
		requestIDs = append(requestIDs, resp.Header.Get("X-Request-Id"))
	}
	wrongKey := "sk-" + strings.Repeat("q", 48)
	if resp := post(wrongKey, `{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", resp.StatusCode)
	}
	if resp := post(apiKey, `{"model":"no/such-model","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a wrong model: %d", resp.StatusCode)
	}

	// The console: a sign-up, a wrong password, a log-in.
	const password = "correct-horse-battery-staple-42"
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	csrfField := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	form := func(path string, v url.Values) int {
		resp, err := browser.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfField.FindSubmatch(page)
		if m == nil {
			t.Fatalf("%s has no CSRF field", path)
		}
		v.Set("csrf", string(m[1]))
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err = browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := form("/signup", url.Values{"email": {"ops@example.com"}, "password": {password}, "account": {"ops-team"}, "role": {"buyer"}}); code != http.StatusOK {
		t.Fatalf("sign-up: %d", code)
	}
	var cookies []string
	u, _ := url.Parse(base)
	for _, c := range jar.Cookies(u) {
		cookies = append(cookies, c.Value)
	}
	browser.Jar, _ = cookiejar.New(nil)
	form("/login", url.Values{"email": {"ops@example.com"}, "password": {password + "-wrong"}})
	form("/login", url.Values{"email": {"ops@example.com"}, "password": {password}})
	for _, c := range browser.Jar.Cookies(u) {
		cookies = append(cookies, c.Value)
	}
	if len(cookies) < 2 {
		t.Fatalf("the console set %d cookies, want a session and a CSRF cookie", len(cookies))
	}

	// A provider joins with the network's token; another is refused with a wrong one.
	agentArgs := func(token, dataDir string) []string {
		return []string{"provider", "--coordinator", base, "--token", token, "--engine", "sim", "--data-dir", dataDir,
			"--control", "", "--log-level", "debug", "--log-format", "json"}
	}
	agentDir := t.TempDir()
	agent := child(t, &agentLogs, agentArgs(creds.ProviderToken, agentDir)...)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	testenv.WaitFor(t, "the agent to register", func() bool { return strings.Contains(agentLogs.String(), "registered") })
	wrongToken := "spt-" + strings.Repeat("z", 48)
	refused := child(t, &refusedLogs, agentArgs(wrongToken, t.TempDir())...)
	if err := refused.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { refused.Process.Kill(); refused.Wait() })
	testenv.WaitFor(t, "the agent with a wrong token to be refused", func() bool {
		return strings.Contains(refusedLogs.String(), "rejected") || strings.Contains(refusedLogs.String(), "refused") || strings.Contains(refusedLogs.String(), "401")
	})
	control, _ := os.ReadFile(filepath.Join(agentDir, "control.token"))

	// Stop everything gracefully, so that the shutdown's lines are read too.
	for _, p := range []*exec.Cmd{agent, refused, up} {
		p.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30s of SIGINT", p.Args[1])
		}
	}

	secrets := map[string]string{"API key": apiKey, "provider token": creds.ProviderToken, "wrong key": wrongKey,
		"wrong token": wrongToken, "password": password}
	if len(control) > 0 {
		secrets["control token"] = strings.TrimSpace(string(control))
	}
	for i, c := range cookies {
		secrets[fmt.Sprintf("cookie %d", i)] = c
	}
	lines := 0
	for name, logs := range map[string]string{"up": upLogs.String(), "agent": agentLogs.String(), "refused agent": refusedLogs.String()} {
		for line := range strings.Lines(logs) {
			lines++
			for what, secret := range secrets {
				if strings.Contains(line, secret) {
					t.Errorf("%s logged the %s: %s", name, what, strings.ReplaceAll(line, secret, "<"+what+">"))
				}
			}
			if m := testenv.SecretPattern.FindString(line); m != "" {
				t.Errorf("%s logged a whole key or token (%s…): %s", name, m[:6], line)
			}
		}
	}
	t.Logf("%d lines", lines)
	if os.Getenv("SHAREAI_TEST_LOG") != "" {
		t.Log(upLogs.String(), agentLogs.String(), refusedLogs.String())
	}
	if lines < 15 {
		t.Errorf("only %d log lines at debug level: the run logged too little to tell", lines)
	}
	// Each buyer's request is logged with its id, and with its key by prefix.
	for _, id := range requestIDs {
		var found bool
		for line := range strings.Lines(upLogs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["request_id"] == id && rec["msg"] == "request" {
				found = true
				if rec["key"] != apiKey[:11] {
					t.Errorf("request %s logged key %v, want its prefix %s", id, rec["key"], apiKey[:11])
				}
			}
		}
		if !found {
			t.Errorf("no log line ends request %s with its id", id)
		}
	}
}
