package sim

import (
	"encoding/json"
	"fmt"
)

// message is an OpenAI chat message, reduced to what the answer depends on.
type message struct {
	role   string
	text   string   // of the content: a string, or its text parts joined with newlines
	images []string // URLs of image parts
	others []string // types of other parts (audio, files)
	calls  []toolCall
}

type toolCall struct{ name, arguments string }

// wireMessage is a chat message as the buyer sent it.
type wireMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function *struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// wirePart is one part of a message's content.
type wirePart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"` // {"url": ...}, or a string
}

// readMessages reads a JSON array of chat messages, calling visit for each. Each message's
// content is a string, null or an array of content parts; unknown fields are ignored.
func readMessages(b []byte, visit func(*message)) error {
	var ms []wireMessage
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	for _, w := range ms {
		m := message{role: w.Role}
		if err := m.content(w.Content); err != nil {
			return err
		}
		for _, c := range w.ToolCalls {
			var tc toolCall
			if c.Function != nil {
				tc = toolCall{c.Function.Name, c.Function.Arguments}
			}
			m.calls = append(m.calls, tc)
		}
		visit(&m)
	}
	return nil
}

// content reads a message's content. Text parts are joined with newlines, so a string and one
// text part of the same text are the same content.
func (m *message) content(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		return json.Unmarshal(raw, &m.text)
	}
	var parts []wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return fmt.Errorf("content must be a string, an array of parts or null: %w", err)
	}
	texts := 0
	for _, p := range parts {
		switch p.Type {
		case "text":
			if texts > 0 {
				m.text += "\n"
			}
			m.text += p.Text
			texts++
		case "image_url":
			var url string
			if len(p.ImageURL) > 0 && p.ImageURL[0] == '"' {
				json.Unmarshal(p.ImageURL, &url)
			} else {
				var u struct {
					URL string `json:"url"`
				}
				json.Unmarshal(p.ImageURL, &u)
				url = u.URL
			}
			m.images = append(m.images, url)
		default:
			m.others = append(m.others, p.Type)
		}
	}
	return nil
}
