package openaicompat

import (
	"encoding/json"

	"github.com/shareai/shareai/internal/jsondec"
)

// decode reads one event into c. A one-pass reader (jsondec) that reads only c's fields and
// skips the rest does the common case; whatever it does not read exactly as encoding/json
// would (a type it does not expect, a duplicate or case-folded key, an escaped key, invalid
// JSON) is left to encoding/json, so the result and the errors are always encoding/json's.
// FuzzDecode holds the two to the same answers.
func (c *chunk) decode(data []byte) error {
	c.reset()
	d := jsondec.New(data)
	if readChunk(&d, c) && d.End() {
		return nil
	}
	c.reset()
	return json.Unmarshal(data, c)
}

// Member names of each object, as jsondec.Members numbers them.
var (
	chunkKeys  = []string{"choices", "usage", "error", "object"}
	choiceKeys = []string{"index", "delta", "message", "text", "finish_reason"}
	deltaKeys  = []string{"content", "reasoning_content", "reasoning", "tool_calls"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens"}
)

// common are strings that come in many events, kept to spare an allocation each time.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"chat.completion.chunk", "text_completion", "chat.completion", "error",
		"stop", "length", "tool_calls", "content_filter", "function_call"} {
		m[s] = s
	}
	return m
}()

// str reads a string, or null, which leaves *s as it is.
func str(d *jsondec.Decoder, s *string) bool { return d.Null() || d.Interned(s, common) }

// integer reads an integer, or null, which leaves *n as it is.
func integer(d *jsondec.Decoder, n *int) bool { return d.Null() || d.Int(n) }

func readChunk(d *jsondec.Decoder, c *chunk) bool {
	return d.Members(chunkKeys, func(k int) bool {
		switch k {
		case 0:
			return readChoices(d, c)
		case 1:
			return readUsage(d, c)
		case 2:
			return d.Raw(&c.Error)
		default:
			return str(d, &c.Object)
		}
	})
}

func readChoices(d *jsondec.Decoder, c *chunk) bool {
	if d.Null() {
		c.Choices = nil
		return true
	}
	return d.Array(func() bool {
		c.Choices = append(c.Choices, choice{})
		return readChoice(d, &c.Choices[len(c.Choices)-1])
	})
}

func readChoice(d *jsondec.Decoder, ch *choice) bool {
	return d.Members(choiceKeys, func(k int) bool {
		switch k {
		case 0:
			return integer(d, &ch.Index)
		case 1:
			return readDelta(d, &ch.Delta)
		case 2:
			if d.Null() {
				ch.Message = nil
				return true
			}
			ch.Message = new(delta)
			return readDelta(d, ch.Message)
		case 3:
			return str(d, &ch.Text)
		default:
			return str(d, &ch.FinishReason)
		}
	})
}

func readDelta(d *jsondec.Decoder, dl *delta) bool {
	if d.Null() {
		return true
	}
	return d.Members(deltaKeys, func(k int) bool {
		switch k {
		case 0:
			return str(d, &dl.Content)
		case 1:
			return str(d, &dl.ReasoningContent)
		case 2:
			return str(d, &dl.Reasoning)
		default:
			return d.Raw(&dl.ToolCalls) // copied: emitted, not the read buffer
		}
	})
}

func readUsage(d *jsondec.Decoder, c *chunk) bool {
	if d.Null() {
		c.Usage = nil
		return true
	}
	c.usageVal = usage{}
	c.Usage = &c.usageVal
	return d.Members(usageKeys, func(k int) bool {
		if k == 0 {
			return integer(d, &c.usageVal.PromptTokens)
		}
		return integer(d, &c.usageVal.CompletionTokens)
	})
}
