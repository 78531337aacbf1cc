package core

import (
	"bytes"
	"encoding/json"

	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/protocol"
)

// What a chat template may add to a prompt beyond its messages' text: markers around each
// message, and around the whole a default system prompt or the date Llama 3.1 states. A
// template prints the tools too, indented (Llama 3.1's with four spaces), and explains how to
// call them.
const (
	promptPerMessage = 8
	promptSlack      = 64
	promptSlackTools = 256
)

// mediaTokens bounds the prompt tokens of one image, audio clip or file in a message: vision
// models spend from a few hundred tokens an image (Llama 3.2 Vision) to over ten thousand for
// a large one (Qwen2.5-VL).
const mediaTokens = 16384

// mediaParts counts the parts of chat messages that are not text. Only messages that may
// hold such parts are decoded.
func mediaParts(msgs json.RawMessage) int {
	if !bytes.Contains(msgs, []byte(`"image_url"`)) && !bytes.Contains(msgs, []byte(`"input_audio"`)) && !bytes.Contains(msgs, []byte(`"file"`)) {
		return 0
	}
	return readPrompt(&protocol.Request{Messages: msgs}).media
}

// promptMessage is what the meter reads of a chat message.
type promptMessage struct {
	Role       string          `json:"role"`
	Name       string          `json:"name"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// promptText is the text a model reads of a request, as the meter counts it: its messages'
// roles, names and contents (decoded, so that "\u4e2d" counts as the character it is), their
// tool calls, the prompt of a completion, and the tools. It is the request's JSON as a
// fallback, for messages it cannot read. media counts the images, audio clips and files in
// messages, whose tokens no text shows.
type promptText struct {
	texts    []string
	messages int
	tools    string
	media    int // parts of messages that are not text
}

func readPrompt(req *protocol.Request) promptText {
	p := promptText{tools: string(req.Tools)}
	if req.Prompt != "" {
		p.texts = append(p.texts, req.Prompt)
	}
	if len(req.Messages) == 0 {
		return p
	}
	var msgs []promptMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		p.texts = append(p.texts, string(req.Messages))
		return p
	}
	p.messages = len(msgs)
	for _, m := range msgs {
		p.texts = append(p.texts, m.Role, m.Name, m.ToolCallID, string(m.ToolCalls))
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			p.texts = append(p.texts, s)
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			p.texts = append(p.texts, string(m.Content))
			continue
		}
		for _, part := range parts {
			if part.Type == "text" {
				p.texts = append(p.texts, part.Text)
			} else {
				p.media++
			}
		}
	}
	return p
}

// checkPrompt judges a node's claim of prompt tokens for the request: the first node's (extra
// 0), or a continuing node's, which read the partial answer too (extra: its tokens, as
// billed). The bound is the meter's count of the prompt's text, with a chat template's slack;
// a request with media is not bounded here (Ledger.Price bounds it by its size). A claim
// within the words of the request's JSON and the slack (every honest claim of the simulated
// engine) is taken without decoding the messages: their JSON has no more words than their
// texts, but for a few keys a message, which the slack per message outweighs. Else the
// messages are decoded and counted, once a request.
func (c *Core) checkPrompt(r *Request, model string, claim, extra int) meter.Verdict {
	req := r.Job
	if r.promptWords < 0 {
		r.promptWords = promptSlack + meter.Words(string(req.Messages)) + meter.Words(req.Prompt)
		if len(req.Tools) > 0 {
			r.promptWords += promptSlackTools + 2*meter.Words(string(req.Tools))
		}
	}
	if claim <= r.promptWords+extra {
		return meter.Verdict{Billed: claim}
	}
	if r.promptBound < 0 {
		p := readPrompt(req)
		r.promptMedia = p.media > 0
		r.promptBound = promptSlack + promptPerMessage*p.messages
		if p.tools != "" {
			r.promptBound += promptSlackTools + 2*c.meter.Bound(model, p.tools)
		}
		for _, s := range p.texts {
			r.promptBound += c.meter.Bound(model, s)
		}
	}
	if r.promptMedia {
		return meter.Verdict{Billed: claim}
	}
	return c.meter.Check(model, claim, r.promptBound+extra) // the bound as special: no text to count
}
