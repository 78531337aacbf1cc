package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// Decode decodes and validates a line's body exactly as the live endpoint does (api.Decode,
// then the request's Job), and returns the job and its routing. A streamed request is refused:
// a batch's answers are whole.
func Decode(endpoint string, body []byte) (*protocol.Request, api.Routing, string, error) {
	var (
		job    *protocol.Request
		rt     api.Routing
		param  = "max_tokens"
		stream bool
		err    *api.Error // Job's: a nil one is no error
	)
	switch endpoint {
	case EndpointChat:
		var b api.ChatRequest
		if derr := api.Decode(bytes.NewReader(body), &b); derr != nil {
			return nil, rt, "", derr
		}
		if b.MaxCompletionTokens != nil {
			param = "max_completion_tokens"
		}
		stream, rt = b.Stream, b.Routing
		job, err = b.Job()
	case EndpointCompletions:
		var b api.CompletionRequest
		if derr := api.Decode(bytes.NewReader(body), &b); derr != nil {
			return nil, rt, "", derr
		}
		stream, rt = b.Stream, b.Routing
		job, err = b.Job()
	default:
		return nil, rt, "", api.BadRequest("endpoint", api.CodeInvalidValue, "Invalid 'endpoint': '%s'. Use /v1/chat/completions or /v1/completions.", endpoint)
	}
	if err != nil {
		return nil, rt, "", err
	}
	if stream {
		return nil, rt, "", api.Unsupported("stream", "A batch's requests cannot be streamed: remove 'stream' or set it to false.")
	}
	return job, rt, param, nil
}

// Create validates a batch's request and its input file's lines, and stores the batch: in
// progress, with its lines, or failed with an error per invalid line (and no line to run).
func (b *Batches) Create(ctx context.Context, key *store.Key, req api.BatchRequest) (*store.Batch, error) {
	if req.Endpoint != EndpointChat && req.Endpoint != EndpointCompletions {
		return nil, api.BadRequest("endpoint", api.CodeInvalidValue, "Invalid 'endpoint': '%s'. This network runs batches of /v1/chat/completions or /v1/completions.", req.Endpoint)
	}
	if req.CompletionWindow != "24h" {
		return nil, api.BadRequest("completion_window", api.CodeInvalidValue, "Invalid 'completion_window': '%s'. Only '24h' is supported.", req.CompletionWindow)
	}
	meta, err := metadata(req.Metadata)
	if err != nil {
		return nil, err
	}
	if req.InputFileID == "" {
		return nil, api.BadRequest("input_file_id", "missing_required_parameter", "Missing required parameter: 'input_file_id'.")
	}
	f, err := b.cfg.Store.FileByID(ctx, key.AccountID, req.InputFileID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "input_file_id", Code: api.CodeNotFound,
			Message: fmt.Sprintf("No such file: '%s'.", req.InputFileID)}
	}
	if err != nil {
		return nil, err
	}
	if f.Purpose != store.PurposeBatch {
		return nil, api.BadRequest("input_file_id", api.CodeInvalidValue, "The file '%s' has purpose '%s': a batch's input file must have purpose 'batch'.", f.ID, f.Purpose)
	}
	rc, err := b.Open(ctx, f)
	if err != nil {
		return nil, err
	}
	lines, lineErrs, err := b.parse(rc, req.Endpoint)
	rc.Close()
	if err != nil {
		return nil, err
	}
	now := b.cfg.Now()
	bt := &store.Batch{ID: newID("batch_"), AccountID: key.AccountID, KeyID: key.ID, Endpoint: req.Endpoint, InputFileID: f.ID,
		CompletionWindow: req.CompletionWindow, Metadata: meta, CreatedAt: now, ExpiresAt: now.Add(Window)}
	if len(lineErrs) > 0 {
		bt.Status, bt.FailedAt = store.BatchFailed, now
		if bt.Errors, err = json.Marshal(lineErrs); err != nil {
			return nil, err
		}
		lines = nil
	} else {
		bt.Status, bt.InProgressAt, bt.Total = store.BatchInProgress, now, len(lines)
	}
	if err := b.cfg.Store.CreateBatch(ctx, bt, lines); err != nil {
		return nil, err
	}
	return bt, nil
}

// metadata checks a batch's metadata as OpenAI does, and returns its JSON (nil when none).
func metadata(m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > maxMetadata {
		return nil, api.BadRequest("metadata", api.CodeInvalidValue, "Invalid 'metadata': at most %d pairs, not %d.", maxMetadata, len(m))
	}
	for k, v := range m {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return nil, api.BadRequest("metadata", api.CodeInvalidValue, "Invalid 'metadata': keys are at most %d characters and values at most %d ('%.64s' is longer).", maxMetadataKey, maxMetadataValue, k)
		}
	}
	return json.Marshal(m)
}

