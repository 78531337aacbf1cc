package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/batch"
	"github.com/shareai/shareai/internal/store"
)

// The Files and Batch APIs, in OpenAI's shapes: the handlers read the request and write the
// answer; internal/batch stores, validates and runs. A file or batch of another account is a
// 404, as OpenAI answers.

// maxFormField bounds a multipart form's fields other than the file (the purpose).
const maxFormField = 1 << 10

func (g *Gateway) registerBatches(mux *http.ServeMux) {
	if g.cfg.Batches == nil {
		return
	}
	// An upload's body is bounded by the largest file, and the form around it.
	upload := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.call(r.Context(), nil, w, r, store.KeyBuyer, g.cfg.Batches.MaxFileBytes()+64<<10, g.createFile)
	})
	mux.Handle("POST /v1/files", upload)
	mux.Handle("GET /v1/files", g.handle(g.listFiles))
	mux.Handle("GET /v1/files/{id}", g.handle(g.getFile))
	mux.Handle("GET /v1/files/{id}/content", g.handle(g.fileContent))
	mux.Handle("DELETE /v1/files/{id}", g.handle(g.deleteFile))
	mux.Handle("POST /v1/batches", g.handle(g.createBatch))
	mux.Handle("GET /v1/batches", g.handle(g.listBatches))
	mux.Handle("GET /v1/batches/{id}", g.handle(g.getBatch))
	mux.Handle("POST /v1/batches/{id}/cancel", g.handle(g.cancelBatch))
}

// createFile stores the file part of a multipart form (purpose batch), read as it streams.
func (g *Gateway) createFile(w http.ResponseWriter, r *http.Request, c *call) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		return api.BadRequest("", api.CodeInvalidValue, "Upload a file as multipart/form-data, with the fields 'file' and 'purpose'.")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return api.BadRequest("", api.CodeInvalidValue, "Invalid multipart body: %v.", err)
	}
	var (
		f       *store.File
		purpose string
		seen    bool // the purpose field
	)
	// Whatever fails after the file was stored removes it.
	defer func() {
		if f != nil && err != nil {
			g.cfg.Batches.DeleteFile(r.Context(), f.AccountID, f.ID)
		}
	}()
	for {
		part, perr := mr.NextPart()
		if perr == io.EOF {
			break
		}
		if perr != nil {
			err = api.BadRequest("", api.CodeInvalidValue, "Invalid multipart body: %v.", perr)
			return err
		}
		switch part.FormName() {
		case "purpose":
			b, rerr := io.ReadAll(io.LimitReader(part, maxFormField))
			if rerr != nil {
				err = fmt.Errorf("read the purpose: %w", rerr)
				return err
			}
			purpose, seen = string(b), true
			if err = batch.CheckPurpose(purpose); err != nil {
				return err
			}
		case "file":
			if f != nil {
				err = api.BadRequest("file", api.CodeInvalidValue, "Upload one file at a time.")
				return err
			}
			if f, err = g.cfg.Batches.CreateFile(r.Context(), c.key.AccountID, part.FileName(), part); err != nil {
				return err
			}
		}
		part.Close()
	}
	switch {
	case f == nil:
		err = api.BadRequest("file", "missing_required_parameter", "Missing required parameter: 'file'.")
	case !seen:
		err = api.BadRequest("purpose", "missing_required_parameter", "Missing required parameter: 'purpose'.")
	}
	if err != nil {
		return err
	}
	return writeJSON(w, fileObject(f))
}

func fileObject(f *store.File) api.File {
	return api.File{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
}

// fileNotFound is OpenAI's 404 of a file id that is not the account's.
func fileNotFound(id string) error {
	return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "id", Code: api.CodeNotFound,
		Message: fmt.Sprintf("No such File object: %s", id)}
}

// file reads the account's file named in the path.
func (g *Gateway) file(r *http.Request, c *call) (*store.File, error) {
	id := r.PathValue("id")
	f, err := g.cfg.Store.FileByID(r.Context(), c.key.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fileNotFound(id)
	}
	return f, err
}

func (g *Gateway) getFile(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := g.file(r, c)
	if err != nil {
		return err
	}
	return writeJSON(w, fileObject(f))
}

