package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
)

var (
	receiptNodeKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	receiptCoordKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	receiptOtherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
)

// signedReceipt returns the JSON of a job's receipt, signed by the node and countersigned by
// coordinator; edit, if not nil, changes the receipt the node signs.
func signedReceipt(t *testing.T, jobID string, coordinator ed25519.PrivateKey, edit func(*receipt.Receipt)) json.RawMessage {
	t.Helper()
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: "Hello, world."})
	start := time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)
	nodePub := receiptNodeKey.Public().(ed25519.PublicKey)
	r := receipt.Receipt{
		JobID: jobID, NodeID: fleet.NodeID(nodePub), Model: "sim/llama-3.1-8b",
		PromptTokens: 12, CompletionTokens: 34, FinishReason: "stop",
		OutputSHA256: h.Sum(), OutputBytes: h.Len(), StartedAt: start, EndedAt: start.Add(1500 * time.Millisecond),
	}
	if edit != nil {
		edit(&r)
	}
	s, err := receipt.Sign(receiptNodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	saw := receipt.Expected{
		JobID: r.JobID, NodeID: r.NodeID, NodeKey: nodePub, Model: r.Model,
		Usage:        protocol.Usage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens},
		FinishReason: r.FinishReason, OutputSHA256: r.OutputSHA256, OutputBytes: r.OutputBytes,
		Sent: start, Ended: r.EndedAt,
	}
	if err := receipt.Countersign(coordinator, &s, saw, "req_1", start.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReceiptVerify(t *testing.T) {
	dir := t.TempDir()
	good := signedReceipt(t, "job_1", receiptCoordKey, nil)
	good2 := signedReceipt(t, "job_2", receiptCoordKey, nil)
	tampered := bytes.Replace(good, []byte(`"completion_tokens":34`), []byte(`"completion_tokens":340`), 1)
	if bytes.Equal(tampered, good) {
		t.Fatalf("no completion_tokens to change in %s", good)
	}
	otherCoordinator := signedReceipt(t, "job_3", receiptOtherKey, nil)
	alienNode := signedReceipt(t, "job_4", receiptCoordKey, func(r *receipt.Receipt) { r.NodeID = "node_someoneelse" })
	coordKey := base64.StdEncoding.EncodeToString(receiptCoordKey.Public().(ed25519.PublicKey))
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	list := func(rs ...json.RawMessage) []byte {
		b, err := json.MarshalIndent(map[string]any{"receipts": rs}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keyFile := write("coordinator.pub", []byte(coordKey+"\n"))

	const okLine = "OK      req_1  job_1  node_"
	tests := []struct {
		name       string
		args       []string
		stdin      []byte
		wantCode   int
		wantOut    []string // lines of stdout begin with these, in order
		wantStderr string
	}{
		{name: "one receipt, any coordinator", args: []string{write("one.json", good)},
			wantOut: []string{okLine}, wantStderr: "pin it with --coordinator-key"},
		{name: "a request's receipts, pinned", args: []string{write("page.json", list(good, good2)), "--coordinator-key", coordKey},
			wantOut: []string{okLine, "OK      req_1  job_2  node_"}},
		{name: "pinned from a file", args: []string{"--coordinator-key", "@" + keyFile, write("array.json", []byte("["+string(good)+"]"))},
			wantOut: []string{okLine}},
		{name: "from stdin", args: []string{"-", "--coordinator-key", coordKey}, stdin: good, wantOut: []string{okLine}},
		{name: "tampered", args: []string{write("tampered.json", tampered)}, wantCode: 1,
			wantOut: []string{`FAILED  receipt 1 (job "job_1"): the node's signature does not match`}, wantStderr: "1 of 1 receipts failed"},
		{name: "one good, one tampered", args: []string{write("mixed.json", list(good, tampered))}, wantCode: 1,
			wantOut: []string{okLine, `FAILED  receipt 2 (job "job_1")`}, wantStderr: "1 of 2 receipts failed"},
		{name: "an untrusted coordinator", args: []string{"--coordinator-key", coordKey, write("other.json", otherCoordinator)}, wantCode: 1,
			wantOut: []string{`FAILED  receipt 1 (job "job_3"): the receipt is countersigned by a coordinator key other than the trusted one`}, wantStderr: "1 of 1 receipts failed"},
		{name: "another node's id", args: []string{write("alien.json", alienNode)}, wantCode: 1,
			wantOut: []string{`FAILED  receipt 1 (job "job_4"): the receipt's node_id "node_someoneelse" is not the id of the node key`}, wantStderr: "1 of 1 receipts failed"},
		{name: "not a receipt", args: []string{write("junk.json", []byte(`{"receipts":[42]}`))}, wantCode: 1,
			wantOut: []string{"FAILED  receipt 1: not a signed receipt"}, wantStderr: "1 of 1 receipts failed"},
		{name: "not JSON", args: []string{write("text.txt", []byte("hello"))}, wantCode: 1, wantStderr: "not JSON"},
		{name: "no receipts", args: []string{write("empty.json", []byte(`{"receipts":[]}`))}, wantCode: 1, wantStderr: "no receipts"},
		{name: "no such file", args: []string{filepath.Join(dir, "missing.json")}, wantCode: 1, wantStderr: "missing.json"},
		{name: "a bad key", args: []string{"--coordinator-key", "abc", write("bad-key.json", good)}, wantCode: 1, wantStderr: "--coordinator-key"},
		{name: "no file", args: nil, wantCode: 2, wantStderr: "wrong number of arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stdin != nil {
				stdin = bytes.NewReader(tt.stdin)
				t.Cleanup(func() { stdin = os.Stdin })
			}
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"receipt", "verify"}, tt.args...), &out, &errb)
			if code != tt.wantCode {
				t.Errorf("exit %d; want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out.String(), errb.String())
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(tt.wantOut) == 0 {
				lines = lines[:0]
				if out.Len() > 0 {
					t.Errorf("stdout %q; want nothing", out.String())
				}
			}
			if len(lines) != len(tt.wantOut) {
				t.Fatalf("stdout:\n%s\nwant %d lines", out.String(), len(tt.wantOut))
			}
			for i, want := range tt.wantOut {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d: %q; want it to begin %q", i+1, lines[i], want)
				}
			}
			if !strings.Contains(errb.String(), tt.wantStderr) || tt.wantStderr == "" && errb.Len() > 0 {
				t.Errorf("stderr %q; want %q", errb.String(), tt.wantStderr)
			}
		})
	}
}

