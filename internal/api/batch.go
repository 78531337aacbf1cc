package api

import "encoding/json"

// The Files and Batch APIs' wire types, in OpenAI's shapes.

// File is OpenAI's file object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // "file"
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"` // "processed"
}

// Deleted is OpenAI's answer to a DELETE.
type Deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// List is OpenAI's cursor page.
type List[T any] struct {
	Object  string `json:"object"` // "list"
	Data    []T    `json:"data"`
	FirstID string `json:"first_id,omitempty"`
	LastID  string `json:"last_id,omitempty"`
	HasMore bool   `json:"has_more"`
}

// BatchRequest is the body of POST /v1/batches.
type BatchRequest struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// Batch is OpenAI's batch object. Times are unix seconds, absent until reached.
type Batch struct {
	ID               string          `json:"id"`
	Object           string          `json:"object"` // "batch"
	Endpoint         string          `json:"endpoint"`
	Errors           *BatchErrors    `json:"errors"`
	InputFileID      string          `json:"input_file_id"`
	CompletionWindow string          `json:"completion_window"`
	Status           string          `json:"status"`
	OutputFileID     *string         `json:"output_file_id"`
	ErrorFileID      *string         `json:"error_file_id"`
	CreatedAt        int64           `json:"created_at"`
	InProgressAt     *int64          `json:"in_progress_at"`
	ExpiresAt        *int64          `json:"expires_at"`
	FinalizingAt     *int64          `json:"finalizing_at"`
	CompletedAt      *int64          `json:"completed_at"`
	FailedAt         *int64          `json:"failed_at"`
	ExpiredAt        *int64          `json:"expired_at"`
	CancellingAt     *int64          `json:"cancelling_at"`
	CancelledAt      *int64          `json:"cancelled_at"`
	RequestCounts    BatchCounts     `json:"request_counts"`
	Metadata         json.RawMessage `json:"metadata"`
}

// BatchErrors are a batch's validation errors.
type BatchErrors struct {
	Object string       `json:"object"` // "list"
	Data   []BatchError `json:"data"`
}

// BatchError is one validation error of a batch's input, on a line (1-based) when it is one
// line's.
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// BatchCounts are a batch's request_counts.
type BatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// BatchInput is one line of a batch's input file.
type BatchInput struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// BatchOutput is one line of a batch's output or error file.
type BatchOutput struct {
	ID       string           `json:"id"` // batch_req_…
	CustomID string           `json:"custom_id"`
	Response *BatchResponse   `json:"response"`
	Error    *BatchLineFailed `json:"error"`
}

// BatchResponse is the answer to one line: the status and body the live endpoint would have
// answered.
type BatchResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// BatchLineFailed is why a line got no response (the batch expired before it ran).
type BatchLineFailed struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
