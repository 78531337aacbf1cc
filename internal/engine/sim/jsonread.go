package sim

import (
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// reader reads JSON from b, for the few shapes the engine reads on every request (chat
// messages), several times faster than encoding/json. It decodes strings as encoding/json
// does and accepts only valid JSON.
type reader struct {
	b     []byte
	i     int
	depth int
	buf   []byte // scratch for strings with escapes
}

// maxDepth bounds the nesting of skipped values, as encoding/json does.
const maxDepth = 10000

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.msg) }

func (r *reader) fail(msg string) error { return &syntaxError{off: r.i, msg: msg} }

// peek skips white space and returns the next byte, or 0 at the end.
func (r *reader) peek() byte {
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// consume reads c if it is next.
func (r *reader) consume(c byte) bool {
	if r.peek() == c {
		r.i++
		return true
	}
	return false
}

func (r *reader) expect(c byte) error {
	if !r.consume(c) {
		return r.fail(fmt.Sprintf("want %q", c))
	}
	return nil
}

// end checks that nothing but white space follows.
func (r *reader) end() error {
	if r.peek() != 0 || r.i != len(r.b) {
		return r.fail("data after the value")
	}
	return nil
}

// more reads the comma or the closing byte after an element of an object or array, and says
// whether another element follows.
func (r *reader) more(closing byte) (bool, error) {
	switch {
	case r.consume(','):
		return true, nil
	case r.consume(closing):
		return false, nil
	}
	return false, r.fail(fmt.Sprintf("want ',' or %q", closing))
}

// object reads an object, calling field for the value of each key.
func (r *reader) object(field func(key []byte) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.consume('}') {
		return nil
	}
	for {
		key, err := r.strBytes()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		if more, err := r.more('}'); !more {
			return err
		}
	}
}

// array reads an array, calling elem for each element.
func (r *reader) array(elem func() error) error {
	if err := r.expect('['); err != nil {
		return err
	}
	if r.consume(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if more, err := r.more(']'); !more {
			return err
		}
	}
}

// null reads null if it is next.
func (r *reader) null() (bool, error) {
	if r.peek() != 'n' {
		return false, nil
	}
	return true, r.literal("null")
}

func (r *reader) literal(lit string) error {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		return r.fail("invalid literal")
	}
	r.i += len(lit)
	return nil
}

// str reads a string, or null as "".
func (r *reader) str() (string, error) {
	if null, err := r.null(); null || err != nil {
		return "", err
	}
	s, err := r.strBytes()
	return string(s), err
}

// strBytes reads a string. The bytes it returns are valid until the next call.
func (r *reader) strBytes() ([]byte, error) {
	if r.peek() != '"' {
		return nil, r.fail("want a string")
	}
	r.i++
	start := r.i
	ascii := true
	for i := start; i < len(r.b); i++ {
		switch c := r.b[i]; {
		case c == '"':
			if s := r.b[start:i]; ascii || utf8.Valid(s) {
				r.i = i + 1
				return s, nil
			}
			return r.unquote(start)
		case c == '\\':
			return r.unquote(start)
		case c < ' ':
			r.i = i
			return nil, r.fail("control character in string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.i = len(r.b)
	return nil, r.fail("unterminated string")
}

// unquote decodes the string that starts at b[i] as encoding/json does: invalid UTF-8 and
// unpaired surrogates become U+FFFD.
func (r *reader) unquote(i int) ([]byte, error) {
	b, out := r.b, r.buf[:0]
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			r.i, r.buf = i+1, out
			return out, nil
		case c == '\\':
			if i+1 >= len(b) {
				r.i = i
				return nil, r.fail("unterminated string")
			}
			switch e := b[i+1]; e {
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
				u := hex4(b[i:])
				if u < 0 {
					r.i = i
					return nil, r.fail("invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(u) {
					if dec := utf16.DecodeRune(u, hex4(b[i:])); dec != unicode.ReplacementChar {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
					u = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, u)
				continue
			default:
				r.i = i
				return nil, r.fail("invalid escape")
			}
			i += 2
		case c < ' ':
			r.i = i
			return nil, r.fail("control character in string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			u, n := utf8.DecodeRune(b[i:])
			out = utf8.AppendRune(out, u) // U+FFFD for a byte that is not UTF-8
			i += n
		}
	}
	r.i = len(b)
	return nil, r.fail("unterminated string")
}

// hex4 decodes the escape \uXXXX at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var u rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		u = u<<4 | rune(c)
	}
	return u
}

// skip reads any value.
func (r *reader) skip() error {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxDepth {
		return r.fail("nested too deeply")
	}
	switch c := r.peek(); {
	case c == '"':
		_, err := r.strBytes()
		return err
	case c == '{':
		return r.object(func([]byte) error { return r.skip() })
	case c == '[':
		return r.array(r.skip)
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	}
	return r.fail("want a value")
}

// number reads a number.
func (r *reader) number() error {
	b, i := r.b, r.i
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return r.fail("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return r.fail("invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return r.fail("invalid number")
		}
	}
	r.i = i
	return nil
}
