package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Codes of errors that are not the server's, in ErrorGroup.Code.
const (
	CodeNetwork          = "network_error"     // no answer: refused, reset, closed early
	CodeTimeout          = "timeout"           // the request took longer than Config.Timeout
	CodeIncompleteStream = "incomplete_stream" // the stream ended without data: [DONE]
	CodeBadResponse      = "bad_response"      // a 200 whose body is not what the API sends
)

// requestBody is the JSON body every request of a run sends.
func requestBody(model, prompt string, maxTokens int, stream bool) ([]byte, error) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	body := struct {
		Model         string         `json:"model"`
		Messages      []message      `json:"messages"`
		MaxTokens     int            `json:"max_tokens"`
		Stream        bool           `json:"stream,omitempty"`
		StreamOptions *streamOptions `json:"stream_options,omitempty"`
	}{Model: model, Messages: []message{{"user", prompt}}, MaxTokens: maxTokens}
	if stream {
		body.Stream, body.StreamOptions = true, &streamOptions{IncludeUsage: true}
	}
	return json.Marshal(body)
}

// result is what one request did.
type result struct {
	latency   time.Duration // from sending to the end of the answer
	ttft      time.Duration // from sending to the first chunk with content (streams)
	lastToken time.Duration // from sending to the last chunk with content (streams)
	chunks    int           // chunks with content (streams)
	// Token counts from the answer's usage; for a stream without usage, completionTokens
	// counts its chunks with content.
	promptTokens, completionTokens int
	usage                          bool // the answer reported its usage
	err                            *ErrorGroup
	cancelled                      bool // the run was interrupted while the request ran
}

// tokens is the answer's output tokens.
func (r *result) tokens() int { return r.completionTokens }

// sender sends one worker's requests, one at a time, reusing its buffers.
type sender struct {
	client  *http.Client
	url     string
	auth    string
	body    []byte
	stream  bool
	timeout time.Duration
	// first, if set, is called when a stream's first chunk with content arrives, with the time
	// since the request was sent.
	first func(ttft time.Duration)

	br    *bufio.Reader
	buf   bytes.Buffer
	event []byte // the data of the event being read
	line  []byte // a line longer than br's buffer
}

func newSender(client *http.Client, url, key string, body []byte, stream bool, timeout time.Duration) *sender {
	return &sender{client: client, url: url, auth: "Bearer " + key, body: body, stream: stream, timeout: timeout,
		br: bufio.NewReaderSize(nil, 16<<10)}
}

// send sends one request and reads its answer to the end.
func (s *sender) send(ctx context.Context) result {
	rctx := ctx
	if s.timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.url, bytes.NewReader(s.body))
	if err != nil {
		return result{err: &ErrorGroup{Code: CodeBadResponse, Message: err.Error()}}
	}
	req.Header = http.Header{"Authorization": {s.auth}, "Content-Type": {"application/json"}}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return failure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.buf.Reset()
		s.buf.ReadFrom(io.LimitReader(resp.Body, 64<<10))
		return result{err: httpError(resp.StatusCode, s.buf.Bytes())}
	}
	var r result
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); s.stream && ct == "text/event-stream" {
		r, err = s.readStream(resp.Body, start)
	} else {
		r, err = s.readJSON(resp.Body)
	}
	if err != nil {
		return failure(ctx, err)
	}
	r.latency = time.Since(start)
	return r
}

// failure is the result of a request that got no complete answer.
func failure(ctx context.Context, err error) result {
	switch {
	case ctx.Err() != nil:
		return result{cancelled: true}
	case errors.Is(err, context.DeadlineExceeded):
		return result{err: &ErrorGroup{Code: CodeTimeout, Message: err.Error()}}
	}
	return result{err: &ErrorGroup{Code: CodeNetwork, Message: err.Error()}}
}

// httpError reads an error answer: OpenAI's {"error":{…}}, or else whatever the body says.
func httpError(status int, body []byte) *ErrorGroup {
	g := &ErrorGroup{Status: status}
	if e, ok := parseError(body); ok {
		g.Code, g.Type, g.Message = e.Code, e.Type, e.Message
		return g
	}
	g.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	if g.Message == "" {
		g.Message = http.StatusText(status)
	}
	return g
}

