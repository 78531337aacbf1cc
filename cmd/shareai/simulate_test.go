package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shareai simulate runs the built-in market and writes JSON, an HTML page, and its wall time
// and heap to stderr.
func TestSimulate_Market(t *testing.T) {
	page := filepath.Join(t.TempDir(), "report.html")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"simulate", "--days", "0.25", "--json", "--html", page}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Requests struct{ Arrived, Total, Served int64 }
		Money    struct {
			Debits int64 `json:"buyer_debits_nanos"`
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	if rep.Requests.Total == 0 || rep.Requests.Arrived != rep.Requests.Total || rep.Money.Debits == 0 {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(stderr.String(), "of wall time") || !strings.Contains(stderr.String(), "peak heap") {
		t.Errorf("stderr: %q", stderr.String())
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("page: %v, %d bytes", err, len(b))
	}
}

// --provider reads a provider's file as the agent does and forecasts its node, what if
// included; a what-if flag without --provider is refused.
func TestSimulate_Provider(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"simulate", "--provider", "../../examples/gamer/my-node.yaml", "--seeds", "2", "--days", "0.5", "--ask", "0.08,0.16"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"Forecast for gamer-3080", "mon-fri 08:00-18:00, 22:30-01:00", "weekly earnings", "What if the ask were 0.08 in, 0.16 out"} {
		if !strings.Contains(out, want) {
			t.Errorf("the forecast lacks %q:\n%s", want, out)
		}
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"simulate", "--windows", "daily 00:00-24:00"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "--provider") {
		t.Errorf("--windows alone: exit %d, %s", code, stderr.String())
	}
}
