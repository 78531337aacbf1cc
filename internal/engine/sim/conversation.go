package sim

import (
	"encoding/binary"
	"unicode"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/protocol"
)

// imageTokens is what one image in a prompt counts, as OpenAI counts a low-detail image.
const imageTokens = 85

// conversation is a request's input in canonical form: what the answer is a function of.
type conversation struct {
	// key is the canonical encoding of the salt, model, kind, seed and messages (or prompt);
	// key[:cut] leaves out a trailing assistant message whose text the answer continues.
	key []byte
	cut int
	// continued says that the last message is an assistant's text, prefix, to continue.
	continued bool
	prefix    string
	// promptTokens estimates the tokens of the prompt, prefix included.
	promptTokens int
	// instruction is the text of the last message when it is the user's: what the simulated
	// model follows when it asks for something simple (see instructed).
	instruction string
}

// Tags of the canonical encoding.
const (
	tagMessage  = 'm'
	tagImage    = 'i'
	tagPart     = 'p'
	tagToolCall = 't'
	tagPrompt   = 'c'
	tagContinue = '+'
)

// parseConversation reads req's input. The salt, model and seed are part of the key, so that
// each of them changes the answer.
func (e *Engine) parseConversation(req *protocol.Request) (conversation, error) {
	var c conversation
	key := make([]byte, 0, 256)
	key = append(key, "sim1"...)
	key = appendField(key, e.salt)
	key = appendField(key, req.Model)
	var seed int64 // nil counts as 0
	if req.Seed != nil {
		seed = *req.Seed
	}
	key = binary.LittleEndian.AppendUint64(key, uint64(seed))

	switch req.Kind {
	case protocol.KindCompletion:
		key = appendField(key, protocol.KindCompletion)
		key = append(key, tagPrompt)
		key = appendField(key, req.Prompt)
		c.key, c.cut = key, len(key)
		c.promptTokens = max(1, countWords(req.Prompt)+countWords(req.Partial))
		// A continued completion: the prompt stays, the partial answer is continued.
		c.continued, c.prefix = req.Partial != "", req.Partial
		return c, nil
	case protocol.KindChat, "":
		key = appendField(key, protocol.KindChat)
	default:
		return c, badRequest("unknown request kind %q", req.Kind)
	}

	if len(req.Messages) == 0 {
		return c, badRequest("no messages")
	}
	last := 0 // where the last message starts in key
	err := readMessages(req.Messages, func(m *message) {
		last = len(key)
		c.continued = m.role == "assistant" && len(m.calls) == 0 && len(m.images) == 0 && len(m.others) == 0
		c.prefix = m.text
		c.instruction = ""
		if m.role == "user" && len(m.images) == 0 && len(m.others) == 0 {
			c.instruction = m.text
		}
		key = append(key, tagMessage)
		key = appendField(key, m.role)
		key = appendField(key, m.text)
		c.promptTokens += 4 + countWords(m.text)
		for _, u := range m.images {
			key = append(key, tagImage)
			key = appendField(key, u)
			c.promptTokens += imageTokens
		}
		for _, t := range m.others {
			key = append(key, tagPart)
			key = appendField(key, t)
		}
		for _, t := range m.calls {
			key = append(key, tagToolCall)
			key = appendField(key, t.name)
			key = appendField(key, t.arguments)
			c.promptTokens += 4 + countWords(t.name) + countWords(t.arguments)
		}
	})
	if err != nil {
		return c, badRequest("invalid messages: %v", err)
	}
	c.cut = len(key)
	if c.continued {
		c.cut = last
	} else {
		c.prefix = ""
	}
	c.key = key
	c.promptTokens = max(1, c.promptTokens)
	return c, nil
}

// answerRNG seeds the natural answer: it leaves out the prefix to continue.
func (c *conversation) answerRNG() rng { return newRNG(c.key[:c.cut]) }

// continuationRNG seeds a continuation of a prefix that is not the natural answer's.
func (c *conversation) continuationRNG() rng {
	return newRNG(append(c.key[:len(c.key):len(c.key)], tagContinue))
}

// appendField appends s with its length, so that no two sequences of fields encode the same.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// countWords counts the words of s, separated by white space.
func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return n + countWordsSlow(s[i:], in)
		}
		if c == ' ' || c-'\t' <= '\r'-'\t' {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// countWordsSlow counts words like countWords in text that is not ASCII; in says that the text
// before s ended inside a word.
func countWordsSlow(s string, in bool) int {
	n := 0
	for _, r := range s {
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}
