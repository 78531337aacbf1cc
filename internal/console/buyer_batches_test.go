package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// batchModel is the model the test network serves; batchNoModel one no node serves, whose
// lines wait (the runner takes it for a model whose nodes have not joined yet, while its clock
// stays within a minute of its start) until their batch is cancelled.
const (
	batchModel   = "sim/llama-3.1-8b"
	batchNoModel = "sim/no-such-model"
)

// batchInput is a batch input file: a chat line of each model, custom ids line-0, line-1, ….
func batchInput(models ...string) string {
	var b strings.Builder
	for i, m := range models {
		fmt.Fprintf(&b, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"batch line %d"}],"max_tokens":16}}`+"\n",
			i, m, i)
	}
	return b.String()
}

// batchOf uploads an input file and creates a batch of it with the SDK.
func batchOf(t *testing.T, c openai.Client, content string, meta map[string]string) (file *openai.FileObject, b *openai.Batch) {
	t.Helper()
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{
		File: openai.File(strings.NewReader(content), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	b, err = c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: meta})
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	return f, b
}

// batchNow reads a batch from the store.
func batchNow(t *testing.T, env *testenv.Env, id string) *store.Batch {
	t.Helper()
	b, err := env.Store.BatchByID(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// apiContent is a file's content as the Files API sends it.
func apiContent(t *testing.T, c openai.Client, id string) string {
	t.Helper()
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("content of %s: %v", id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// download fetches a file through the console: its status, headers and body.
func (u *buyerUser) download(id string) (int, http.Header, string) {
	u.t.Helper()
	resp := u.do(http.MethodGet, "/buyer/files/"+id+"/content", nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		u.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

var batchRowRE = regexp.MustCompile(`(?s)<tr data-batch-id="(batch_[^"]+)">.*?</tr>`)

// batchRows are the rows of a batches page, by id, and the ids in their order.
func batchRows(page string) (map[string]string, []string) {
	rows, ids := map[string]string{}, []string(nil)
	for _, m := range batchRowRE.FindAllStringSubmatch(page, -1) {
		rows[m[1]] = m[0]
		ids = append(ids, m[1])
	}
	return rows, ids
}

