package protocol

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/jsondec"
)

// appendFrame appends fr's JSON as encoding/json encodes it, byte for byte but for the raw
// values it holds (a request's messages and tools, tool calls, receipts), which are compacted
// and otherwise left as they are, where encoding/json would also escape HTML's <, > and &
// inside their strings: the same values. The frames of every job (its request, delta, end,
// credit, cancel, receipt) are written here without reflection; the others, rare (a
// heartbeat, the handshake), through encoding/json.
func appendFrame(b []byte, fr *Frame) ([]byte, error) {
	if fr.Challenge != nil || fr.Register != nil || fr.Registered != nil || fr.Heartbeat != nil ||
		fr.Selftest != nil || (fr.End != nil && fr.End.Error != nil) || fr.Request != nil && !plainFloats(fr.Request) {
		js, err := json.Marshal(fr)
		return append(b, js...), err
	}
	b = AppendString(append(b, `{"t":`...), fr.Type, true)
	if fr.Job != "" {
		b = AppendString(append(b, `,"job":`...), fr.Job, true)
	}
	if r := fr.Request; r != nil {
		var err error
		if b, err = appendRequest(append(b, `,"request":`...), r); err != nil {
			return b, err
		}
	}
	if d := fr.Delta; d != nil {
		b = append(b, `,"delta":{`...)
		n := len(b)
		if d.Pieces != 0 {
			b = strconv.AppendInt(append(b, `"n":`...), int64(d.Pieces), 10)
		}
		if d.Text != "" {
			b = AppendString(append(comma(b, n), `"text":`...), d.Text, true)
		}
		if d.Reasoning != "" {
			b = AppendString(append(comma(b, n), `"reasoning":`...), d.Reasoning, true)
		}
		if len(d.ToolCalls) > 0 {
			var err error
			if b, err = appendRaw(append(comma(b, n), `"tool_calls":`...), d.ToolCalls); err != nil {
				return b, err
			}
		}
		b = append(b, '}')
	}
	if fr.Credit != 0 {
		b = strconv.AppendInt(append(b, `,"credit":`...), int64(fr.Credit), 10)
	}
	if e := fr.End; e != nil {
		b = append(b, `,"end":{`...)
		if e.FinishReason != "" {
			b = append(AppendString(append(b, `"finish_reason":`...), e.FinishReason, true), ',')
		}
		b = strconv.AppendInt(append(b, `"usage":{"prompt_tokens":`...), int64(e.Usage.PromptTokens), 10)
		b = strconv.AppendInt(append(b, `,"completion_tokens":`...), int64(e.Usage.CompletionTokens), 10)
		b = append(b, '}')
		if e.Estimated {
			b = append(b, `,"estimated":true`...)
		}
		if len(e.Receipt) > 0 {
			var err error
			if b, err = appendRaw(append(b, `,"receipt":`...), e.Receipt); err != nil {
				return b, err
			}
		}
		if e.ReceiptFollows {
			b = append(b, `,"receipt_follows":true`...)
		}
		b = append(b, '}')
	}
	if len(fr.Receipt) > 0 {
		var err error
		if b, err = appendRaw(append(b, `,"receipt":`...), fr.Receipt); err != nil {
			return b, err
		}
	}
	if len(fr.Trace) > 0 {
		b = append(b, `,"trace":{`...)
		for i, k := range slices.Sorted(maps.Keys(fr.Trace)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(append(AppendString(b, k, true), ':'), fr.Trace[k], true)
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendRequest appends a job's request as encoding/json encodes it, its raw members as
// appendRaw does.
func appendRequest(b []byte, r *Request) ([]byte, error) {
	b = AppendString(append(b, `{"kind":`...), r.Kind, true)
	b = AppendString(append(b, `,"model":`...), r.Model, true)
	raw := func(name string, v json.RawMessage) (err error) {
		if len(v) > 0 {
			b, err = appendRaw(append(b, name...), v)
		}
		return err
	}
	if err := raw(`,"messages":`, r.Messages); err != nil {
		return b, err
	}
	if r.Prompt != "" {
		b = AppendString(append(b, `,"prompt":`...), r.Prompt, true)
	}
	if r.MaxTokens != 0 {
		b = strconv.AppendInt(append(b, `,"max_tokens":`...), int64(r.MaxTokens), 10)
	}
	b = appendFloat(b, `,"temperature":`, r.Temperature)
	b = appendFloat(b, `,"top_p":`, r.TopP)
	if r.Seed != nil {
		b = strconv.AppendInt(append(b, `,"seed":`...), *r.Seed, 10)
	}
	if len(r.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range r.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, s, true)
		}
		b = append(b, ']')
	}
	b = appendFloat(b, `,"frequency_penalty":`, r.FrequencyPenalty)
	b = appendFloat(b, `,"presence_penalty":`, r.PresencePenalty)
	if r.Continue {
		b = append(b, `,"continue":true`...)
	}
	if r.Partial != "" {
		b = AppendString(append(b, `,"partial":`...), r.Partial, true)
	}
	for _, m := range []struct {
		name string
		v    json.RawMessage
	}{{`,"tools":`, r.Tools}, {`,"tool_choice":`, r.ToolChoice}, {`,"response_format":`, r.ResponseFormat}} {
		if err := raw(m.name, m.v); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// plainFloats says whether r's numbers are all finite: encoding/json refuses NaN and the
// infinities, and words the error.
func plainFloats(r *Request) bool {
	for _, f := range []*float64{r.Temperature, r.TopP, r.FrequencyPenalty, r.PresencePenalty} {
		if f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0)) {
			return false
		}
	}
	return true
}

// appendFloat appends name and *f as encoding/json encodes a float64, unless f is nil.
func appendFloat(b []byte, name string, f *float64) []byte {
	if f == nil {
		return b
	}
	b = append(b, name...)
	format := byte('f')
	if abs := math.Abs(*f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, *f, format, -1, 64)
	if format == 'e' { // e-09 as e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// comma appends a comma when an object's members began before, at n.
func comma(b []byte, n int) []byte {
	if len(b) > n {
		return append(b, ',')
	}
	return b
}

// appendRaw appends raw JSON compacted, as encoding/json does a json.RawMessage (which also
// escapes HTML in its strings), and encoding/json's error when it is not JSON: a frame that
// is not JSON would cost its peer the whole message. It checks raw in one pass (jsondec) and
// compacts it in another, where encoding/json's scanner takes about ten times as long; JSON
// with no white space at all is compact already.
func appendRaw(b, raw []byte) ([]byte, error) {
	if d := jsondec.New(raw); !d.Skip() || !d.End() {
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, raw); err != nil {
			return b, err
		}
		return buf.Bytes(), nil // JSON deeper than jsondec follows
	}
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return append(b, raw...), nil
	}
	return appendCompact(b, raw), nil
}

// appendCompact appends JSON known to be valid without the white space between its tokens.
func appendCompact(b, raw []byte) []byte {
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case ' ', '\t', '\r', '\n':
			i++
		case '"':
			end := stringEnd(raw, i)
			b = append(b, raw[i:end]...)
			i = end
		default:
			start := i
			for i < len(raw) && !structural[raw[i]] {
				i++
			}
			b = append(b, raw[start:i]...)
		}
	}
	return b
}

// structural holds the bytes that end a run of appendCompact's copying outside strings: white
// space and a string's quote.
var structural = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, '"': true}

// stringEnd returns the index past the valid JSON string that starts at raw[i]: past the
// first quote after it that an even run of backslashes (none included) precedes.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(raw[j:], '"')
		if k < 0 {
			return len(raw)
		}
		j += k
		escaped := false
		for m := j - 1; m > i && raw[m] == '\\'; m-- {
			escaped = !escaped
		}
		if !escaped {
			return j + 1
		}
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string as encoding/json encodes it: invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped, and HTML's <, > and & escaped when escapeHTML is set (as
// encoding/json's Marshal does; the buyer API's answers leave them alone).
func AppendString(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
