package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// appendFrame appends fr's JSON, byte for byte as encoding/json encodes it. The frames of
// every job (delta, end, credit, cancel, receipt) are written here without reflection; the
// others, rare (a job's request, a heartbeat, the handshake), through encoding/json.
func appendFrame(b []byte, fr *Frame) ([]byte, error) {
	if fr.Challenge != nil || fr.Register != nil || fr.Registered != nil || fr.Heartbeat != nil ||
		fr.Request != nil || fr.Selftest != nil || fr.Trace != nil || (fr.End != nil && fr.End.Error != nil) {
		js, err := json.Marshal(fr)
		return append(b, js...), err
	}
	b = AppendString(append(b, `{"t":`...), fr.Type, true)
	if fr.Job != "" {
		b = AppendString(append(b, `,"job":`...), fr.Job, true)
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
	return append(b, '}'), nil
}

// comma appends a comma when an object's members began before, at n.
func comma(b []byte, n int) []byte {
	if len(b) > n {
		return append(b, ',')
	}
	return b
}

// appendRaw appends raw JSON as encoding/json does a json.RawMessage: compacted, and an error
// when it is not JSON. JSON with no white space at all is compact already; it is not checked
// again (ours are made by encoders, or cut from JSON an engine sent and a decoder read).
func appendRaw(b, raw []byte) ([]byte, error) {
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	err := json.Compact(buf, raw)
	return buf.Bytes(), err
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