// A buyer's batches, made with the SDK, show in the console newest first with their status and
// progress, a page at a time; a batch's page has its times, metadata, validation errors and
// files, whose downloads are what was uploaded and what the Files API sends, kept in the
// database or in the files directory; another account sees none of it.
func TestBuyer_Batches(t *testing.T) {
	dir := t.TempDir()
	clk := &testenv.Clock{}
	clk.Set(time.Now())
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Batch.FilesDir, c.Coordinator.Batch.FilesDirAbove = dir, 1024
		c.Coordinator.Batch.Now = clk.Now
	})
	c := env.Client()
	u := buyerLogIn(t, env, buyerAcct(t, env), store.RoleBuyer)

	status, page := u.get("/buyer/batches")
	if status != http.StatusOK || !strings.Contains(page, "No batches yet") || strings.Contains(page, `id="batches"`) {
		t.Fatalf("GET /buyer/batches with none: %d; want 200 saying there are none:\n%s", status, page)
	}
	if !strings.Contains(page, `<a href="/buyer/batches" aria-current="page">Batches</a>`) {
		t.Errorf("the menu has no current Batches entry:\n%s", page)
	}

	// A: done, small files (in the database). C: its input invalid, failed. B: ten lines
	// answered, and one of a model no node serves, waiting (a file in the directory).
	smallIn := batchInput(batchModel, batchModel, batchModel)
	aIn, a := batchOf(t, c, smallIn, map[string]string{"run": "console", "owner": "ada"})
	env.WaitFor("batch A to complete", func() bool { return batchNow(t, env, a.ID).Status == store.BatchCompleted })
	clk.Jump(time.Second)
	badIn := batchInput(batchModel) + `{"custom_id":"line-1","method":"GET","url":"/v1/chat/completions","body":{}}` + "\n"
	_, bad := batchOf(t, c, badIn, nil)
	if bad.Status != openai.BatchStatusFailed {
		t.Fatalf("a batch of an invalid input is %s; want failed", bad.Status)
	}
	clk.Jump(time.Second)
	bigIn := batchInput(batchModel, batchModel, batchModel, batchModel, batchModel, batchModel, batchModel, batchModel, batchModel, batchModel, batchNoModel)
	bIn, b := batchOf(t, c, bigIn, nil)
	clk.Freeze(clk.Now()) // the waiting line waits on: the runner's start stays within a minute
	if _, err := os.Stat(filepath.Join(dir, bIn.ID)); err != nil {
		t.Fatalf("B's input (%d bytes) is not in the files directory: %v", len(bigIn), err)
	}
	if _, err := os.Stat(filepath.Join(dir, aIn.ID)); err == nil {
		t.Fatalf("A's input (%d bytes) is in the files directory; want it in the database", len(smallIn))
	}
	env.WaitFor("ten lines of B answered", func() bool { return batchNow(t, env, b.ID).Counts.Completed == 10 })
	a, err := c.Batches.Get(context.Background(), a.ID) // with its output file
	if err != nil {
		t.Fatal(err)
	}

	// The list: newest first, each with its status, progress and failed lines.
	status, page = u.get("/buyer/batches")
	rows, order := batchRows(page)
	if status != http.StatusOK || strings.Join(order, ",") != strings.Join([]string{b.ID, bad.ID, a.ID}, ",") {
		t.Fatalf("GET /buyer/batches: %d, rows %v; want B, C, A, newest first:\n%s", status, order, page)
	}
	for _, tt := range []struct {
		name, id string
		want     []string
	}{
		{"running", b.ID, []string{`href="/buyer/batches/` + b.ID + `"`, "In progress", `<progress max="11" value="10"`, "10 / 11",
			`<td class="num batch-failed">0</td>`, "/v1/chat/completions"}},
		{"failed validation", bad.ID, []string{"Failed", `<td class="batch-progress">—</td>`}},
		{"completed", a.ID, []string{"Completed", `<progress max="3" value="3"`, "3 / 3"}},
	} {
		if row := rows[tt.id]; !containsAll(row, tt.want...) {
			t.Errorf("%s batch's row: want %q:\n%s", tt.name, tt.want, row)
		}
	}

	// A page at a time.
	_, page = u.get("/buyer/batches?limit=2")
	if _, order = batchRows(page); strings.Join(order, ",") != b.ID+","+bad.ID {
		t.Errorf("the first page of 2: %v; want B, C", order)
	}
	older := regexp.MustCompile(`id="batches-older" href="([^"]+)"`).FindStringSubmatch(page)
	if older == nil {
		t.Fatalf("the first page of 2 has no link to older batches:\n%s", page)
	}
	_, page = u.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	if _, order = batchRows(page); strings.Join(order, ",") != a.ID || strings.Contains(page, `id="batches-older"`) || !strings.Contains(page, `id="batches-newest"`) {
		t.Errorf("the older page (%s): %v; want A alone, a link to the newest and none to older:\n%s", older[1], order, page)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "after=" + strings.Repeat("x", 200)} {
		if status, _ := u.get("/buyer/batches?" + q); status != http.StatusBadRequest {
			t.Errorf("GET /buyer/batches?%s: %d; want 400", q, status)
		}
	}

	// A's page: done, with its metadata and files, nothing to cancel.
	status, page = u.get("/buyer/batches/" + a.ID)
	if status != http.StatusOK || !containsAll(page, `id="batch-status" class="badge ok" data-status="completed">Completed<`,
		"Completed at", "In progress since", "Expires at", `<dd id="batch-completed">3</dd>`, `<dd id="batch-total">3</dd>`,
		"<bdi>owner</bdi></dt><dd><bdi>ada</bdi>", "<bdi>run</bdi></dt><dd><bdi>console</bdi>",
		`id="download-input" href="/buyer/files/`+aIn.ID+`/content"`, `id="download-output" href="/buyer/files/`+a.OutputFileID+`/content"`) {
		t.Errorf("GET /buyer/batches/A: %d; want it completed, with its times, metadata, input and output:\n%s", status, page)
	}
	if strings.Contains(page, `id="cancel-batch"`) || strings.Contains(page, `id="download-errors"`) || strings.Contains(page, `id="batch-errors"`) {
		t.Errorf("A's page offers a cancel, an error file or validation errors; it has none:\n%s", page)
	}
	// C's: its validation error, on its line.
	_, page = u.get("/buyer/batches/" + bad.ID)
	errRow := regexp.MustCompile(`(?s)<table id="batch-errors">.*?</table>`).FindString(page)
	if !containsAll(errRow, `<td class="num">2</td>`, "<code dir=\"ltr\">") || strings.Contains(page, `id="cancel-batch"`) || !strings.Contains(page, "Failed at") {
		t.Errorf("C's page: want its validation error on line 2, its failure time and no cancel:\n%s", page)
	}
	// B's: running, to cancel.
	_, page = u.get("/buyer/batches/" + b.ID)
	if !containsAll(page, `data-status="in_progress"`, `<progress max="11" value="10"`, `action="/buyer/batches/`+b.ID+`/cancel"`, `id="cancel-batch"`,
		`name="csrf" value="`+u.csrf+`"`, `id="download-input"`) || strings.Contains(page, `id="download-output"`) {
		t.Errorf("B's page: want its progress, a cancel form with the CSRF token, its input and no output yet:\n%s", page)
	}

	// Downloads: what was uploaded, and what the Files API sends, from the database or the disk.
	for _, tt := range []struct {
		name, id, want, filename string
	}{
		{"A's input, in the database", aIn.ID, smallIn, "input.jsonl"},
		{"A's output, in the database", a.OutputFileID, apiContent(t, c, a.OutputFileID), a.ID + "_output.jsonl"},
		{"B's input, in the files directory", bIn.ID, bigIn, "input.jsonl"},
	} {
		status, h, body := u.download(tt.id)
		if status != http.StatusOK || body != tt.want {
			t.Errorf("%s: %d, %d bytes; want 200 with the %d bytes of the file", tt.name, status, len(body), len(tt.want))
		}
		if got, want := h.Get("Content-Disposition"), `attachment; filename=`+tt.filename; got != want {
			t.Errorf("%s: Content-Disposition %q, want %q", tt.name, got, want)
		}
		if h.Get("Content-Type") != "application/jsonl" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Length") != fmt.Sprint(len(tt.want)) {
			t.Errorf("%s: headers %v; want application/jsonl, nosniff and its length", tt.name, h)
		}
	}
	if status, _, _ := u.download("file-doesnotexist"); status != http.StatusNotFound {
		t.Errorf("an unknown file: %d; want 404", status)
	}

	// Another account sees none of it: 404 pages, and B is not cancelled.
	other, _ := buyerOther(t, env, "other-buyer")
	them := buyerLogIn(t, env, other.ID, store.RoleBuyer)
	if _, page := them.get("/buyer/batches"); strings.Contains(page, a.ID) || strings.Contains(page, b.ID) || !strings.Contains(page, "No batches yet") {
		t.Errorf("another account's batches page shows ours:\n%s", page)
	}
	for _, path := range []string{"/buyer/batches/" + a.ID, "/buyer/batches/" + b.ID, "/buyer/batches/batch_doesnotexist", "/buyer/files/" + aIn.ID + "/content",
		"/buyer/files/" + bIn.ID + "/content", "/buyer/files/" + a.OutputFileID + "/content"} {
		if status, page := them.get(path); status != http.StatusNotFound || !strings.Contains(page, "Page not found") || strings.Contains(page, "batch line") {
			t.Errorf("another account's GET %s: %d; want the 404 page:\n%s", path, status, page)
		}
	}
	if status, _ := them.post("/buyer/batches/"+b.ID+"/cancel", nil); status != http.StatusNotFound {
		t.Errorf("another account's cancel of B: %d; want 404", status)
	}
	if got := batchNow(t, env, b.ID); got.Status != store.BatchInProgress {
		t.Fatalf("after another account's cancel, B is %s; want in_progress", got.Status)
	}

	// A cancel without the CSRF token does nothing; with it, B is cancelling, then cancelled by
	// its runner, with the answers of what ran.
	if status, _ := u.post("/buyer/batches/"+b.ID+"/cancel", url.Values{"csrf": {"nope"}}); status != http.StatusForbidden {
		t.Errorf("a cancel without the CSRF token: %d; want 403", status)
	}
	if got := batchNow(t, env, b.ID); got.Status != store.BatchInProgress {
		t.Fatalf("after a cancel without the token, B is %s; want in_progress", got.Status)
	}
	resp := u.postResp("/buyer/batches/"+b.ID+"/cancel", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/buyer/batches/"+b.ID || flashOf(resp) != "buyer.flash.batch_cancelling" {
		t.Fatalf("cancel: %d to %q, flash %q; want 303 back to the batch, saying it is cancelling", resp.StatusCode, resp.Header.Get("Location"), flashOf(resp))
	}
	if got := batchNow(t, env, b.ID); (got.Status != store.BatchCancelling && got.Status != store.BatchCancelled) || got.CancellingAt.IsZero() {
		t.Fatalf("after the cancel, B is %s (cancelling at %v); want cancelling", got.Status, got.CancellingAt)
	}
	env.WaitFor("B to be cancelled", func() bool { return batchNow(t, env, b.ID).Status == store.BatchCancelled })
	got := batchNow(t, env, b.ID)
	_, page = u.get("/buyer/batches/" + b.ID)
	if !containsAll(page, `data-status="cancelled">Cancelled<`, "Cancel requested at", "Cancelled at", `id="download-output" href="/buyer/files/`+got.OutputFileID+`/content"`) ||
		strings.Contains(page, `id="cancel-batch"`) {
		t.Errorf("B's page once cancelled: want it cancelled, its output and no cancel:\n%s", page)
	}
	if _, err := os.Stat(filepath.Join(dir, got.OutputFileID)); err != nil {
		t.Errorf("B's output is not in the files directory: %v", err)
	}
	status, _, body := u.download(got.OutputFileID)
	if want := apiContent(t, c, got.OutputFileID); status != http.StatusOK || body != want || strings.Count(body, "\n") != 10 {
		t.Errorf("B's output, from the files directory: %d, %d lines; want the Files API's ten lines", status, strings.Count(body, "\n"))
	}
	resp = u.postResp("/buyer/batches/"+b.ID+"/cancel", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || flashOf(resp) != "buyer.flash.batch_not_cancellable" || batchNow(t, env, b.ID).Status != store.BatchCancelled {
		t.Errorf("cancelling a cancelled batch: %d, flash %q; want 303 saying it has ended, and it stays cancelled", resp.StatusCode, flashOf(resp))
	}

	// A file deleted through the Files API: the batch's page names it, with nothing to download.
	if _, err := c.Files.Delete(context.Background(), aIn.ID); err != nil {
		t.Fatal(err)
	}
	_, page = u.get("/buyer/batches/" + a.ID)
	if strings.Contains(page, `id="download-input"`) || !strings.Contains(page, `<code dir="ltr">`+aIn.ID+`</code> <small class="muted">deleted</small>`) {
		t.Errorf("A's page after its input was deleted: want the input's id, marked deleted, and no download:\n%s", page)
	}
	if status, _, _ := u.download(aIn.ID); status != http.StatusNotFound {
		t.Errorf("a deleted file's download: %d; want 404", status)
	}
}

// flashOf is the flash message a response sets for the next page.
func flashOf(resp *http.Response) string {
	for _, ck := range resp.Cookies() {
		if ck.Name == "shareai_flash" {
			return ck.Value
		}
	}
	return ""
}

// containsAll says whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
