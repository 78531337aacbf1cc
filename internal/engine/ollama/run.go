package ollama

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// drainTimeout bounds how long Run waits, after the last object, for the end of the HTTP
// answer, so that the connection can be reused.
const drainTimeout = 250 * time.Millisecond

// chunk is one object of a /api/chat or /api/generate stream. The last has done: true, why
// it stopped and the token counts; Ollama leaves out counts that are zero. The durations (in
// nanoseconds), created_at, model and a generate's context are not read.
type chunk struct {
	Message *struct {
		Content   string     `json:"content"`
		Thinking  string     `json:"thinking"`
		ToolCalls []toolCall `json:"tool_calls"`
	} `json:"message"` // /api/chat
	Response        string          `json:"response"` // /api/generate
	Thinking        string          `json:"thinking"` // /api/generate
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int             `json:"prompt_eval_count"`
	EvalCount       int             `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

// Run sends req to Ollama as a streamed chat (POST /api/chat) or raw text completion (POST
// /api/generate) and gives each piece of the answer to out, flushing out before each read
// that may wait for Ollama. A piece's message.content is a delta's Text, message.thinking its
// Reasoning, message.tool_calls its ToolCalls in OpenAI's shape. The answer must end with an
// object with done: true; one that ends before it, has an {"error": ...} object or an object
// that is not JSON fails with an error wrapping engine.ErrIncomplete. A request Ollama refuses
// (400, or 404 for a model it does not have) fails with a *engine.RequestError.
//
// Usage is Ollama's prompt_eval_count and eval_count. Ollama leaves out a count that is zero:
// a missing eval_count is counted as the pieces given to out, a missing prompt_eval_count
// estimated as a token per four characters of the prompt's text; the result is then
// Estimated. A done_reason of "length" finishes with "length"; an answer with tool calls with
// "tool_calls"; anything else with "stop".
func (e *Engine) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	c, err := e.newCall(req)
	if err != nil {
		return engine.Result{}, err
	}
	// The request has its own context, so that the wait for the end of the answer can be cut
	// short.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := e.post(rctx, c.path, c.body)
	if err != nil {
		if ctx.Err() != nil {
			return engine.Result{}, fmt.Errorf("ollama engine: %w", ctx.Err())
		}
		if re, ok := errors.AsType[*engine.RequestError](err); ok {
			return engine.Result{}, re
		}
		return engine.Result{}, fmt.Errorf("ollama engine: %s: %w", c.path, err)
	}
	defer resp.Body.Close()

	s := &stream{out: out, newID: e.newID}
	res, err := s.read(ctx, newObjects(resp.Body, s.flush))
	if err != nil {
		if oe, ok := err.(outputError); ok {
			return engine.Result{}, oe.err
		}
		if ctx.Err() != nil {
			return engine.Result{}, fmt.Errorf("ollama engine: %w", ctx.Err())
		}
		return engine.Result{}, err
	}
	if res.Usage.PromptTokens == 0 {
		res.Usage.PromptTokens = max(c.promptChars/4, 1)
		res.Estimated = true
	}
	// Read the end of the answer so that the connection can be reused. The answer is whole, so
	// what out holds need not be flushed first: it goes with the job's end.
	t := time.AfterFunc(drainTimeout, cancel)
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxObject))
	t.Stop()
	return res, nil
}

// stream is the state of one answer being read.
type stream struct {
	out       engine.Output
	newID     func() string
	pending   bool // pieces given to out since its last Flush
	pieces    int  // pieces given to out
	toolCalls int  // tool calls given to out
}

// outputError carries an error of the engine.Output out of stream.read, to be returned as it
// is.
type outputError struct{ err error }

func (e outputError) Error() string { return e.err.Error() }

// flush sends on what out holds, before a read that may wait.
func (s *stream) flush() error {
	if !s.pending {
		return nil
	}
	s.pending = false
	if err := s.out.Flush(); err != nil {
		return outputError{err}
	}
	return nil
}

// read reads objects up to the one with done: true. The usage it returns has a
// PromptTokens of 0 when Ollama did not give it.
func (s *stream) read(ctx context.Context, objs *objects) (engine.Result, error) {
	for {
		if err := ctx.Err(); err != nil {
			return engine.Result{}, err
		}
		var c chunk
		if err := objs.next(&c); err != nil {
			return engine.Result{}, s.readError(err)
		}
		if !isUnset(c.Error) {
			// Ollama sends its status before it runs the model, so an error here is the
			// runner's (it crashed, ran out of memory): a failure of the node.
			return engine.Result{}, fmt.Errorf("ollama engine: error in stream after %d pieces: %s: %w",
				s.pieces, errorText(c.Error), engine.ErrIncomplete)
		}
		if err := s.emit(&c); err != nil {
			return engine.Result{}, err
		}
		if c.Done {
			return s.result(&c), nil
		}
	}
}

// readError explains why the stream could not be read further.
func (s *stream) readError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, new(outputError)):
		return err
	case err == io.EOF:
		err = errors.New("stream ended before its done object")
	case err == io.ErrUnexpectedEOF:
		err = errors.New("stream ended inside an object")
	case errors.As(err, &syntax), errors.As(err, &typ):
		err = fmt.Errorf("bad object in stream: %w", err)
	}
	return fmt.Errorf("ollama engine: %w after %d pieces: %w", engine.ErrIncomplete, s.pieces, err)
}

// emit gives the pieces of c to out.
func (s *stream) emit(c *chunk) error {
	d := protocol.Delta{Text: c.Response, Reasoning: c.Thinking}
	if m := c.Message; m != nil {
		d.Text += m.Content
		d.Reasoning += m.Thinking
		if len(m.ToolCalls) > 0 {
			calls, err := s.toolCallDeltas(m.ToolCalls)
			if err != nil {
				return fmt.Errorf("ollama engine: tool calls: %w: %w", err, engine.ErrIncomplete)
			}
			d.ToolCalls = calls
		}
	}
	if d.Text == "" && d.Reasoning == "" && d.ToolCalls == nil {
		return nil
	}
	if err := s.out.Delta(d); err != nil {
		return outputError{err}
	}
	s.pending = true
	s.pieces++
	return nil
}

// toolCallDelta is a tool call in an OpenAI chat.completion.chunk.
type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallDeltas turns Ollama's tool calls, each whole with its arguments as an object, into
// OpenAI tool call deltas with the arguments as a JSON string. The index counts the answer's
// tool calls (versions before function.index give none); a call without an id gets one.
func (s *stream) toolCallDeltas(calls []toolCall) (json.RawMessage, error) {
	deltas := make([]toolCallDelta, len(calls))
	for i, tc := range calls {
		d := &deltas[i]
		d.Index, d.ID, d.Type = s.toolCalls, tc.ID, "function"
		if d.ID == "" {
			d.ID = s.newID()
		}
		d.Function.Name = tc.Function.Name
		args, err := argumentsString(tc.Function.Arguments)
		if err != nil {
			return nil, err
		}
		d.Function.Arguments = args
		s.toolCalls++
	}
	return marshal(deltas)
}

// argumentsString is a tool call's arguments as OpenAI sends them: a string of JSON.
func argumentsString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "{}", nil
	case raw[0] == '"': // already a string
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// result ends the answer that c, the done object, ends.
func (s *stream) result(c *chunk) engine.Result {
	res := engine.Result{
		FinishReason: finishReason(c.DoneReason, s.toolCalls > 0),
		Usage:        protocol.Usage{PromptTokens: max(c.PromptEvalCount, 0), CompletionTokens: c.EvalCount},
	}
	if c.EvalCount <= 0 {
		res.Usage.CompletionTokens, res.Estimated = s.pieces, true
	}
	return res
}

// finishReason is OpenAI's finish reason for Ollama's done_reason: "stop", "length", or
// "load" and "unload" (a request that only loaded or unloaded the model).
func finishReason(doneReason string, toolCalls bool) string {
	switch {
	case toolCalls:
		return "tool_calls"
	case doneReason == "length":
		return "length"
	}
	return "stop"
}

// randomCallID makes an id for a tool call Ollama gave none, as Ollama's /v1 does.
func randomCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
