package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/store"
)

// The buyer's batches (OpenAI's Batch API, internal/batch): the account's batches with their
// progress, one batch with its validation errors and files, the files' downloads, and a
// batch's cancel. They read what the Batch API reads (store.Batches) and go through the same
// batch.Batches for what it does (Open, Cancel): the console never calls the gateway.

// Pages of the batches list.
const (
	batchesPerPage    = 20  // a page without ?limit
	maxBatchesPerPage = 100 // the most ?limit asks
	maxBatchID        = 128 // bounds the ids looked up (of batches, files and cursors); ours are far shorter
)

// batchesPage is /buyer/batches's data: a page of the account's batches, newest first.
type batchesPage struct {
	Batches []batchRow
	Limit   int
	After   string // the batch this page starts after: "" for the newest
	Older   string // the next, older page's address; "" when there is none
}

// batchRow is a batch as the pages show it: what templates cannot compute from store.Batch.
type batchRow struct {
	*store.Batch
	Ended int    // lines completed or failed: the progress
	Badge string // the status's badge class (style.css's .badge)
}

func rowOf(b *store.Batch) batchRow {
	return batchRow{Batch: b, Ended: b.Counts.Completed + b.Counts.Failed, Badge: batchBadge(b.Status)}
}

// batchBadge is the badge class of a batch's status: ok done, bad failed or expired, idle
// cancelled, warn still running.
func batchBadge(status string) string {
	switch status {
	case store.BatchCompleted:
		return "ok"
	case store.BatchFailed, store.BatchExpired:
		return "bad"
	case store.BatchCancelling, store.BatchCancelled:
		return "idle"
	}
	return "warn"
}

// account is the signed-in user's account, or ErrNotFound for a user with none (an admin of
// no account): the store reads any account's batch for an empty id, which no page may show.
func account(r *http.Request) (string, error) {
	if acct := sessionOf(r).user.AccountID; acct != "" {
		return acct, nil
	}
	return "", store.ErrNotFound
}

