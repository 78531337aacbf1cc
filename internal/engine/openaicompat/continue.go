package openaicompat

import (
	"encoding/json"
	"strings"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// How a server continues a partial assistant answer (Config.Continue).
const (
	// ContinuePrefill: the server continues a trailing assistant message by itself: llama.cpp
	// llama-server (since 2025), Ollama's /v1 (since 0.2.8), TGI, another ShareAI gateway.
	ContinuePrefill = "prefill"
	// ContinueVLLM: the server needs continue_final_message and add_generation_prompt: false
	// (vLLM, SGLang).
	ContinueVLLM = "vllm"
)

// continuation is req as the server takes a continuation: a completion's partial answer
// follows its prompt, and max_tokens, which counts the whole answer in a continuation, counts
// what is left (by an estimate of the partial answer's tokens: four bytes a token).
func (e *Engine) continuation(req *protocol.Request) *protocol.Request {
	c := *req
	partial := c.Partial
	if c.Kind == protocol.KindCompletion {
		c.Prompt, c.Partial = c.Prompt+c.Partial, ""
	} else {
		partial = partialAnswer(req)
	}
	if c.MaxTokens > 0 {
		c.MaxTokens = max(1, c.MaxTokens-(len(partial)+3)/4)
	}
	return &c
}

// continueFields are the fields vLLM needs to continue the last assistant message.
const continueFields = `,"continue_final_message":true,"add_generation_prompt":false`

// partialAnswer returns the text of the trailing assistant message of a continuation.
func partialAnswer(req *protocol.Request) string {
	if !req.Continue || req.Kind != protocol.KindChat {
		return ""
	}
	var msgs []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	if json.Unmarshal(req.Messages, &msgs) != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		return ""
	}
	return msgs[len(msgs)-1].Content
}

// unecho drops the partial answer from the start of the answer, for servers that repeat it
// (llama.cpp builds of mid-2026 do) and keeps the answer whole for those that do not.
type unecho struct {
	engine.Output
	prefix  string
	matched int // bytes of prefix seen at the start of the answer so far
	done    bool
}

func (u *unecho) Delta(d protocol.Delta) error {
	if u.done || d.Text == "" {
		return u.Output.Delta(d)
	}
	rest := u.prefix[u.matched:]
	switch {
	case strings.HasPrefix(rest, d.Text):
		// Still inside what may be an echo: hold it back.
		u.matched += len(d.Text)
		if u.matched == len(u.prefix) {
			u.done = true
		}
		return nil
	case strings.HasPrefix(d.Text, rest):
		u.done = true
		d.Text = d.Text[len(rest):]
		if d.Text == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 {
			return nil
		}
		return u.Output.Delta(d)
	}
	// Not an echo after all: give back what was held.
	u.done = true
	d.Text = u.prefix[:u.matched] + d.Text
	return u.Output.Delta(d)
}

// release gives back text held as a possible echo when the answer ended before deciding: an
// answer shorter than the partial answer it continues, and equal to its start.
func (u *unecho) release() {
	if !u.done && u.matched > 0 {
		u.done = true
		u.Output.Delta(protocol.Delta{Text: u.prefix[:u.matched]})
	}
}
