package batch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

const model = "sim/llama-3.1-8b"

// input is a batch input file of n lines of the endpoint, custom ids line-0, line-1, ….
func input(endpoint string, n int) string {
	var b strings.Builder
	for i := range n {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"batch line %d"}],"max_tokens":16}`, model, i)
		if endpoint == "/v1/completions" {
			body = fmt.Sprintf(`{"model":%q,"prompt":"batch line %d","max_tokens":16}`, model, i)
		}
		fmt.Fprintf(&b, `{"custom_id":"line-%d","method":"POST","url":%q,"body":%s}`+"\n", i, endpoint, body)
	}
	return b.String()
}

func upload(t *testing.T, c openai.Client, content string) *openai.FileObject {
	t.Helper()
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(content), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return f
}

func create(t *testing.T, c openai.Client, fileID, endpoint string) *openai.Batch {
	t.Helper()
	b, err := c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: fileID,
		Endpoint: openai.BatchNewParamsEndpoint(endpoint), CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata: map[string]string{"run": "test"}})
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	return b
}

// poll polls a batch until it has one of the statuses, failing the test after a minute.
func poll(t *testing.T, c openai.Client, id string, statuses ...openai.BatchStatus) *openai.Batch {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := c.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get batch: %v", err)
		}
		for _, s := range statuses {
			if b.Status == s {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s with %+v after a minute; want %v", id, b.Status, b.RequestCounts, statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outputLines reads a batch's output or error file, by custom id.
func outputLines(t *testing.T, c openai.Client, fileID string) map[string]api.BatchOutput {
	t.Helper()
	out := map[string]api.BatchOutput{}
	if fileID == "" {
		return out
	}
	resp, err := c.Files.Content(context.Background(), fileID)
	if err != nil {
		t.Fatalf("file content: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l api.BatchOutput
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if _, dup := out[l.CustomID]; dup {
			t.Errorf("custom_id %s answered twice", l.CustomID)
		}
		out[l.CustomID] = l
	}
	return out
}

// The official SDK uploads a file, creates a batch, polls it to completion and reads its
// output: every line answered once, with its custom_id, its answer the live endpoint's shape,
// and each billed as a request at the batch price.
func TestBatch_SDK(t *testing.T) {
	env := testenv.New(t)
	c := env.Client()
	for _, tt := range []struct{ endpoint, object string }{
		{"/v1/chat/completions", "chat.completion"},
		{"/v1/completions", "text_completion"},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			const n = 40
			f := upload(t, c, input(tt.endpoint, n))
			if f.Purpose != "batch" || f.Status != "processed" || f.Bytes != int64(len(input(tt.endpoint, n))) {
				t.Errorf("file %+v", f)
			}
			b := create(t, c, f.ID, tt.endpoint)
			if b.Status != openai.BatchStatusInProgress || b.RequestCounts.Total != n || b.Metadata["run"] != "test" {
				t.Errorf("created batch: status %s, counts %+v, metadata %v", b.Status, b.RequestCounts, b.Metadata)
			}
			b = poll(t, c, b.ID, openai.BatchStatusCompleted)
			if b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 || b.CompletedAt == 0 || b.ErrorFileID != "" {
				t.Errorf("completed batch: counts %+v, completed_at %d, error file %q", b.RequestCounts, b.CompletedAt, b.ErrorFileID)
			}
			out := outputLines(t, c, b.OutputFileID)
			if len(out) != n {
				t.Fatalf("%d output lines, want %d", len(out), n)
			}
			for i := range n {
				l, ok := out[fmt.Sprintf("line-%d", i)]
				if !ok || l.Response == nil || l.Response.StatusCode != http.StatusOK || l.Error != nil {
					t.Fatalf("line-%d: %+v", i, l)
				}
				var body struct {
					Object      string `json:"object"`
					ServiceTier string `json:"service_tier"`
					Usage       struct {
						TotalTokens int `json:"total_tokens"`
					}
				}
				if err := json.Unmarshal(l.Response.Body, &body); err != nil || body.Object != tt.object || body.Usage.TotalTokens == 0 {
					t.Fatalf("line-%d body %s: %v", i, l.Response.Body, err)
				}
				u, err := env.Store.UsageByRequest(context.Background(), l.Response.RequestID)
				if err != nil || u.ServiceTier != "bronze" || u.Cost <= 0 {
					t.Fatalf("line-%d usage %+v, %v; want a bronze record with a cost", i, u, err)
				}
				// The batch price: half the ask, plus the 5% fee.
				want := money.Price(25_000_000).Cost(u.PromptTokens) + money.Price(50_000_000).Cost(u.CompletionTokens)
				want += money.Fee(want, 500)
				if u.Cost != want {
					t.Errorf("line-%d cost %d, want %d (half the ask and the fee)", i, u.Cost, want)
				}
			}
		})
	}
}

// Invalid lines fail the batch before it starts, each with its line number and why, and none
// runs.
func TestBatch_Validation(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	c := env.Client()
	lines := []string{
		`{"custom_id":"ok","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}}`,
		`not json`,
		`{"custom_id":"ok","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"get","method":"GET","url":"/v1/chat/completions","body":{}}`,
		`{"custom_id":"url","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"x"}}`,
		`{"custom_id":"stream","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","stream":true,"messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"temp","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","temperature":7,"messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"unknown","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","bogus":1,"messages":[{"role":"user","content":"hi"}]}}`,
		`{"method":"POST","url":"/v1/chat/completions","body":{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}}`,
	}
	f := upload(t, c, strings.Join(lines, "\n")+"\n")
	b := create(t, c, f.ID, "/v1/chat/completions")
	if b.Status != openai.BatchStatusFailed || b.FailedAt == 0 {
		t.Fatalf("status %s, failed_at %d; want failed", b.Status, b.FailedAt)
	}
	want := map[int64]string{2: "invalid_json_line", 3: "duplicate_custom_id", 4: "invalid_value", 5: "mismatched_url",
		6: "unsupported_parameter", 7: "invalid_value", 8: "unknown_parameter", 9: "missing_required_parameter"}
	got := map[int64]string{}
	for _, e := range b.Errors.Data {
		got[e.Line] = e.Code
		if e.Message == "" {
			t.Errorf("line %d: no message", e.Line)
		}
	}
	for line, code := range want {
		if got[line] != code {
			t.Errorf("line %d: code %q, want %q (all: %v)", line, got[line], code, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("errors on lines %v, want %v", got, want)
	}
	if us, err := env.Store.Usages(context.Background(), accountOf(t, env), 10); err != nil || len(us) != 0 {
		t.Errorf("usage %v, %v: a failed batch runs nothing", us, err)
	}
	// The batch's own parameters are checked as OpenAI checks them.
	_, err := c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: f.ID, Endpoint: "/v1/embeddings", CompletionWindow: "24h"})
	if apiErr := new(openai.Error); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "endpoint" {
		t.Errorf("endpoint /v1/embeddings: %v, want 400 on endpoint", err)
	}
	_, err = c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: "file-nope", Endpoint: "/v1/chat/completions", CompletionWindow: "24h"})
	if apiErr := new(openai.Error); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("unknown input file: %v, want 404", err)
	}
}

