package openaicompat

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// decode reads one event into c. A small decoder that reads only c's fields and skips the rest
// without allocating does the common case; whatever it does not handle exactly as
// encoding/json would (a type it does not expect, a duplicate or case-folded key, an escaped
// key, invalid JSON) is left to encoding/json, so the result and the errors are always
// encoding/json's. FuzzDecode holds the two to the same answers.
func (c *chunk) decode(data []byte) error {
	c.reset()
	d := decoder{b: data}
	if d.chunk(c) {
		return nil
	}
	c.reset()
	return json.Unmarshal(data, c)
}

// decoder is a JSON reader over b. Its methods return false when they meet something they
// leave to encoding/json.
type decoder struct {
	b     []byte
	i     int
	depth int
}

// Key names of each object, for the case-folding check.
var (
	chunkKeys  = []string{"choices", "usage", "error", "object"}
	choiceKeys = []string{"index", "delta", "message", "text", "finish_reason"}
	deltaKeys  = []string{"content", "reasoning_content", "reasoning", "tool_calls"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens"}
)

func (d *decoder) chunk(c *chunk) bool {
	var seen uint8
	ok := d.object(func(key []byte, k int) bool {
		switch k {
		case 0:
			return d.choices(c)
		case 1:
			return d.usage(c)
		case 2:
			var raw []byte
			if raw = d.skip(); raw == nil {
				return false
			}
			c.Error = raw
			return true
		default:
			return d.str(&c.Object)
		}
	}, chunkKeys, &seen)
	if !ok {
		return false
	}
	d.ws()
	return d.i == len(d.b)
}

func (d *decoder) choices(c *chunk) bool {
	if d.null() {
		c.Choices = nil
		return true
	}
	if !d.consume('[') {
		return false
	}
	if d.consume(']') {
		return true
	}
	for {
		c.Choices = append(c.Choices, choice{})
		ch := &c.Choices[len(c.Choices)-1]
		if !d.choice(ch) {
			return false
		}
		if d.consume(']') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

func (d *decoder) choice(ch *choice) bool {
	var seen uint8
	return d.object(func(key []byte, k int) bool {
		switch k {
		case 0:
			return d.int(&ch.Index)
		case 1:
			return d.delta(&ch.Delta)
		case 2:
			if d.null() {
				ch.Message = nil
				return true
			}
			ch.Message = new(delta)
			return d.delta(ch.Message)
		case 3:
			return d.str(&ch.Text)
		default:
			return d.str(&ch.FinishReason)
		}
	}, choiceKeys, &seen)
}

func (d *decoder) delta(dl *delta) bool {
	if d.null() {
		return true
	}
	var seen uint8
	return d.object(func(key []byte, k int) bool {
		switch k {
		case 0:
			return d.str(&dl.Content)
		case 1:
			return d.str(&dl.ReasoningContent)
		case 2:
			return d.str(&dl.Reasoning)
		default:
			raw := d.skip()
			if raw == nil {
				return false
			}
			dl.ToolCalls = append(json.RawMessage(nil), raw...) // emitted: not the read buffer
			return true
		}
	}, deltaKeys, &seen)
}

func (d *decoder) usage(c *chunk) bool {
	if d.null() {
		c.Usage = nil
		return true
	}
	c.usageVal = usage{}
	c.Usage = &c.usageVal
	var seen uint8
	return d.object(func(key []byte, k int) bool {
		if k == 0 {
			return d.int(&c.usageVal.PromptTokens)
		}
		return d.int(&c.usageVal.CompletionTokens)
	}, usageKeys, &seen)
}

// object reads an object, calling field for each key of keys (k is its index) and skipping
// the others. It gives up on a key it cannot compare exactly: escaped, seen twice, or equal to
// one of keys under encoding/json's case folding.
func (d *decoder) object(field func(key []byte, k int) bool, keys []string, seen *uint8) bool {
	if d.depth++; d.depth > 100 || !d.consume('{') {
		return false
	}
	if d.consume('}') {
		d.depth--
		return true
	}
	for {
		d.ws()
		key := d.rawString()
		if key == nil || bytes.IndexByte(key, '\\') >= 0 || !d.consume(':') {
			return false
		}
		key = key[1 : len(key)-1]
		k := -1
		for j, name := range keys {
			if string(key) == name {
				k = j
				break
			}
			// Case folding keeps ASCII lengths; a longer key may hold K (Kelvin) or ſ.
			if (len(key) == len(name) || len(key) > len(name) && !isASCII(key)) && bytes.EqualFold(key, []byte(name)) {
				return false
			}
		}
		if k >= 0 {
			if *seen&(1<<k) != 0 {
				return false
			}
			*seen |= 1 << k
			d.ws()
			if !field(key, k) {
				return false
			}
		} else if d.skip() == nil {
			return false
		}
		if d.consume('}') {
			d.depth--
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// consume skips white space and c, if c comes next.
func (d *decoder) consume(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *decoder) null() bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// str reads a string, or null, which leaves *s as it is.
func (d *decoder) str(s *string) bool {
	if d.null() {
		return true
	}
	raw := d.rawString()
	if raw == nil {
		return false
	}
	*s = unquote(raw[1 : len(raw)-1])
	return true
}

// common are strings that come in many events, kept to spare an allocation each time.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"chat.completion.chunk", "text_completion", "chat.completion", "error",
		"stop", "length", "tool_calls", "content_filter", "function_call"} {
		m[s] = s
	}
	return m
}()

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// int reads an integer, or null, which leaves *n as it is.
func (d *decoder) int(n *int) bool {
	if d.null() {
		return true
	}
	start := d.i
	raw := d.number()
	if raw == nil || len(raw) > 18 {
		return false
	}
	v, neg := 0, false
	for _, c := range raw {
		switch {
		case c == '-':
			neg = true
		case c >= '0' && c <= '9':
			v = v*10 + int(c-'0')
		default:
			d.i = start
			return false // a fraction or an exponent: encoding/json refuses it for an int
		}
	}
	if neg {
		v = -v
	}
	*n = v
	return true
}

// skip reads any value and returns it, or nil.
func (d *decoder) skip() []byte {
	d.ws()
	start := d.i
	if d.i >= len(d.b) {
		return nil
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.rawString()
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if d.depth++; d.depth > 100 {
			return nil
		}
		d.i++
		if !d.consume(end) {
			for {
				if c == '{' {
					d.ws()
					if d.rawString() == nil || !d.consume(':') {
						return nil
					}
				}
				if d.skip() == nil {
					return nil
				}
				if d.consume(end) {
					break
				}
				if !d.consume(',') {
					return nil
				}
			}
		}
		d.depth--
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
				d.i += len(lit)
				return d.b[start:d.i]
			}
		}
		return nil
	default:
		return d.number()
	}
	return d.b[start:d.i]
}

// number reads a number as JSON's grammar has it.
func (d *decoder) number() []byte {
	b, start := d.b, d.i
	i := d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return b[start:i]
}

// rawString reads a string, quotes included, checking its escapes; nil if there is none.
func (d *decoder) rawString() []byte {
	b, start := d.b, d.i
	if start >= len(b) || b[start] != '"' {
		return nil
	}
	for i := start + 1; i < len(b); i++ {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			d.i = i + 1
			return b[start:d.i]
		case c < 0x20:
			return nil
		case c == '\\':
			i++
			if i >= len(b) {
				return nil
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || getu4(b[i-1:]) < 0 {
					return nil
				}
				i += 4
			default:
				return nil
			}
		}
	}
	return nil
}

// plain holds the bytes a string holds as they are: not ", \ or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote decodes the inside of a checked string as encoding/json does: invalid UTF-8 and
// lone surrogates become U+FFFD.
func unquote(s []byte) string {
	simple := true
	for _, c := range s {
		if c == '\\' || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		if c, ok := common[string(s)]; ok {
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
