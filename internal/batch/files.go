package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/store"
)

// CreateFile stores a batch input file of an account, its content read from r as it arrives:
// in memory up to FilesDirAbove, then (with a FilesDir) on to a file of that directory, so
// that a large upload is never held whole in memory. A file larger than MaxFileBytes is
// refused with 413.
func (b *Batches) CreateFile(ctx context.Context, accountID, filename string, r io.Reader) (*store.File, error) {
	f := &store.File{ID: newID("file-"), AccountID: accountID, Purpose: store.PurposeBatch, Filename: filename, CreatedAt: b.cfg.Now()}
	limit := b.cfg.MaxFileBytes
	inMemory := limit
	if b.cfg.FilesDir != "" {
		inMemory = min(limit, b.cfg.FilesDirAbove)
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, inMemory+1))
	if err != nil {
		return nil, readError(err, limit)
	}
	if n > inMemory && n <= limit {
		// Above the threshold: the rest goes to disk, after what is in memory.
		if n, err = b.spill(f, &buf, r, limit); err != nil {
			return nil, err
		}
		buf.Reset()
	}
	if n > limit {
		return nil, tooLarge(limit)
	}
	f.Bytes = n
	if err := b.cfg.Store.CreateFile(ctx, f, buf.Bytes()); err != nil {
		b.remove(f)
		return nil, err
	}
	return f, nil
}

// spill writes head then the rest of r to the file's path in FilesDir, and returns the bytes
// written (more than limit: refused, and nothing left on disk).
func (b *Batches) spill(f *store.File, head *bytes.Buffer, r io.Reader, limit int64) (int64, error) {
	f.Path = f.ID
	out, err := os.OpenFile(filepath.Join(b.cfg.FilesDir, f.Path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("store file %s: %w", f.ID, err)
	}
	n, err := io.Copy(out, io.MultiReader(head, io.LimitReader(r, limit+1-int64(head.Len()))))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		b.remove(f)
		return 0, readError(err, limit)
	case n > limit:
		b.remove(f)
		return n, tooLarge(limit)
	}
	return n, nil
}

// remove deletes a file's content on disk, if it has any.
func (b *Batches) remove(f *store.File) {
	if f.Path == "" {
		return
	}
	if err := os.Remove(filepath.Join(b.cfg.FilesDir, f.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.log.Warn("remove a file's content", "file", f.ID, "err", err)
	}
}

// CheckPurpose checks an upload's purpose: this network stores files for the Batch API only.
func CheckPurpose(purpose string) error {
	if purpose != store.PurposeBatch {
		return api.BadRequest("purpose", api.CodeInvalidValue, "Invalid 'purpose': '%s'. This network stores files for the Batch API only: use 'batch'.", purpose)
	}
	return nil
}

// Open opens a file's content, wherever it is kept.
func (b *Batches) Open(ctx context.Context, f *store.File) (io.ReadCloser, error) {
	if f.Path == "" {
		return b.cfg.Store.FileContent(ctx, f.AccountID, f.ID)
	}
	if b.cfg.FilesDir == "" {
		return nil, fmt.Errorf("file %s is kept in the files directory, and this coordinator has no --files-dir", f.ID)
	}
	return os.Open(filepath.Join(b.cfg.FilesDir, f.Path))
}

// DeleteFile deletes an account's file and its content.
func (b *Batches) DeleteFile(ctx context.Context, accountID, id string) (*store.File, error) {
	f, err := b.cfg.Store.DeleteFile(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	b.remove(f)
	return f, nil
}

// storeFile stores a file the runner made (an output or error file), in the directory when it
// is large: it returns the content to keep in the database, nil when it is on disk.
func (b *Batches) storeFile(f *store.File, content []byte) ([]byte, error) {
	f.Bytes = int64(len(content))
	if b.cfg.FilesDir == "" || f.Bytes <= b.cfg.FilesDirAbove {
		return content, nil
	}
	f.Path = f.ID
	if err := os.WriteFile(filepath.Join(b.cfg.FilesDir, f.Path), content, 0o600); err != nil {
		return nil, fmt.Errorf("store file %s: %w", f.ID, err)
	}
	return nil, nil
}

func tooLarge(limit int64) error {
	return &api.Error{Status: http.StatusRequestEntityTooLarge, Type: api.TypeInvalidRequest, Param: "file", Code: api.CodeRequestTooLarge,
		Message: fmt.Sprintf("The file is larger than the %d bytes this network accepts.", limit)}
}

// readError is the buyer's error of an upload that could not be read whole.
func readError(err error, limit int64) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return tooLarge(limit)
	}
	return fmt.Errorf("read the upload: %w", err)
}
