package protocol

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeFrame decodes one frame of a job (delta, end, credit, cancel, receipt) as encoding/json
// would, in one pass and without reflection; it reports false, having decided nothing, for
// anything else or anything unusual (another member, a member twice or in another case, an
// escape of half a surrogate pair, invalid UTF-8, a null, a number with a fraction), which
// encoding/json then decodes. FuzzDecodeFrame holds the two to the same frames.
func decodeFrame(line []byte, fr *Frame) bool {
	d := decoder{b: line}
	var f Frame
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "t":
			return d.once(0) && d.string(&f.Type)
		case "job":
			return d.once(1) && d.string(&f.Job)
		case "credit":
			return d.once(2) && d.int(&f.Credit)
		case "receipt":
			return d.once(3) && d.raw(&f.Receipt)
		case "delta":
			f.Delta = new(Delta)
			return d.once(4) && d.delta(f.Delta)
		case "end":
			f.End = new(End)
			return d.once(5) && d.end(f.End)
		}
		return false
	})
	if !ok || !d.atEnd() {
		return false
	}
	*fr = f
	return true
}

// decoder reads JSON from b at i.
type decoder struct {
	b    []byte
	i    int
	seen uint32 // members met, by once's bit
}

func (d *decoder) delta(v *Delta) bool {
	outer := d.seen
	d.seen = 0
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "n":
			return d.once(0) && d.int(&v.Pieces)
		case "text":
			return d.once(1) && d.string(&v.Text)
		case "reasoning":
			return d.once(2) && d.string(&v.Reasoning)
		case "tool_calls":
			return d.once(3) && d.raw(&v.ToolCalls)
		}
		return false
	})
	d.seen = outer
	return ok
}

func (d *decoder) end(v *End) bool {
	outer := d.seen
	d.seen = 0
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "finish_reason":
			return d.once(0) && d.string(&v.FinishReason)
		case "usage":
			return d.once(1) && d.usage(&v.Usage)
		case "estimated":
			return d.once(2) && d.bool(&v.Estimated)
		case "receipt":
			return d.once(3) && d.raw(&v.Receipt)
		case "receipt_follows":
			return d.once(4) && d.bool(&v.ReceiptFollows)
		}
		return false
	})
	d.seen = outer
	return ok
}

func (d *decoder) usage(v *Usage) bool {
	outer := d.seen
	d.seen = 0
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return d.once(0) && d.int(&v.PromptTokens)
		case "completion_tokens":
			return d.once(1) && d.int(&v.CompletionTokens)
		}
		return false
	})
	d.seen = outer
	return ok
}

// once reports whether member bit was not met before in this object, and marks it.
func (d *decoder) once(bit uint) bool {
	if d.seen&(1<<bit) != 0 {
		return false
	}
	d.seen |= 1 << bit
	return true
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) atEnd() bool {
	d.space()
	return d.i == len(d.b)
}

// consume reports whether the next byte, past white space, is c, and reads it.
func (d *decoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object, calling member for each key with the decoder at its value.
func (d *decoder) object(member func(key []byte) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		d.space()
		key, ok := d.plainKey()
		if !ok || !d.consume(':') {
			return false
		}
		d.space()
		if !member(key) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// plainKey reads a key without escapes.
func (d *decoder) plainKey() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			key := d.b[d.i+1 : j]
			d.i = j + 1
			return key, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// string reads a string into s, unescaped as encoding/json does.
func (d *decoder) string(s *string) bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	j := d.i + 1
	for j < len(d.b) {
		c := d.b[j]
		if c == '"' {
			seg := d.b[d.i+1 : j]
			if !utf8.Valid(seg) {
				return false
			}
			*s = string(seg)
			d.i = j + 1
			return true
		}
		if c == '\\' {
			return d.escaped(s)
		}
		if c < 0x20 {
			return false
		}
		j++
	}
	return false
}

// escaped reads a string that holds escapes.
func (d *decoder) escaped(s *string) bool {
	out := make([]byte, 0, 64)
	j := d.i + 1
	start := j
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			out = append(out, d.b[start:j]...)
			if !utf8.Valid(out) {
				return false
			}
			*s = string(out)
			d.i = j + 1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			j++
			continue
		}
		out = append(out, d.b[start:j]...)
		if j+1 >= len(d.b) {
			return false
		}
		switch e := d.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if j+6 > len(d.b) {
				return false
			}
			r, err := strconv.ParseUint(string(d.b[j+2:j+6]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return false
			}
			out = utf8.AppendRune(out, rune(r))
			j += 4
		default:
			return false
		}
		j += 2
		start = j
	}
	return false
}

// int reads an integer without fraction or exponent into n.
func (d *decoder) int(n *int) bool {
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	if j == digits || (d.b[digits] == '0' && j > digits+1) || j < len(d.b) && (d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return false
	}
	v, err := strconv.ParseInt(string(d.b[d.i:j]), 10, strconv.IntSize)
	if err != nil {
		return false
	}
	*n, d.i = int(v), j
	return true
}

func (d *decoder) bool(v *bool) bool {
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		*v, d.i = true, d.i+4
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		*v, d.i = false, d.i+5
	default:
		return false
	}
	return true
}

// raw reads any JSON object or array into v, as encoding/json fills a json.RawMessage: the
// value's bytes, copied.
func (d *decoder) raw(v *json.RawMessage) bool {
	start := d.i
	if d.i >= len(d.b) || (d.b[d.i] != '{' && d.b[d.i] != '[') || !d.skip(0) {
		return false
	}
	*v = append(json.RawMessage(nil), d.b[start:d.i]...)
	return true
}

// maxDepth bounds the nesting skip follows; deeper values go to encoding/json.
const maxDepth = 64

// skip reads one JSON value, checking its grammar.
func (d *decoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	d.space()
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		if d.consume('}') {
			return true
		}
		for {
			d.space()
			if !d.skipString() || !d.consume(':') || !d.skip(depth+1) {
				return false
			}
			if d.consume('}') {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case c == '[':
		d.i++
		if d.consume(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			if d.consume(']') {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case c == '"':
		return d.skipString()
	case c == 't' || c == 'f':
		var b bool
		return d.bool(&b)
	case c == 'n':
		if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
			d.i += 4
			return true
		}
		return false
	default:
		return d.number()
	}
}

// skipString reads a string, checking its escapes and that it is UTF-8.
func (d *decoder) skipString() bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			if !utf8.Valid(d.b[d.i+1 : j]) {
				return false
			}
			d.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j+1 >= len(d.b) {
				return false
			}
			switch d.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+6 > len(d.b) {
					return false
				}
				if _, err := strconv.ParseUint(string(d.b[j+2:j+6]), 16, 16); err != nil {
					return false
				}
				j += 5
			default:
				return false
			}
		}
	}
	return false
}

// number reads a JSON number.
func (d *decoder) number() bool {
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	switch {
	case j < len(d.b) && d.b[j] == '0':
		j++
	case j < len(d.b) && d.b[j] >= '1' && d.b[j] <= '9':
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
	default:
		return false
	}
	if j < len(d.b) && d.b[j] == '.' {
		j++
		k := j
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
		if j == k {
			return false
		}
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		j++
		if j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-') {
			j++
		}
		k := j
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
		if j == k {
			return false
		}
	}
	d.i = j
	return true
}
