package sqlstore_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// Files are an account's own: another account reads, lists and deletes none of them.
func TestDB_Files(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustAccount(t, db, "acct_2", "bob")
		for i, id := range []string{"file-a", "file-b"} {
			f := &store.File{ID: id, AccountID: "acct_1", Purpose: store.PurposeBatch, Filename: id + ".jsonl", Bytes: 3, CreatedAt: at(time.Duration(i) * time.Second)}
			if err := db.CreateFile(ctx, f, []byte("abc")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.FileByID(ctx, "acct_2", "file-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another account's file: err %v, want not found", err)
		}
		if _, err := db.FileContent(ctx, "acct_2", "file-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another account's content: err %v, want not found", err)
		}
		if _, err := db.DeleteFile(ctx, "acct_2", "file-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete another account's file: err %v, want not found", err)
		}
		rc, err := db.FileContent(ctx, "acct_1", "file-a")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		if string(b) != "abc" {
			t.Errorf("content %q, want abc", b)
		}
		fs, err := db.Files(ctx, "acct_1", "", "", 10)
		if err != nil || len(fs) != 2 || fs[0].ID != "file-b" {
			t.Fatalf("files %v, %v; want file-b then file-a", fs, err)
		}
		fs, err = db.Files(ctx, "acct_1", "", "file-b", 10)
		if err != nil || len(fs) != 1 || fs[0].ID != "file-a" {
			t.Fatalf("files after file-b: %v, %v; want file-a", fs, err)
		}
		if _, err := db.DeleteFile(ctx, "acct_1", "file-a"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.FileByID(ctx, "acct_1", "file-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted file: err %v, want not found", err)
		}
	})
}

