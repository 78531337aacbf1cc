package relay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/aside"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Answer names the answer a sink writes.
type Answer struct {
	ID           string // "chatcmpl-…" or "cmpl-…", the same on every chunk
	Model        string // the model the buyer asked for
	Created      int64  // Unix seconds
	IncludeUsage bool   // stream_options.include_usage
	// ServiceTier is the tier that serves a chat answer, by OpenAI's name (priority, default,
	// flex); "" names none. OpenAI's legacy completions have no such field.
	ServiceTier string
}

// Stream writes a streamed answer as server-sent events: chat.completion.chunk objects for a
// chat request, text_completion objects for a legacy completion; then a usage chunk when
// asked, and "data: [DONE]".
type Stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	a       Answer
	chat    bool
	started bool
	prefix  []byte // `data: {"id":…,"choices":[{"index":0,` shared by every chunk
	buf     []byte
}

// Open returns the sink of an answer in OpenAI's shape: a chat's or a completion's, streamed
// as server-sent events or collected into one JSON body.
func Open(w http.ResponseWriter, a Answer, chat, stream bool) Sink {
	switch {
	case stream && chat:
		return NewChatStream(w, a)
	case stream:
		return NewCompletionStream(w, a)
	case chat:
		return NewChatCollect(w, a)
	}
	return NewCompletionCollect(w, a)
}

// NewChatStream returns a sink for a streamed chat answer.
func NewChatStream(w http.ResponseWriter, a Answer) *Stream { return newStream(w, a, true) }

// NewCompletionStream returns a sink for a streamed legacy completion.
func NewCompletionStream(w http.ResponseWriter, a Answer) *Stream { return newStream(w, a, false) }

func newStream(w http.ResponseWriter, a Answer, chat bool) *Stream {
	s := &Stream{w: w, rc: http.NewResponseController(w), a: a, chat: chat}
	object := api.ObjectTextCompletion
	if chat {
		object = api.ObjectChatCompletionChunk
	}
	p := append([]byte(nil), `data: {"id":`...)
	p = api.AppendString(p, a.ID)
	p = append(p, `,"object":"`...)
	p = append(p, object...)
	p = append(p, `","created":`...)
	p = strconv.AppendInt(p, a.Created, 10)
	p = append(p, `,"model":`...)
	p = api.AppendString(p, a.Model)
	if chat && a.ServiceTier != "" {
		p = append(p, `,"service_tier":`...)
		p = api.AppendString(p, a.ServiceTier)
	}
	p = append(p, `,"choices":[`...)
	s.prefix = p
	return s
}

func (s *Stream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Trailer", HeaderCost)
	s.w.WriteHeader(http.StatusOK)
	if s.chat {
		b := append(s.buf[:0], s.prefix...)
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		s.buf = b
		s.w.Write(b)
	}
	// The first flush writes the response's header, deep in net/http: aside, so that the
	// stream's goroutine keeps a small stack for as long as the answer lasts.
	aside.Run(func() { s.rc.Flush() })
}

// Delta writes one chunk.
func (s *Stream) Delta(d *protocol.Delta) error {
	s.start()
	b := append(s.buf[:0], s.prefix...)
	if s.chat {
		b = append(b, `{"index":0,"delta":{`...)
		sep := false
		field := func(name string) {
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(b, name...)
		}
		if d.Text != "" {
			field(`"content":`)
			b = api.AppendString(b, d.Text)
		}
		if d.Reasoning != "" {
			field(`"reasoning_content":`)
			b = api.AppendString(b, d.Reasoning)
		}
		if len(d.ToolCalls) > 0 {
			field(`"tool_calls":`)
			b = append(b, d.ToolCalls...)
		}
		b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	} else {
		b = append(b, `{"text":`...)
		b = api.AppendString(b, d.Text)
		b = append(b, `,"index":0,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	s.buf = b
	_, err := s.w.Write(b)
	return err
}

// End writes the chunk with the finish reason, the usage chunk when asked, and [DONE]. The
// cost also goes in the X-Shareai-Cost trailer.
func (s *Stream) End(finishReason string, u protocol.Usage, cost money.Nanos) error {
	s.start()
	b := append(s.buf[:0], s.prefix...)
	if s.chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":`...)
	}
	b = api.AppendString(b, finishReason)
	b = append(b, "}]}\n\n"...)
	if s.a.IncludeUsage {
		b = append(b, s.prefix...)
		b = append(b, `],"usage":`...)
		b = appendUsage(b, u, cost)
		b = append(b, "}\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	s.buf = b
	_, err := s.w.Write(b)
	s.w.Header().Set(HeaderCost, cost.String())
	return err
}

// Fail ends a started stream that cannot be finished: a chunk with finish_reason "error", then
// an error event, and no [DONE], so no client mistakes the answer for a complete one.
func (s *Stream) Fail(cause error) error {
	s.start()
	b := append(s.buf[:0], s.prefix...)
	if s.chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"error"}]}`+"\n\n"...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"error"}]}`+"\n\n"...)
	}
	e, _ := json.Marshal(failure(cause, "The answer was cut short: "))
	b = append(b, "data: "...)
	b = append(b, e...)
	b = append(b, "\n\n"...)
	s.buf = b
	_, err := s.w.Write(b)
	return err
}

// Flush sends buffered chunks to the buyer.
func (s *Stream) Flush() error { return s.rc.Flush() }

// HeaderCost carries what a request cost the buyer, in USD: a header on a JSON answer, a
// trailer on a stream.
const HeaderCost = "X-Shareai-Cost"

func appendUsage(b []byte, u protocol.Usage, cost money.Nanos) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens+u.CompletionTokens), 10)
	b = append(b, `,"cost":`...)
	b = append(b, cost.String()...)
	return append(b, '}')
}
