package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/testenv"
)

// getBody GETs a URL, with the network's API key when key is set, and returns its body.
func getBody(t *testing.T, env *testenv.Env, path string, key bool) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL()+path, nil)
	if key {
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// A buyer saves a request's receipts and the coordinator's key as the API gives them, and
// checks them offline, pinned to that key.
func TestReceiptVerify_FromTheAPI(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	var resp *http.Response
	client := env.Client()
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Receipt, please.")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	testenv.WaitFor(t, "the request to be billed", func() bool {
		u, _ := env.Store.UsageByRequest(context.Background(), reqID)
		return u != nil
	})
	dir := t.TempDir()
	receipts := filepath.Join(dir, "receipts.json")
	if err := os.WriteFile(receipts, getBody(t, env, "/generation/receipts?id="+reqID, true), 0o600); err != nil {
		t.Fatal(err)
	}
	var k gateway.ReceiptKey
	if err := json.Unmarshal(getBody(t, env, "/receipts/key", false), &k); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "coordinator.pub")
	if err := os.WriteFile(keyFile, []byte(k.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errs := shareai(t, "receipt", "verify", "--coordinator-key", "@"+keyFile, receipts)
	if code != 0 || !strings.HasPrefix(out, "OK      "+reqID+"  job_") || strings.Count(out, "\n") != 1 || errs != "" {
		t.Errorf("receipt verify = %d\nstdout: %s\nstderr: %s\nwant 0 and one OK line for %s", code, out, errs, reqID)
	}

	// Pinned to another coordinator's key, the same receipts fail.
	other := base64.StdEncoding.EncodeToString(receiptOtherKey.Public().(ed25519.PublicKey))
	if code, out, _ := shareai(t, "receipt", "verify", "--coordinator-key", other, receipts); code != 1 || !strings.HasPrefix(out, "FAILED") {
		t.Errorf("pinned to another key: exit %d, %q; want 1 and FAILED", code, out)
	}
}