// An OK line shows what the receipt says, and nothing a receipt's strings could draw.
func TestReceiptVerify_Line(t *testing.T) {
	b := signedReceipt(t, "job_1", receiptCoordKey, func(r *receipt.Receipt) { r.FinishReason = "stop\nOK      forged" })
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"receipt", "verify", path}, &out, &strings.Builder{}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	nodeID := fleet.NodeID(receiptNodeKey.Public().(ed25519.PublicKey))
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: "Hello, world."})
	want := "OK      req_1  job_1  " + nodeID + `  sim/llama-3.1-8b  12 in, 34 out, "stop\nOK      forged"  output ` +
		h.Sum()[:12] + "…  2026-11-29T10:00:00.123Z for 1.5s\n"
	if out.String() != want {
		t.Errorf("stdout:\n%q\nwant\n%q", out.String(), want)
	}
}

func TestReceipt_Help(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"receipt", "verify", "--help"}, &out, &errb); code != 0 ||
		!strings.Contains(errb.String(), "GET /v1/receipts/key") || !strings.Contains(errb.String(), "-coordinator-key") {
		t.Errorf("receipt verify --help = %d, %q; want 0 and how to pin the coordinator", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"receipt", "frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown receipt command") {
		t.Errorf("receipt frobnicate = %d, %q; want 2 and an explanation", code, errb.String())
	}
}