func (g *Gateway) fileContent(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := g.file(r, c)
	if err != nil {
		return err
	}
	rc, err := g.cfg.Batches.Open(r.Context(), f)
	if errors.Is(err, store.ErrNotFound) {
		return fileNotFound(f.ID) // deleted meanwhile
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	_, err = io.Copy(w, rc)
	if err != nil {
		g.log.Warn("send a file's content", logRequestID, c.id, "file", f.ID, "err", err)
	}
	return nil // the answer has started: an error can no longer be written
}

func (g *Gateway) deleteFile(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	f, err := g.cfg.Batches.DeleteFile(r.Context(), c.key.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return fileNotFound(id)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, api.Deleted{ID: f.ID, Object: "file", Deleted: true})
}

// page reads a list's cursor: after, and limit within 1..most (def when absent).
func page(r *http.Request, def, most int) (string, int, error) {
	limit := def
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > most {
			return "", 0, api.BadRequest("limit", api.CodeInvalidValue, "Invalid 'limit': want an integer from 1 to %d.", most)
		}
		limit = n
	}
	return r.URL.Query().Get("after"), limit, nil
}

// list is a page of a list, read with one more than limit to tell whether there are more.
func list[T any](items []T, limit int, id func(T) string) api.List[T] {
	l := api.List[T]{Object: "list", Data: items, HasMore: len(items) > limit}
	if l.HasMore {
		l.Data = items[:limit]
	}
	if len(l.Data) > 0 {
		l.FirstID, l.LastID = id(l.Data[0]), id(l.Data[len(l.Data)-1])
	} else {
		l.Data = []T{}
	}
	return l
}

func (g *Gateway) listFiles(w http.ResponseWriter, r *http.Request, c *call) error {
	after, limit, err := page(r, 10000, 10000)
	if err != nil {
		return err
	}
	fs, err := g.cfg.Store.Files(r.Context(), c.key.AccountID, r.URL.Query().Get("purpose"), after, limit+1)
	if err != nil {
		return err
	}
	objs := make([]api.File, len(fs))
	for i, f := range fs {
		objs[i] = fileObject(f)
	}
	return writeJSON(w, list(objs, limit, func(f api.File) string { return f.ID }))
}

func (g *Gateway) createBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.BatchRequest
	if err := api.Decode(r.Body, &req); err != nil {
		return err
	}
	b, err := g.cfg.Batches.Create(r.Context(), c.key, req)
	if err != nil {
		return err
	}
	return writeJSON(w, batchObject(b))
}

func (g *Gateway) getBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	b, err := g.cfg.Store.BatchByID(r.Context(), c.key.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return batch.NotFound(id)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, batchObject(b))
}

func (g *Gateway) listBatches(w http.ResponseWriter, r *http.Request, c *call) error {
	after, limit, err := page(r, 20, 100)
	if err != nil {
		return err
	}
	bs, err := g.cfg.Store.ListBatches(r.Context(), c.key.AccountID, after, limit+1)
	if err != nil {
		return err
	}
	objs := make([]api.Batch, len(bs))
	for i, b := range bs {
		objs[i] = batchObject(b)
	}
	return writeJSON(w, list(objs, limit, func(b api.Batch) string { return b.ID }))
}

func (g *Gateway) cancelBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := g.cfg.Batches.Cancel(r.Context(), c.key.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, batchObject(b))
}

// batchObject is a batch in OpenAI's shape.
func batchObject(b *store.Batch) api.Batch {
	o := api.Batch{ID: b.ID, Object: "batch", Endpoint: b.Endpoint, InputFileID: b.InputFileID, CompletionWindow: b.CompletionWindow,
		Status: b.Status, CreatedAt: b.CreatedAt.Unix(), Metadata: b.Metadata,
		InProgressAt: unix(b.InProgressAt), ExpiresAt: unix(b.ExpiresAt), FinalizingAt: unix(b.FinalizingAt), CompletedAt: unix(b.CompletedAt),
		FailedAt: unix(b.FailedAt), ExpiredAt: unix(b.ExpiredAt), CancellingAt: unix(b.CancellingAt), CancelledAt: unix(b.CancelledAt),
		RequestCounts: api.BatchCounts{Total: b.Total, Completed: b.Counts.Completed, Failed: b.Counts.Failed}}
	if b.OutputFileID != "" {
		o.OutputFileID = &b.OutputFileID
	}
	if b.ErrorFileID != "" {
		o.ErrorFileID = &b.ErrorFileID
	}
	if len(b.Errors) > 0 {
		o.Errors = &api.BatchErrors{Object: "list"}
		if err := json.Unmarshal(b.Errors, &o.Errors.Data); err != nil {
			o.Errors = nil
		}
	}
	if o.Metadata == nil {
		o.Metadata = []byte("null")
	}
	return o
}

// unix is a time in unix seconds, nil when zero.
func unix(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	s := t.Unix()
	return &s
}