// A batch line's result commits with its settlement's money, only under the line's current
// attempt: a stale attempt's settlement moves no money and writes nothing.
func TestDB_BatchLineSettlement(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		if err := db.Deposit(ctx, "acct_1", 1000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		b := &store.Batch{ID: "batch_1", AccountID: "acct_1", KeyID: "key_1", Endpoint: "/v1/chat/completions", InputFileID: "file-a",
			CompletionWindow: "24h", Status: store.BatchInProgress, Total: 2, CreatedAt: t0, InProgressAt: t0, ExpiresAt: at(24 * time.Hour)}
		lines := []*store.BatchLine{{Line: 0, CustomID: "a", Body: []byte(`{}`)}, {Line: 1, CustomID: "b", Body: []byte(`{}`)}}
		if err := db.CreateBatch(ctx, b, lines); err != nil {
			t.Fatal(err)
		}
		claimed, err := db.ClaimBatches(ctx, "rep_a", t0)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claimed %v, %v; want batch_1", claimed, err)
		}
		if err := db.RenewLease(ctx, "rep_a", t0, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if claimed, err := db.ClaimBatches(ctx, "rep_b", at(time.Second)); err != nil || len(claimed) != 0 {
			t.Fatalf("a peer claimed %v, %v while the runner's lease is live", claimed, err)
		}
		if _, err := db.StartLine(ctx, "rep_b", "batch_1", 0, "req_x"); !errors.Is(err, store.ErrStale) {
			t.Errorf("a peer started a line: err %v, want stale", err)
		}
		if _, err := db.StartLines(ctx, "rep_b", "batch_1", []int{0, 1}, []string{"req_x", "req_y"}); !errors.Is(err, store.ErrStale) {
			t.Errorf("a peer started lines: err %v, want stale", err)
		}
		if tries, err := db.StartLines(ctx, "rep_a", "batch_1", []int{1, 7}, []string{"req_b1", "req_nope"}); err != nil || tries[0] != 1 || tries[1] != 0 {
			t.Errorf("start lines 1 and 7 (none): tries %v, %v; want [1 0]", tries, err)
		}
		for _, id := range []string{"req_1", "req_2"} {
			if _, err := db.StartLine(ctx, "rep_a", "batch_1", 0, id); err != nil {
				t.Fatal(err)
			}
			if err := db.PlaceHold(ctx, &store.Hold{RequestID: id, AccountID: "acct_1", KeyID: "key_1", Amount: 100, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		settle := func(id string) error {
			s := &store.Settlement{RequestID: id, Debit: 10, Fee: 10, At: at(time.Second), Usage: usage(id, "acct_1", t0),
				Line: &store.LineResult{BatchID: "batch_1", Line: 0, RequestID: id, Result: []byte(`{"ok":"` + id + `"}`)}}
			return db.Settle(ctx, []*store.Settlement{s})[0]
		}
		if err := settle("req_1"); !errors.Is(err, store.ErrStale) {
			t.Errorf("stale attempt's settlement: err %v, want stale", err)
		}
		if err := settle("req_2"); err != nil {
			t.Fatal(err)
		}
		bal, err := db.Balance(ctx, "acct_1")
		if err != nil {
			t.Fatal(err)
		}
		if bal.Spent != 10 {
			t.Errorf("spent %d, want 10: the line billed once", bal.Spent)
		}
		if _, err := db.UsageByRequest(ctx, "req_1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the stale attempt has a usage record: %v", err)
		}
		got, err := db.BatchLines(ctx, "batch_1", 0, 10, store.LineDone)
		if err != nil || len(got) != 1 || string(got[0].Result) != `{"ok":"req_2"}` || got[0].Tries != 2 {
			t.Fatalf("done lines %+v, %v; want line 0 with req_2's result after 2 tries", got, err)
		}
		if err := db.FinishLine(ctx, &store.LineResult{BatchID: "batch_1", Line: 1, RequestID: "req_9", Failed: true}); !errors.Is(err, store.ErrStale) {
			t.Errorf("finish a line not running: err %v, want stale", err)
		}
		bb, err := db.BatchByID(ctx, "acct_1", "batch_1")
		if err != nil || bb.Counts.Completed != 1 || bb.Counts.Failed != 0 || bb.Runner != "rep_a" {
			t.Fatalf("batch %+v, %v; want 1 completed, run by rep_a", bb, err)
		}
		if _, err := db.BatchByID(ctx, "acct_2", "batch_1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another account's batch: err %v, want not found", err)
		}
		// Once the runner's lease expired, a peer takes the batch over.
		if claimed, err := db.ClaimBatches(ctx, "rep_b", at(2*time.Minute)); err != nil || len(claimed) != 1 {
			t.Fatalf("peer claimed %v, %v after the lease expired; want batch_1", claimed, err)
		}
		out := &store.File{ID: "file-out", AccountID: "acct_1", Purpose: store.PurposeBatchOutput, Filename: "batch_1_output.jsonl", Bytes: 2, CreatedAt: at(time.Hour)}
		if err := db.FinishBatch(ctx, "rep_a", "batch_1", store.BatchCompleted, at(time.Hour), out, nil, []byte("{}"), nil); !errors.Is(err, store.ErrStale) {
			t.Errorf("the old runner finished the batch: err %v, want stale", err)
		}
		if err := db.FinishBatch(ctx, "rep_b", "batch_1", store.BatchCompleted, at(time.Hour), out, nil, []byte("{}"), nil); err != nil {
			t.Fatal(err)
		}
		bb, err = db.BatchByID(ctx, "", "batch_1")
		if err != nil || bb.Status != store.BatchCompleted || bb.OutputFileID != "file-out" || !bb.CompletedAt.Equal(at(time.Hour)) {
			t.Fatalf("batch %+v, %v; want completed with its output file", bb, err)
		}
		if claimed, err := db.ClaimBatches(ctx, "rep_b", at(2*time.Hour)); err != nil || len(claimed) != 0 {
			t.Errorf("claimed %v, %v: a completed batch is not run again", claimed, err)
		}
	})
}
