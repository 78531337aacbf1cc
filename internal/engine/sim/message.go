package sim

// message is an OpenAI chat message, reduced to what the answer depends on.
type message struct {
	role   string
	text   string   // of the content: a string, or its text parts joined with newlines
	images []string // URLs of image parts
	others []string // types of other parts (audio, files)
	calls  []toolCall
}

type toolCall struct{ name, arguments string }

// readMessages reads a JSON array of chat messages, calling visit for each. Each message's
// content is a string, null or an array of content parts. Unknown fields are skipped; keys
// match exactly; of keys given twice, the last counts.
func readMessages(b []byte, visit func(*message)) error {
	r := &reader{b: b}
	var m message
	err := r.array(func() error {
		m = message{images: m.images[:0], others: m.others[:0], calls: m.calls[:0]}
		if err := r.object(func(key []byte) error { return m.field(r, key) }); err != nil {
			return err
		}
		visit(&m)
		return nil
	})
	if err != nil {
		return err
	}
	return r.end()
}

func (m *message) field(r *reader, key []byte) error {
	switch string(key) {
	case "role":
		var err error
		m.role, err = r.str()
		return err
	case "content":
		return m.content(r)
	case "tool_calls":
		m.calls = m.calls[:0]
		if null, err := r.null(); null || err != nil {
			return err
		}
		return r.array(func() error {
			var c toolCall
			err := r.object(func(key []byte) error {
				if string(key) != "function" {
					return r.skip()
				}
				if null, err := r.null(); null || err != nil {
					return err
				}
				return r.object(func(key []byte) error {
					var err error
					switch string(key) {
					case "name":
						c.name, err = r.str()
					case "arguments":
						c.arguments, err = r.str()
					default:
						err = r.skip()
					}
					return err
				})
			})
			m.calls = append(m.calls, c)
			return err
		})
	}
	return r.skip()
}

// content reads a message's content. Text parts are joined with newlines, so a string and one
// text part of the same text are the same content.
func (m *message) content(r *reader) error {
	m.text, m.images, m.others = "", m.images[:0], m.others[:0]
	switch r.peek() {
	case '"', 'n':
		var err error
		m.text, err = r.str()
		return err
	case '[':
	default:
		return r.fail("content must be a string, an array of parts or null")
	}
	texts := 0
	return r.array(func() error {
		var typ, text, url string
		err := r.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "type":
				typ, err = r.str()
			case "text":
				text, err = r.str()
			case "image_url":
				url, err = imageURL(r)
			default:
				err = r.skip()
			}
			return err
		})
		switch typ {
		case "text":
			if texts > 0 {
				m.text += "\n"
			}
			m.text += text
			texts++
		case "image_url":
			m.images = append(m.images, url)
		default:
			m.others = append(m.others, typ)
		}
		return err
	})
}

// imageURL reads the URL of an image part: {"url": ...}, or a string.
func imageURL(r *reader) (string, error) {
	if c := r.peek(); c == '"' || c == 'n' {
		return r.str()
	}
	var url string
	err := r.object(func(key []byte) error {
		if string(key) != "url" {
			return r.skip()
		}
		var err error
		url, err = r.str()
		return err
	})
	return url, err
}