// Another account's files and batches are 404s: read, listed, downloaded, cancelled, deleted
// or used as input.
func TestBatch_OtherAccount(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	c := env.Client()
	f := upload(t, c, input("/v1/chat/completions", 2))
	b := create(t, c, f.ID, "/v1/chat/completions")
	other, _ := buyer(t, env, "other")
	ctx := context.Background()
	is404 := func(what string, err error) {
		t.Helper()
		if apiErr := new(openai.Error); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("%s of another account: %v, want 404", what, err)
		}
	}
	_, err := other.Files.Get(ctx, f.ID)
	is404("get file", err)
	_, err = other.Files.Content(ctx, f.ID)
	is404("file content", err)
	_, err = other.Files.Delete(ctx, f.ID)
	is404("delete file", err)
	_, err = other.Batches.Get(ctx, b.ID)
	is404("get batch", err)
	_, err = other.Batches.Cancel(ctx, b.ID)
	is404("cancel batch", err)
	_, err = other.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"})
	is404("batch of a file", err)
	if page, err := other.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(page.Data) != 0 {
		t.Errorf("another account lists %v, %v", page, err)
	}
	if page, err := other.Files.List(ctx, openai.FileListParams{}); err != nil || len(page.Data) != 0 {
		t.Errorf("another account lists files %v, %v", page, err)
	}
	if _, err := c.Files.Get(ctx, f.ID); err != nil {
		t.Errorf("the owner reads its file: %v", err)
	}
	poll(t, c, b.ID, openai.BatchStatusCompleted)
	if page, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(1)}); err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID || page.HasMore {
		t.Errorf("the owner lists %v, %v", page, err)
	}
}

// buyer makes an account with credit and an API key, and returns an SDK client for it.
func buyer(t *testing.T, env *testenv.Env, name string) (openai.Client, string) {
	t.Helper()
	ctx := context.Background()
	acct, err := localnet.EnsureAccount(ctx, env.Store, name)
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: acct.ID, Kind: store.KeyBuyer, Name: "test", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Deposit(ctx, acct.ID, 100*money.USD, "deposit-"+name, time.Now()); err != nil {
		t.Fatal(err)
	}
	env.Logs.Secret(secret)
	return openai.NewClient(option.WithBaseURL(env.BaseURL()+"/"), option.WithAPIKey(secret), option.WithMaxRetries(0)), acct.ID
}

// accountOf is the account of the network's API key.
func accountOf(t *testing.T, env *testenv.Env) string {
	t.Helper()
	k, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	return k.AccountID
}

// With a files directory, files above the threshold are kept there, not in the database: an
// input read from it runs, an output written to it downloads, a deleted file leaves nothing;
// a file over the size limit is a 413 and leaves nothing either.
func TestBatch_FilesDir(t *testing.T) {
	dir := t.TempDir()
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Batch.FilesDir, c.Coordinator.Batch.FilesDirAbove = dir, 1024
		c.Coordinator.Batch.MaxFileBytes = 64 << 10
	})
	c := env.Client()
	ctx := context.Background()
	content := input("/v1/chat/completions", 30)
	f := upload(t, c, content)
	if _, err := os.Stat(filepath.Join(dir, f.ID)); err != nil {
		t.Fatalf("the input is not in the files directory: %v", err)
	}
	resp, err := c.Files.Content(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != content {
		t.Errorf("downloaded %d bytes, not the %d uploaded", len(got), len(content))
	}
	b := poll(t, c, create(t, c, f.ID, "/v1/chat/completions").ID, openai.BatchStatusCompleted)
	if _, err := os.Stat(filepath.Join(dir, b.OutputFileID)); err != nil {
		t.Errorf("the output is not in the files directory: %v", err)
	}
	if out := outputLines(t, c, b.OutputFileID); len(out) != 30 {
		t.Errorf("%d output lines, want 30", len(out))
	}
	if _, err := c.Files.Delete(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, f.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a deleted file's content is left: %v", err)
	}
	_, err = c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(strings.Repeat("x", 65<<10)), "big.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if apiErr := new(openai.Error); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a file over the limit: %v, want 413", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 { // the output file only
		t.Errorf("files directory holds %d entries, want the output's only", len(entries))
	}
}
