// Package jsondec decodes the few JSON shapes that every request carries (the agent
// protocol's frames, the nodes' receipts) in one pass and without reflection, where
// encoding/json's two passes (a scan to validate, then a reflective decode) cost a request's
// path several percent of its CPU.
//
// A Decoder never decides alone: each method reports false for anything it does not read
// exactly as encoding/json would (a member it is not told of, a member twice or in another
// case, a null, a number with a fraction where an integer goes, an escaped half of a
// surrogate pair, invalid UTF-8, nesting deeper than maxDepth), and its caller then decodes
// the same bytes with encoding/json, which decides and words the errors. The callers' fuzz
// targets hold the two to the same results.
package jsondec

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Decoder reads JSON from a byte slice.
type Decoder struct {
	b    []byte
	i    int
	seen uint32 // the members met in the object being read, by Once's bit
}

// New returns a Decoder of b.
func New(b []byte) Decoder { return Decoder{b: b} }

// Once reports whether member bit was not met before in the object being read, and marks it.
func (d *Decoder) Once(bit uint) bool {
	if d.seen&(1<<bit) != 0 {
		return false
	}
	d.seen |= 1 << bit
	return true
}

func (d *Decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// End reports whether nothing but white space is left.
func (d *Decoder) End() bool {
	d.space()
	return d.i == len(d.b)
}

// consume reports whether the next byte, past white space, is c, and reads it.
func (d *Decoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// Object reads an object, calling member with each key and the decoder at its value; member
// reads the value, or reports false. Once counts the members of this object.
func (d *Decoder) Object(member func(key []byte) bool) bool {
	outer := d.seen
	defer func() { d.seen = outer }()
	d.seen = 0
	return d.list('{', '}', func() bool {
		key, ok := d.plainKey()
		if !ok || !d.consume(':') {
			return false
		}
		d.space()
		return member(key)
	})
}

// list reads open, the items item reads (at each, past white space), separated by commas,
// and close.
func (d *Decoder) list(open, close byte, item func() bool) bool {
	if !d.consume(open) {
		return false
	}
	if d.consume(close) {
		return true
	}
	for {
		d.space()
		if !item() {
			return false
		}
		if d.consume(close) {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// plainKey reads a key without escapes.
func (d *Decoder) plainKey() ([]byte, bool) {
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

// String reads a string into s, unescaped as encoding/json does.
func (d *Decoder) String(s *string) bool {
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
func (d *Decoder) escaped(s *string) bool {
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

// Int reads an integer without fraction or exponent into n.
func (d *Decoder) Int(n *int) bool {
	var v int64
	if !d.signed(&v, strconv.IntSize) {
		return false
	}
	*n = int(v)
	return true
}

// Int64 reads an integer without fraction or exponent into n.
func (d *Decoder) Int64(n *int64) bool { return d.signed(n, 64) }

// signed reads an integer of bits bits into n.
func (d *Decoder) signed(n *int64, bits int) bool {
	j, ok := d.integer(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(d.b[d.i:j]), 10, bits)
	if err != nil {
		return false
	}
	*n, d.i = v, j
	return true
}

// Uint64 reads an integer of no sign, fraction or exponent into n.
func (d *Decoder) Uint64(n *uint64) bool {
	j, ok := d.integer(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:j]), 10, 64)
	if err != nil {
		return false
	}
	*n, d.i = v, j
	return true
}

// integer returns where the integer at d.i ends: JSON's -?(0|[1-9][0-9]*), the sign only when
// signed, with no fraction or exponent after it.
func (d *Decoder) integer(signed bool) (int, bool) {
	j := d.i
	if signed && j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	if j == digits || (d.b[digits] == '0' && j > digits+1) || j < len(d.b) && (d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return 0, false
	}
	return j, true
}

// StringToken reads a string and sets t to its token, quotes and escapes included, for a
// json.Unmarshaler such as time.Time's; t is valid as long as the decoder's bytes.
func (d *Decoder) StringToken(t *[]byte) bool {
	start := d.i
	if !d.skipString() {
		return false
	}
	*t = d.b[start:d.i]
	return true
}

// Array reads an array, calling elem with the decoder at each element; elem reads it, or
// reports false.
func (d *Decoder) Array(elem func() bool) bool { return d.list('[', ']', elem) }

// Bool reads true or false into v.
func (d *Decoder) Bool(v *bool) bool {
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

// Raw reads a JSON object or array into v, as encoding/json fills a json.RawMessage: the
// value's bytes, copied.
func (d *Decoder) Raw(v *json.RawMessage) bool {
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
func (d *Decoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	d.space()
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.list('{', '}', func() bool { return d.skipString() && d.consume(':') && d.skip(depth+1) })
	case c == '[':
		return d.list('[', ']', func() bool { return d.skip(depth + 1) })
	case c == '"':
		return d.skipString()
	case c == 't' || c == 'f':
		var b bool
		return d.Bool(&b)
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
func (d *Decoder) skipString() bool {
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
func (d *Decoder) number() bool {
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
