package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/receipt"
)

const receiptAbout = `Check the receipts of your requests, offline.

  shareai receipt verify FILE [--coordinator-key BASE64|@KEYFILE]

After each job, the node that ran it signs a receipt: the job, the model, the tokens in and
out, a hash of the output and when it ran. The coordinator checks it against what it relayed,
countersigns it for your request and keeps it: GET /v1/generation/receipts?id=REQUEST_ID
returns a request's receipts. See 'shareai receipt verify --help'.`

const receiptVerifyAbout = `Check signed receipts offline: no coordinator is asked.

Usage: shareai receipt verify FILE [--coordinator-key BASE64|@KEYFILE]

FILE ("-" for standard input) holds one signed receipt, a JSON array of them, or the
coordinator's answer to GET /v1/generation/receipts?id=REQUEST_ID ({"receipts": [...]}).
For each receipt it prints a line: OK with the request, job, node, model, tokens in and out,
finish reason, the start of the output's hash, and when the job started and for how long; or
FAILED and why. The exit status is 1 if any receipt failed.

OK means:
  - the node's key signed the receipt as it is, and the receipt's node id is that key's: the
    node claims it ran this job, on this model, for these tokens, with this output;
  - the coordinator's key countersigned it for this request: the coordinator checked the
    node's claim against what it relayed to you (the same output, the same usage the node
    reported, times that agree with its clock) and vouches for it.
Without --coordinator-key any coordinator key is taken as it is, which proves only that
whoever holds that key countersigned. Pin the coordinator you trust: GET /v1/receipts/key on
the coordinator (no API key needed) answers {"key": "BASE64", "algorithm": "ed25519"}; pass
the key as it is, or save it to a file and pass @FILE. The coordinator keeps its key in
coordinator.key in its data directory, so it stays the same across restarts.`

// maxReceiptFile bounds the file 'receipt verify' reads.
const maxReceiptFile = 64 << 20

// stdin is what 'receipt verify -' reads; tests replace it.
var stdin io.Reader = os.Stdin

func runReceipt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		w, err := stderr, errUsage
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			w, err = stdout, nil
		} else if len(args) > 0 {
			fmt.Fprintf(stderr, "unknown receipt command %q\n\n", args[0])
		}
		fmt.Fprintln(w, receiptAbout)
		return err
	}
	return receiptVerify(ctx, args[1:], stdout, stderr)
}

func receiptVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("receipt verify", flag.ContinueOnError)
	coordinatorKey := fs.String("coordinator-key", "", "the coordinator key to trust: base64, or @FILE to read it from FILE (default: any)")
	pos, err := parseVerb(fs, args, stderr, receiptVerifyAbout, 1, 1)
	if err != nil {
		return err
	}
	var trusted ed25519.PublicKey
	if *coordinatorKey != "" {
		if trusted, err = publicKey(*coordinatorKey); err != nil {
			return fmt.Errorf("--coordinator-key: %w", err)
		}
	}
	data, err := readReceiptFile(pos[0])
	if err != nil {
		return err
	}
	list, err := receiptsIn(data)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	if len(list) == 0 {
		return fmt.Errorf("%s: no receipts", pos[0])
	}
	var failed int
	var keys []string // the coordinator keys taken as they are
	for i, raw := range list {
		s, r, err := verifyReceipt(raw, trusted)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "FAILED  %s: %v\n", receiptName(i, raw), err)
			continue
		}
		tokens := fmt.Sprintf("%d in, %d out", r.PromptTokens, r.CompletionTokens)
		if r.UsageEstimated {
			tokens += " (estimated)"
		}
		if r.FinishReason != "" {
			tokens += ", " + show(r.FinishReason)
		}
		fmt.Fprintf(stdout, "OK      %s  %s  %s  %s  %s  output %s…  %s for %v\n",
			show(s.RequestID), show(r.JobID), show(r.NodeID), show(r.Model), tokens, r.OutputSHA256[:12],
			r.StartedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), r.EndedAt.Sub(r.StartedAt))
		if k := base64.StdEncoding.EncodeToString(s.CoordinatorKey); trusted == nil && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 0:
	case 1:
		fmt.Fprintf(stderr, "Countersigned by coordinator key %s, taken as it is: check that it is your\n"+
			"coordinator's (GET /v1/receipts/key) and pin it with --coordinator-key.\n", keys[0])
	default:
		fmt.Fprintf(stderr, "Countersigned by %d coordinator keys, taken as they are: %s. Pin your coordinator's\n"+
			"(GET /v1/receipts/key) with --coordinator-key.\n", len(keys), strings.Join(keys, ", "))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d receipts failed", failed, len(list))
	}
	return nil
}

// verifyReceipt decodes one signed receipt and checks it: both signatures, and that its node id
// is the id of the node key that signed it.
func verifyReceipt(raw json.RawMessage, trusted ed25519.PublicKey) (receipt.Signed, receipt.Receipt, error) {
	var s receipt.Signed
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, receipt.Receipt{}, fmt.Errorf("not a signed receipt: %w", err)
	}
	r, err := s.Verify(trusted)
	if err != nil {
		return s, r, err
	}
	if id := fleet.NodeID(s.NodeKey); r.NodeID != id {
		return s, receipt.Receipt{}, fmt.Errorf("the receipt's node_id %q is not the id of the node key that signed it, %s", r.NodeID, id)
	}
	return s, r, nil
}

// receiptName names a receipt in a FAILED line by its place in the file and, if it says, its
// job.
func receiptName(i int, raw json.RawMessage) string {
	var claim struct {
		Receipt struct {
			JobID string `json:"job_id"`
		} `json:"receipt"`
	}
	name := fmt.Sprintf("receipt %d", i+1)
	if json.Unmarshal(raw, &claim) == nil && claim.Receipt.JobID != "" {
		name += fmt.Sprintf(" (job %q)", claim.Receipt.JobID)
	}
	return name
}

func readReceiptFile(name string) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxReceiptFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxReceiptFile {
		return nil, fmt.Errorf("%s: more than %d MiB", name, maxReceiptFile>>20)
	}
	return data, nil
}

// receiptsIn returns the receipts in a file: one signed receipt, an array of them, or an object
// whose "receipts" is an array of them.
func receiptsIn(data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	var list []json.RawMessage
	if bytes.HasPrefix(data, []byte("[")) {
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("not a JSON array of receipts: %w", err)
		}
		return list, nil
	}
	var page struct {
		Receipts json.RawMessage `json:"receipts"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if page.Receipts == nil {
		return []json.RawMessage{data}, nil
	}
	if err := json.Unmarshal(page.Receipts, &list); err != nil {
		return nil, fmt.Errorf("receipts is not an array: %w", err)
	}
	return list, nil
}

// publicKey reads an ed25519 public key given as base64, or as @FILE holding it.
func publicKey(v string) (ed25519.PublicKey, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		v = string(b)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, errors.New("not an ed25519 public key in base64 (44 characters)")
	}
	return k, nil
}

// show returns s to print as it is, or quoted if it holds a character that is not printable:
// a receipt's strings come from outside, and must not draw lines of their own.
func show(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