type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// parseError reads {"error":{"message","type","code"}}; code may be null or a number.
func parseError(b []byte) (apiError, bool) {
	var v struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil || v.Error == nil {
		return apiError{}, false
	}
	e := apiError{Message: v.Error.Message, Type: v.Error.Type}
	var code string
	if json.Unmarshal(v.Error.Code, &code) == nil {
		e.Code = code
	} else if c := string(v.Error.Code); c != "null" {
		e.Code = c
	}
	return e, true
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// readJSON reads a non-streamed answer, for its usage.
func (s *sender) readJSON(body io.Reader) (result, error) {
	s.buf.Reset()
	if _, err := s.buf.ReadFrom(body); err != nil {
		return result{}, err
	}
	var v struct {
		Usage *usageJSON `json:"usage"`
	}
	if err := json.Unmarshal(s.buf.Bytes(), &v); err != nil {
		return result{err: &ErrorGroup{Status: http.StatusOK, Code: CodeBadResponse, Message: "the answer is not JSON: " + err.Error()}}, nil
	}
	r := result{}
	if v.Usage != nil {
		r.usage, r.promptTokens, r.completionTokens = true, v.Usage.PromptTokens, v.Usage.CompletionTokens
	}
	return r, nil
}

// readStream reads server-sent events to data: [DONE], timing the chunks with content and
// taking the token counts from the usage chunk (or, without one, counting the chunks).
func (s *sender) readStream(body io.Reader, start time.Time) (result, error) {
	s.br.Reset(body)
	defer s.br.Reset(nil)
	var st streamState
	s.event = s.event[:0]
	data := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return result{}, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 { // the end of an event
			if data {
				if st.event(s.event, time.Since(start)) && s.first != nil {
					s.first(st.ttft)
				}
				if st.done || st.err != nil {
					break
				}
			}
			s.event, data = s.event[:0], false
			continue
		}
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // a comment, or a field other than data
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if data {
			s.event = append(s.event, '\n')
		}
		s.event, data = append(s.event, v...), true
	}
	if data && !st.done && st.err == nil { // an event not ended by a blank line
		if st.event(s.event, time.Since(start)) && s.first != nil {
			s.first(st.ttft)
		}
	}
	return st.result(), nil
}

// readLine reads one line, however long.
func (s *sender) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = nil
		}
		return line, err
	}
	s.line = append(s.line[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = s.br.ReadSlice('\n')
		s.line = append(s.line, line...)
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return s.line, err
}

// streamState is what a stream has said so far.
type streamState struct {
	chunks          int
	ttft, lastToken time.Duration
	usage           *usageJSON
	done            bool
	finishedInError bool // a chunk with finish_reason "error"
	err             *ErrorGroup
}

// event takes one event's data, received at; it reports whether it was the first chunk with
// content.
func (st *streamState) event(data []byte, at time.Duration) (first bool) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		st.done = true
		return false
	}
	if hasValue(data, `"error"`, '{') {
		if e, ok := parseError(data); ok {
			st.err = &ErrorGroup{Status: http.StatusOK, Code: e.Code, Type: e.Type, Message: e.Message}
			return false
		}
	}
	if hasValue(data, `"usage"`, '{') {
		var v struct {
			Usage *usageJSON `json:"usage"`
		}
		if json.Unmarshal(data, &v) == nil && v.Usage != nil {
			st.usage = v.Usage
		}
	}
	if v, ok := valueAfter(data, `"finish_reason"`); ok && bytes.HasPrefix(v, []byte(`"error"`)) {
		st.finishedInError = true
	}
	if hasNonEmptyString(data, `"content"`) || hasNonEmptyString(data, `"text"`) ||
		hasNonEmptyString(data, `"reasoning_content"`) || hasValue(data, `"tool_calls"`, '[') {
		st.chunks++
		st.lastToken = at
		if st.chunks == 1 {
			st.ttft = at
			return true
		}
	}
	return false
}

func (st *streamState) result() result {
	if st.err != nil {
		return result{err: st.err}
	}
	if !st.done {
		msg := "the stream ended without data: [DONE]"
		if st.finishedInError {
			msg = `the stream ended with finish_reason "error"`
		}
		return result{err: &ErrorGroup{Status: http.StatusOK, Code: CodeIncompleteStream, Message: msg}}
	}
	r := result{ttft: st.ttft, lastToken: st.lastToken, chunks: st.chunks, completionTokens: st.chunks}
	if st.usage != nil {
		r.usage, r.promptTokens, r.completionTokens = true, st.usage.PromptTokens, st.usage.CompletionTokens
	}
	return r
}

// hasValue reports whether JSON text has the key (quoted) followed by a value starting with
// open. A quoted key followed by a colon cannot occur inside a string, where quotes are
// escaped, so this finds keys at any depth without decoding.
func hasValue(data []byte, key string, open byte) bool {
	v, ok := valueAfter(data, key)
	return ok && len(v) > 0 && v[0] == open
}

// hasNonEmptyString reports whether JSON text has the key with a non-empty string value.
func hasNonEmptyString(data []byte, key string) bool {
	v, ok := valueAfter(data, key)
	return ok && len(v) > 1 && v[0] == '"' && v[1] != '"'
}

// valueAfter returns the text after the first occurrence of key and its colon.
func valueAfter(data []byte, key string) ([]byte, bool) {
	for {
		i := bytes.Index(data, []byte(key))
		if i < 0 {
			return nil, false
		}
		data = bytes.TrimLeft(data[i+len(key):], " \t\r\n")
		if len(data) > 0 && data[0] == ':' {
			return bytes.TrimLeft(data[1:], " \t\r\n"), true
		}
	}
}
