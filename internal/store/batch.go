package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrStale is the error of a batch line's settlement, or result, whose attempt is not the
// line's current one any more (another replica took the batch over and runs the line again):
// it writes nothing, and its hold stays open for its replica to void.
var ErrStale = errors.New("batch line attempt is stale")

// Purposes of a file.
const (
	PurposeBatch       = "batch"        // a batch's input, uploaded by the buyer
	PurposeBatchOutput = "batch_output" // a batch's output or error file
)

// File is a file of an account (OpenAI's file object). Its content is read by FileContent.
type File struct {
	ID        string // file-…
	AccountID string
	Purpose   string
	Filename  string
	Bytes     int64
	CreatedAt time.Time
	// Path is where the content is kept outside the database (the coordinator's files
	// directory, relative to it); "" when it is in the database.
	Path string
}

// Statuses of a batch, as OpenAI names them.
const (
	BatchValidating = "validating"
	BatchFailed     = "failed"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// Batch is a batch of requests run as bronze work (OpenAI's batch object).
type Batch struct {
	ID               string // batch_…
	AccountID        string
	KeyID            string // the key whose caps, models and regions rules apply to its lines
	Endpoint         string // /v1/chat/completions or /v1/completions
	InputFileID      string
	CompletionWindow string
	Status           string
	Errors           []byte // JSON of OpenAI's errors.data, nil when none
	Metadata         []byte // JSON object, nil when none
	OutputFileID     string
	ErrorFileID      string
	// Total is the lines of the input; Counts tells how many have ended, when read.
	Total  int
	Counts BatchCounts
	// Runner is the replica running the batch, "" when none has claimed it yet.
	Runner string

	CreatedAt, InProgressAt, ExpiresAt, FinalizingAt, CompletedAt time.Time
	FailedAt, ExpiredAt, CancellingAt, CancelledAt                time.Time
}

// BatchCounts counts a batch's lines that ended.
type BatchCounts struct {
	Completed int // answered: their result is in the output file
	Failed    int // failed: their error is in the error file
}

// States of a batch line.
const (
	LinePending = "pending"
	LineRunning = "running"
	LineDone    = "done"
	LineFailed  = "failed"
)

// BatchLine is one line of a batch's input, and where it stands.
type BatchLine struct {
	BatchID  string
	Line     int    // 0-based, in the input file's order
	CustomID string // the buyer's, kept in the output
	Body     []byte // the request's body, validated as the live endpoint validates it
	Status   string // Line*
	// RequestID names the line's current attempt: its hold, usage record and receipts.
	RequestID string
	Tries     int    // attempts started
	Result    []byte // the output or error file's line, once done or failed
}

// LineResult is a batch line's result, which a settlement (Settlement.Line) or FinishLine
// writes only while the line is running under RequestID.
type LineResult struct {
	BatchID   string
	Line      int
	RequestID string
	Failed    bool   // the line goes to the error file
	Result    []byte // the output or error file's line
	// Committed, when set, is called with the outcome of the settlement carrying the result,
	// once it committed (nil), was refused (ErrStale when the attempt is stale), or failed.
	Committed func(error) `json:"-"`
}

// Batches is the part of the store that keeps files and batches.
type Batches interface {
	// CreateFile stores a file and its content (nil when f.Path says where the content is).
	CreateFile(ctx context.Context, f *File, content []byte) error
	// FileByID returns an account's file; ErrNotFound for another account's.
	FileByID(ctx context.Context, accountID, id string) (*File, error)
	// Files lists an account's files, newest first: of a purpose when purpose is not "",
	// after the file after names ("" from the newest), at most limit.
	Files(ctx context.Context, accountID, purpose, after string, limit int) ([]*File, error)
	// FileContent opens the content of a file kept in the database; ErrNotFound.
	FileContent(ctx context.Context, accountID, id string) (io.ReadCloser, error)
	// DeleteFile deletes an account's file and returns it (to remove its content on disk);
	// ErrNotFound.
	DeleteFile(ctx context.Context, accountID, id string) (*File, error)

	// CreateBatch stores a batch and its lines in one transaction.
	CreateBatch(ctx context.Context, b *Batch, lines []*BatchLine) error
	// BatchByID returns an account's batch, with its counts; ErrNotFound for another
	// account's. An empty accountID reads any account's.
	BatchByID(ctx context.Context, accountID, id string) (*Batch, error)
	// ListBatches lists an account's batches with their counts, newest first, after the
	// batch after names ("" from the newest), at most limit.
	ListBatches(ctx context.Context, accountID, after string, limit int) ([]*Batch, error)
	// CancelBatch moves an account's batch to cancelling at at, if it is validating or in
	// progress, and returns it; ErrNotFound.
	CancelBatch(ctx context.Context, accountID, id string, at time.Time) (*Batch, error)
	// ClaimBatches makes replica the runner of the batches to run (in progress, cancelling or
	// finalizing) that have no runner, are its own, or whose runner's lease (replica_leases)
	// expired before now, and returns those it runs now, oldest first.
	ClaimBatches(ctx context.Context, replica string, now time.Time) ([]*Batch, error)
	// BatchLines lists a batch's lines of the given states, in line order, from line from on,
	// at most limit.
	BatchLines(ctx context.Context, batchID string, from, limit int, states ...string) ([]*BatchLine, error)
	// StartLine starts an attempt of a pending or running line under requestID, if replica
	// still runs its batch; it returns the line's tries, ErrStale when the line ended or the
	// batch is another replica's.
	StartLine(ctx context.Context, replica, batchID string, line int, requestID string) (tries int, err error)
	// StartLines is StartLine for many lines of a batch in one transaction: tries[i] is line
	// i's, 0 for a line that ended; ErrStale when the batch is another replica's.
	StartLines(ctx context.Context, replica, batchID string, lines []int, requestIDs []string) (tries []int, err error)
	// FinishLine writes a line's result, for an attempt that settled nothing (no node took
	// it); ErrStale when the line is not running under r.RequestID.
	FinishLine(ctx context.Context, r *LineResult) error
	// FinishBatch ends a batch in status at at, with its output and error files (nil: none),
	// in one transaction, if replica still runs it; ErrStale otherwise.
	FinishBatch(ctx context.Context, replica, batchID, status string, at time.Time, output, errs *File, outputContent, errContent []byte) error
	// SetBatchStatus moves a batch that replica runs to status at at (finalizing, the *_at
	// column of the status); ErrStale when replica does not run it.
	SetBatchStatus(ctx context.Context, replica, batchID, status string, at time.Time) error
}
