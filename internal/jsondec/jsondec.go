// Package jsondec decodes the few JSON shapes that every request carries (the agent
// protocol's frames, the nodes' receipts, the engines' streamed chunks) in one pass and
// without reflection, where encoding/json's two passes (a scan to validate, then a reflective
// decode) cost a request's path several percent of its CPU.
//
// A Decoder never decides alone: each method reports false for anything it does not read
// exactly as encoding/json would (a member twice or in another case, an escaped key, a number
// with a fraction where an integer goes, nesting deeper than maxDepth), and its caller then
// decodes the same bytes with encoding/json, which decides and words the errors. Strings are
// read as encoding/json reads them, invalid UTF-8 and lone surrogates becoming U+FFFD. The
// callers' fuzz targets hold the two to the same results.
package jsondec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode"
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

// Offset returns how many bytes the decoder has read.
func (d *Decoder) Offset() int { return d.i }

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

// Members reads an object as encoding/json reads one into a struct whose members are names:
// it calls member with the index in names of each member named, skips the others, and
// reports false for a member twice or one that matches a name only under encoding/json's
// case folding (Lookup).
func (d *Decoder) Members(names []string, member func(k int) bool) bool {
	return d.Object(func(key []byte) bool {
		k, ok := Lookup(key, names)
		switch {
		case !ok:
			return false
		case k < 0:
			return d.Skip()
		}
		return d.Once(uint(k)) && member(k)
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
func (d *Decoder) String(s *string) bool { return d.Interned(s, nil) }

// Interned reads a string into s as String does, and when it holds no escapes and is a key of
// known, sets s to known's value for it instead of allocating a copy: for strings that come
// in message after message.
func (d *Decoder) Interned(s *string, known map[string]string) bool {
	start := d.i
	if !d.skipString() {
		return false
	}
	*s = unquote(d.b[start+1:d.i-1], known)
	return true
}

// Null reads null, if it comes next.
func (d *Decoder) Null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
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

// Float64 reads a number into f, as encoding/json reads it into a float64.
func (d *Decoder) Float64(f *float64) bool {
	start := d.i
	if !d.number() {
		return false
	}
	v, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if err != nil {
		d.i = start
		return false
	}
	*f = v
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
	j = d.digits(j)
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

// Raw reads any value into v, as encoding/json fills a json.RawMessage: the value's bytes,
// copied.
func (d *Decoder) Raw(v *json.RawMessage) bool {
	d.space()
	start := d.i
	if !d.skip(0) {
		return false
	}
	*v = append(json.RawMessage(nil), d.b[start:d.i]...)
	return true
}

// Skip reads any value, checking its grammar, for a member its caller does not keep.
func (d *Decoder) Skip() bool { return d.skip(0) }

// Lookup returns the index of key in names, or -1, as encoding/json matches a member to a
// field. It reports false for a key that is none of names but equals one of them under
// encoding/json's case folding (bytes.EqualFold's: "Index", or "toKens" with a Kelvin sign, is
// "tokens"): the caller leaves such an object to encoding/json.
func Lookup(key []byte, names []string) (int, bool) {
	for k, name := range names {
		if string(key) == name {
			return k, true
		}
	}
	for _, name := range names {
		// Folding keeps an ASCII name's length; a longer key may hold K (Kelvin) or ſ.
		if (len(key) == len(name) || len(key) > len(name) && !isASCII(key)) && bytes.EqualFold(key, []byte(name)) {
			return -1, false
		}
	}
	return -1, true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
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
		return d.Null()
	default:
		return d.number()
	}
}

// skipString reads a string, checking its escapes. Like encoding/json it takes any byte but
// a control character, valid UTF-8 or not.
func (d *Decoder) skipString() bool {
	b := d.b
	if d.i >= len(b) || b[d.i] != '"' {
		return false
	}
	for j := d.i + 1; j < len(b); j++ {
		j += plainRun(b[j:])
		if j == len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			d.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(b) {
				return false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if getu4(b[j-1:]) < 0 {
					return false
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

// plainRun returns how many bytes at the start of b a string holds as they are (plain): eight
// at a time while no byte of a word is a quote, a backslash or a control character, then one
// at a time.
func plainRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		quote, backslash := w^(ones*'"'), w^(ones*'\\')
		// Each term has a high bit set where a byte may be below 0x20, or zero; a byte
		// borrowed from may show too, which only ends the run early.
		if ((w-ones*0x20)&^w|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			break
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// plain holds the bytes a string holds as they are: not ", \ or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote decodes the inside of a checked string as encoding/json does: invalid UTF-8 and
// lone surrogates become U+FFFD. A string without escapes that is a key of known is known's.
func unquote(s []byte, known map[string]string) string {
	simple := true
	for _, c := range s {
		if c == '\\' || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		if c, ok := known[string(s)]; ok {
			return c
		}
		return string(s)
	}
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s)
	}
	b := make([]byte, 0, len(s)+8)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // " \ /
				b = append(b, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return string(b)
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
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
		j = d.digits(j)
	default:
		return false
	}
	if j < len(d.b) && d.b[j] == '.' {
		if k := d.digits(j + 1); k > j+1 {
			j = k
		} else {
			return false
		}
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		j++
		if j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-') {
			j++
		}
		if k := d.digits(j); k > j {
			j = k
		} else {
			return false
		}
	}
	d.i = j
	return true
}

// digits returns where the run of decimal digits from j ends.
func (d *Decoder) digits(j int) int {
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	return j
}