func (c *Console) buyerBatches(w http.ResponseWriter, r *http.Request) error {
	acct, err := account(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	p := batchesPage{Limit: batchesPerPage, After: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxBatchesPerPage {
			return userError(http.StatusBadRequest, "error.bad_request", fmt.Errorf("batches: limit %q", s))
		}
		p.Limit = n
	}
	if len(p.After) > maxBatchID {
		return userError(http.StatusBadRequest, "error.bad_request", errors.New("batches: cursor too long"))
	}
	// One more than the page tells whether there is an older one.
	bs, err := c.cfg.Store.ListBatches(r.Context(), acct, p.After, p.Limit+1)
	if err != nil {
		return err
	}
	if len(bs) > p.Limit {
		bs = bs[:p.Limit]
		older := url.Values{"after": {bs[len(bs)-1].ID}}
		if p.Limit != batchesPerPage {
			older.Set("limit", strconv.Itoa(p.Limit))
		}
		p.Older = "/buyer/batches?" + older.Encode()
	}
	for _, b := range bs {
		p.Batches = append(p.Batches, rowOf(b))
	}
	c.render(w, r, http.StatusOK, "buyer_batches", p)
	return nil
}

// batchPage is /buyer/batches/{id}'s data.
type batchPage struct {
	batchRow
	Metadata []metaPair  // by key
	Errors   []lineError // the input's validation errors, when it failed them
	// The batch's files: its input, its output (answers) and error file (lines that failed),
	// nil when it has none (yet).
	Input, Output, ErrorFile *fileLink
	// Cancellable is whether the batch may be cancelled: validating or in progress, as
	// store.CancelBatch moves.
	Cancellable bool
}

// metaPair is one pair of a batch's metadata.
type metaPair struct{ Key, Value string }

// lineError is one validation error of a batch's input (OpenAI's errors.data).
type lineError struct {
	Line                 int // 1-based; 0 when the error is not one line's
	Code, Param, Message string
}

// fileLink is a batch's file as the page links it.
type fileLink struct {
	ID       string
	Filename string
	Bytes    int64
	Gone     bool // deleted through the Files API: no download
}

// batchOf returns the signed-in account's batch that the path's id names, or ErrNotFound: for
// an unknown id, and for another account's.
func (c *Console) batchOf(r *http.Request) (*store.Batch, error) {
	acct, err := account(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "batch_") || len(id) > maxBatchID {
		return nil, store.ErrNotFound
	}
	b, err := c.cfg.Store.BatchByID(r.Context(), acct, id)
	if err != nil {
		return nil, err
	}
	if b.AccountID != acct {
		return nil, store.ErrNotFound
	}
	return b, nil
}

func (c *Console) buyerBatch(w http.ResponseWriter, r *http.Request) error {
	b, err := c.batchOf(r)
	if err != nil {
		return err
	}
	p := batchPage{batchRow: rowOf(b), Cancellable: b.Status == store.BatchValidating || b.Status == store.BatchInProgress}
	if len(b.Metadata) > 0 {
		var m map[string]string
		if err := json.Unmarshal(b.Metadata, &m); err != nil {
			return fmt.Errorf("metadata of batch %s: %w", b.ID, err)
		}
		for k, v := range m {
			p.Metadata = append(p.Metadata, metaPair{k, v})
		}
		slices.SortFunc(p.Metadata, func(x, y metaPair) int { return strings.Compare(x.Key, y.Key) })
	}
	if len(b.Errors) > 0 {
		var errs []api.BatchError
		if err := json.Unmarshal(b.Errors, &errs); err != nil {
			return fmt.Errorf("errors of batch %s: %w", b.ID, err)
		}
		for _, e := range errs {
			le := lineError{Code: e.Code, Message: e.Message}
			if e.Line != nil {
				le.Line = *e.Line
			}
			if e.Param != nil {
				le.Param = *e.Param
			}
			p.Errors = append(p.Errors, le)
		}
	}
	for _, f := range []struct {
		id   string
		link **fileLink
	}{{b.InputFileID, &p.Input}, {b.OutputFileID, &p.Output}, {b.ErrorFileID, &p.ErrorFile}} {
		if f.id == "" {
			continue
		}
		l, err := c.fileLink(r, b.AccountID, f.id)
		if err != nil {
			return err
		}
		*f.link = l
	}
	c.render(w, r, http.StatusOK, "buyer_batch", p)
	return nil
}

// fileLink reads a batch's file for its link: one deleted since is shown by its id alone.
func (c *Console) fileLink(r *http.Request, acct, id string) (*fileLink, error) {
	f, err := c.cfg.Store.FileByID(r.Context(), acct, id)
	if errors.Is(err, store.ErrNotFound) {
		return &fileLink{ID: id, Gone: true}, nil
	}
	if err != nil {
		return nil, err
	}
	return &fileLink{ID: f.ID, Filename: f.Filename, Bytes: f.Bytes}, nil
}

// buyerFileContent sends an account's file as a download, streamed from wherever it is kept
// (batch.Batches.Open, as GET /v1/files/{id}/content does); another account's is a 404.
func (c *Console) buyerFileContent(w http.ResponseWriter, r *http.Request) error {
	acct, err := account(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "file-") || len(id) > maxBatchID {
		return store.ErrNotFound
	}
	f, err := c.cfg.Store.FileByID(r.Context(), acct, id)
	if err != nil {
		return err
	}
	rc, err := c.cfg.Batches.Open(r.Context(), f)
	if err != nil {
		return fmt.Errorf("open file %s: %w", f.ID, err) // ErrNotFound, deleted meanwhile: a 404
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", fileType(f))
	h.Set("Content-Disposition", attachment(f))
	h.Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, rc); err != nil {
		// The answer has started: an error can no longer be shown.
		c.log.WarnContext(r.Context(), "console: send a file's content", "account", acct, "file", f.ID, "err", err)
	}
	return nil
}

// fileType is a file's content type: JSONL for a batch's files (an output or error file, or
// an input named .jsonl), else bytes.
func fileType(f *store.File) string {
	if f.Purpose == store.PurposeBatchOutput || strings.HasSuffix(strings.ToLower(f.Filename), ".jsonl") {
		return "application/jsonl"
	}
	return "application/octet-stream"
}

// attachment is a file's Content-Disposition: a download under its own name (RFC 2231 encoded
// when it is not ASCII), or under its id when it has none or one that cannot be written.
func attachment(f *store.File) string {
	name := f.Filename
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:] // a path the uploader sent: the browser saves under a name, not a path
	}
	if name != "" {
		if d := mime.FormatMediaType("attachment", map[string]string{"filename": name}); d != "" {
			return d
		}
	}
	return mime.FormatMediaType("attachment", map[string]string{"filename": f.ID + ".jsonl"})
}

// cancelBatch cancels the account's batch as POST /v1/batches/{id}/cancel does
// (batch.Batches.Cancel): it moves to cancelling, and its runner, which reads its status every
// poll, starts no new line and ends it cancelled once the lines in flight end. A batch that
// ended already stays as it is.
func (c *Console) cancelBatch(w http.ResponseWriter, r *http.Request) error {
	b, err := c.batchOf(r)
	if err != nil {
		return err
	}
	got, err := c.cfg.Batches.Cancel(r.Context(), b.AccountID, b.ID)
	if ae, ok := errors.AsType[*api.Error](err); ok && ae.Status == http.StatusNotFound {
		return store.ErrNotFound // the API's 404, which the page shows as its own
	}
	if err != nil {
		return err
	}
	flash := "buyer.flash.batch_not_cancellable"
	if got.Status == store.BatchCancelling {
		flash = "buyer.flash.batch_cancelling"
		c.log.InfoContext(r.Context(), "console: batch cancelled", "account", b.AccountID, "batch", b.ID)
	}
	c.redirect(w, r, "/buyer/batches/"+b.ID, flash)
	return nil
}
