package openaicompat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tracing"
)

// drainTimeout bounds how long Run waits, after "[DONE]", for the end of the HTTP answer, so
// that the connection can be reused.
const drainTimeout = 250 * time.Millisecond

// chunk is one streamed event: a chat.completion.chunk, a text_completion chunk, or an error.
// Fields servers add (timings, stop_reason, system_fingerprint, logprobs, ...) are ignored.
type chunk struct {
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"` // "error" in old vLLM's flat errors

	usageVal usage // what Usage points to, when decode sets it
}

type choice struct {
	Index        int    `json:"index"`
	Delta        delta  `json:"delta"`
	Message      *delta `json:"message"` // an answer that is not streamed
	Text         string `json:"text"`    // text completions
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"` // vLLM, SGLang, llama.cpp
	Reasoning        string          `json:"reasoning"`         // Ollama, OpenRouter, newer vLLM
	ToolCalls        json.RawMessage `json:"tool_calls"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func (c *chunk) reset() {
	clear(c.Choices[:cap(c.Choices)])
	*c = chunk{Choices: c.Choices[:0]}
}

// reader is the reusable state of one stream.
type reader struct {
	sse     sseReader
	chunk   chunk
	usage   usage
	body    io.Reader
	out     engine.Output
	pending bool // pieces given to out since its last Flush
}

// start readies r to read body and give the answer to out.
func (r *reader) start(body io.Reader, out engine.Output) {
	r.body, r.out, r.pending = body, out, false
	r.sse.reset(r)
}

// Read reads the body for the SSE reader. A read may wait for the server, so it first
// flushes what out holds.
func (r *reader) Read(p []byte) (int, error) {
	if r.pending {
		r.pending = false
		if err := r.out.Flush(); err != nil {
			return 0, emitError{err}
		}
	}
	return r.body.Read(p)
}

var readers = sync.Pool{New: func() any {
	return &reader{sse: sseReader{br: bufio.NewReaderSize(nil, 8<<10)}}
}}

// maxPooled bounds the buffers kept for the next stream.
const maxPooled = 64 << 10

func putReader(r *reader) {
	r.sse.br.Reset(nil)
	r.body, r.out = nil, nil
	if cap(r.sse.line) > maxPooled {
		r.sse.line = nil
	}
	if cap(r.sse.data) > maxPooled {
		r.sse.data = nil
	}
	if cap(r.chunk.Choices) > 4 {
		r.chunk.Choices = nil
	}
	r.chunk.reset()
	readers.Put(r)
}

// Run sends req to the server as a streamed chat or text completion and gives the answer's
// pieces to out, flushing out before each read that may wait for the server. The answer must
// end with "data: [DONE]": one that ends before it, or with an error event (whose message the
// error carries), fails with an error wrapping engine.ErrIncomplete. When the server reports
// no usage, it is counted: one completion token per piece, one prompt token per four
// characters of the prompt's text.
func (e *Engine) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	model := e.upstreamName(req.Model)
	if req.Continue {
		req = e.continuation(req)
	}
	body, err := appendRequest(make([]byte, 0, requestSize(req, model)), req, model)
	if err != nil {
		return engine.Result{}, err
	}
	if req.Continue {
		if e.continues == "" {
			return engine.Result{}, fmt.Errorf("openai engine: this node does not continue answers")
		}
		if e.continues == ContinueVLLM && req.Kind == protocol.KindChat {
			body = append(body[:len(body)-1], continueFields+"}"...)
		}
		if p := partialAnswer(req); p != "" {
			u := &unecho{Output: out, prefix: p}
			defer u.release()
			out = u
		}
	}
	url := e.chatURL
	if req.Kind == protocol.KindCompletion {
		url = e.complURL
	}
	// The request has its own context, so that the wait for the end of the answer after
	// "[DONE]" can be cut short.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return engine.Result{}, fmt.Errorf("openai engine: %w", err)
	}
	hreq.Header["Content-Type"] = []string{"application/json"}
	hreq.Header["Accept"] = []string{"text/event-stream"}
	if e.auth != "" {
		hreq.Header["Authorization"] = []string{e.auth}
	}
	tracing.InjectHTTP(ctx, hreq.Header) // the agent's engine span, for servers that trace (vLLM)
	resp, err := e.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return engine.Result{}, fmt.Errorf("openai engine: %w", ctx.Err())
		}
		return engine.Result{}, fmt.Errorf("openai engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := statusError(resp)
		if _, ok := err.(*engine.RequestError); ok {
			return engine.Result{}, err
		}
		return engine.Result{}, fmt.Errorf("openai engine: %w", err)
	}
	if isJSON(resp.Header.Get("Content-Type")) {
		return e.readAnswer(ctx, req, resp.Body, out)
	}

	r := readers.Get().(*reader)
	defer putReader(r)
	r.start(resp.Body, out)
	res, err := r.read(req)
	if err != nil {
		if ee, ok := err.(emitError); ok {
			return engine.Result{}, ee.err
		}
		if ctx.Err() != nil {
			return engine.Result{}, fmt.Errorf("openai engine: %w", ctx.Err())
		}
		return engine.Result{}, err
	}
	// Read the end of the answer so that the connection can be reused. The answer is whole, so
	// what out holds need not be flushed first: it goes with the job's end.
	r.pending = false
	t := time.AfterFunc(drainTimeout, cancel)
	r.sse.br.Discard(maxPooled)
	t.Stop()
	return res, nil
}

// read reads the stream up to "[DONE]".
func (r *reader) read(req *protocol.Request) (engine.Result, error) {
	var res engine.Result
	gotUsage := false
	emitted := 0
	for {
		event, data, err := r.sse.next()
		if err != nil {
			if _, ok := err.(emitError); ok {
				return engine.Result{}, err
			}
			if err == io.EOF {
				err = errors.New("stream ended without [DONE]")
			}
			return engine.Result{}, fmt.Errorf("openai engine: %w after %d pieces: %w", engine.ErrIncomplete, emitted, err)
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		if string(event) == "error" {
			return engine.Result{}, streamError(data)
		}
		c := &r.chunk
		if err := c.decode(data); err != nil {
			if r.sse.err != nil { // the last event, cut
				return engine.Result{}, fmt.Errorf("openai engine: %w after %d pieces: stream ended in an event: %w", engine.ErrIncomplete, emitted, err)
			}
			return engine.Result{}, fmt.Errorf("openai engine: bad event %q: %w", clip(string(data)), err)
		}
		if !isUnset(c.Error) || c.Object == "error" {
			return engine.Result{}, streamError(data)
		}
		if c.Usage != nil {
			r.usage, gotUsage = *c.Usage, true
		}
		if len(c.Choices) == 0 {
			continue
		}
		ch := &c.Choices[0]
		if ch.FinishReason != "" {
			res.FinishReason = ch.FinishReason
		}
		d := protocol.Delta{Text: ch.Delta.Content, Reasoning: ch.Delta.ReasoningContent}
		if d.Text == "" {
			d.Text = ch.Text
		}
		if d.Reasoning == "" {
			d.Reasoning = ch.Delta.Reasoning
		}
		if hasToolCalls(ch.Delta.ToolCalls) {
			d.ToolCalls = ch.Delta.ToolCalls
		}
		if d.Text == "" && d.Reasoning == "" && d.ToolCalls == nil {
			continue // a role-only chunk, an empty delta, a finish or usage chunk
		}
		if err := r.out.Delta(d); err != nil {
			return engine.Result{}, emitError{err}
		}
		r.pending = true
		emitted++
	}
	if res.FinishReason == "" {
		res.FinishReason = "stop"
	}
	if gotUsage {
		res.Usage = protocol.Usage{PromptTokens: r.usage.PromptTokens, CompletionTokens: r.usage.CompletionTokens}
	} else {
		res.Usage = protocol.Usage{PromptTokens: estimatePrompt(req), CompletionTokens: emitted}
		res.Estimated = true
	}
	return res, nil
}

// emitError carries an error of the engine.Output out of reader.read, to be returned as it is.
type emitError struct{ err error }

func (e emitError) Error() string { return e.err.Error() }

// hasToolCalls reports whether raw holds tool call deltas, not null or [].
func hasToolCalls(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null" && string(raw) != "[]"
}

func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// readAnswer reads a whole answer, for a server that ignored "stream": true.
func (e *Engine) readAnswer(ctx context.Context, req *protocol.Request, body io.Reader, out engine.Output) (engine.Result, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxLine))
	if err != nil {
		if ctx.Err() != nil {
			return engine.Result{}, fmt.Errorf("openai engine: %w", ctx.Err())
		}
		return engine.Result{}, fmt.Errorf("openai engine: read answer: %w: %w", engine.ErrIncomplete, err)
	}
	var c chunk
	if err := c.decode(b); err != nil {
		return engine.Result{}, fmt.Errorf("openai engine: bad answer %q: %w", clip(string(b)), err)
	}
	if !isUnset(c.Error) || c.Object == "error" {
		return engine.Result{}, streamError(b)
	}
	if len(c.Choices) == 0 {
		return engine.Result{}, fmt.Errorf("openai engine: answer without choices: %w", engine.ErrIncomplete)
	}
	ch := &c.Choices[0]
	d := protocol.Delta{Text: ch.Text}
	if m := ch.Message; m != nil {
		d = protocol.Delta{Text: m.Content, Reasoning: m.ReasoningContent}
		if d.Reasoning == "" {
			d.Reasoning = m.Reasoning
		}
		if hasToolCalls(m.ToolCalls) {
			d.ToolCalls = m.ToolCalls
		}
	}
	res := engine.Result{FinishReason: "stop"}
	if ch.FinishReason != "" {
		res.FinishReason = ch.FinishReason
	}
	n := 0
	if d.Text != "" || d.Reasoning != "" || d.ToolCalls != nil {
		if err := out.Delta(d); err != nil {
			return engine.Result{}, err
		}
		n = 1
	}
	if c.Usage != nil {
		res.Usage = protocol.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	} else {
		res.Usage = protocol.Usage{PromptTokens: estimatePrompt(req), CompletionTokens: n}
		res.Estimated = true
	}
	return res, nil
}

// estimatePrompt guesses the prompt's tokens as a quarter of the characters of its text: the
// prompt, or the text of the messages (string contents and text parts).
func estimatePrompt(req *protocol.Request) int {
	chars := utf8.RuneCountInString(req.Prompt)
	if req.Kind == protocol.KindChat {
		var msgs []struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(req.Messages, &msgs) != nil {
			chars = utf8.RuneCount(req.Messages)
		}
		for _, m := range msgs {
			var s string
			var parts []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &s) == nil {
				chars += utf8.RuneCountInString(s)
			} else if json.Unmarshal(m.Content, &parts) == nil {
				for _, p := range parts {
					chars += utf8.RuneCountInString(p.Text)
				}
			}
		}
	}
	return max(chars/4, 1)
}