// parse reads an input file's lines and validates each: a JSON object with a custom_id unique
// in the file, method POST, the batch's endpoint as url, and a body the live endpoint accepts.
// It returns the lines, or the errors of the invalid ones (the first maxErrors).
func (b *Batches) parse(r io.Reader, endpoint string) ([]*store.BatchLine, []api.BatchError, error) {
	var (
		lines []*store.BatchLine
		errs  []api.BatchError
		seen  = map[string]bool{}
		br    = bufio.NewReaderSize(r, 64<<10)
	)
	fail := func(line int, param, code, format string, args ...any) {
		if len(errs) < maxErrors {
			e := api.BatchError{Code: code, Message: fmt.Sprintf(format, args...), Line: &line}
			if param != "" {
				e.Param = &param
			}
			errs = append(errs, e)
		}
	}
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, nil, fmt.Errorf("read the input file: %w", err)
		}
		if raw = bytes.TrimSpace(raw); len(raw) > 0 {
			if len(lines)+len(errs) >= MaxLines {
				fail(n, "", "too_many_requests", "The input file has more than %d requests: split it into several batches.", MaxLines)
				break
			}
			if l, e := b.parseLine(raw, endpoint, seen); e != nil {
				fail(n, e.Param, e.Code, "%s", e.Message)
			} else {
				l.Line = len(lines) + len(errs) // n-1 when no line before was blank
				lines = append(lines, l)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if len(lines)+len(errs) == 0 {
		fail(1, "", "empty_file", "The input file has no requests.")
	}
	return lines, errs, nil
}

// parseLine validates one line of the input.
func (b *Batches) parseLine(raw []byte, endpoint string, seen map[string]bool) (*store.BatchLine, *api.Error) {
	var in api.BatchInput
	if err := json.Unmarshal(raw, &in); err != nil || raw[0] != '{' {
		return nil, api.BadRequest("", "invalid_json_line", "This line is not a JSON object: each line of a batch's input is one request, as {\"custom_id\": …, \"method\": \"POST\", \"url\": …, \"body\": {…}}.")
	}
	switch {
	case in.CustomID == nil || *in.CustomID == "":
		return nil, api.BadRequest("custom_id", "missing_required_parameter", "Missing 'custom_id': each request needs a string custom_id, unique in the file.")
	case seen[*in.CustomID]:
		return nil, api.BadRequest("custom_id", "duplicate_custom_id", "The custom_id '%.64s' is used by an earlier line: each must be unique.", *in.CustomID)
	case in.Method != http.MethodPost:
		return nil, api.BadRequest("method", api.CodeInvalidValue, "Invalid 'method': '%.16s'. Only POST is supported.", in.Method)
	case in.URL != endpoint:
		return nil, api.BadRequest("url", "mismatched_url", "The line's url '%.64s' is not the batch's endpoint '%s'.", in.URL, endpoint)
	case len(in.Body) == 0 || in.Body[0] != '{':
		return nil, api.BadRequest("body", "missing_required_parameter", "Missing 'body': the request's body, a JSON object.")
	}
	job, _, param, err := Decode(endpoint, in.Body)
	if err == nil && b.cfg.Check != nil {
		err = b.cfg.Check(job, param)
	}
	if err != nil {
		ae, ok := errors.AsType[*api.Error](err)
		if !ok {
			ae = api.BadRequest("body", api.CodeInvalidValue, "%v", err)
		}
		return nil, ae
	}
	seen[*in.CustomID] = true
	var body bytes.Buffer
	if err := json.Compact(&body, in.Body); err != nil {
		return nil, api.BadRequest("body", api.CodeInvalidJSON, "The body is not valid JSON.")
	}
	return &store.BatchLine{CustomID: *in.CustomID, Body: body.Bytes()}, nil
}

// Cancel moves an account's batch to cancelling: its runner starts no new line, lets those in
// flight finish and be billed, then ends it cancelled with the files of what ran.
func (b *Batches) Cancel(ctx context.Context, accountID, id string) (*store.Batch, error) {
	bt, err := b.cfg.Store.CancelBatch(ctx, accountID, id, b.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, NotFound(id)
	}
	return bt, err
}

// NotFound is the 404 of a batch id that is not the account's.
func NotFound(id string) error {
	return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Code: api.CodeNotFound,
		Message: fmt.Sprintf("No batch found with id '%s'.", id)}
}
