package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/protocol"
)

// outputDomain begins the message whose hash is a job's output hash.
const outputDomain = "shareai-output-v1\n"

// Hasher computes the hash of a job's output from the deltas of its answer. The agent feeds it
// the deltas it sends (the end frame's too), the coordinator the deltas it receives; they agree
// when the answer arrived as it was sent. The zero Hasher is ready to use.
//
// The output hash is the hex SHA-256 of "shareai-output-v1\n" followed by the SHA-256 digests of:
//
//   - the text: the deltas' Text, one after the other;
//   - the reasoning: the deltas' Reasoning, one after the other;
//   - the tool calls: for each delta with ToolCalls, the length of their canonical JSON as a
//     big-endian uint64, then that JSON.
//
// So how the answer was cut into deltas does not count, and neither does the order of text,
// reasoning and tool calls relative to each other; moving bytes between text and reasoning,
// or changing, adding or dropping a tool call delta, does. Every part is taken as the buyer
// receives it, whatever JSON encoding it travelled in: in text and reasoning, each byte that is
// not part of valid UTF-8 counts as U+FFFD (as encoding/json sends it); tool calls are
// canonical JSON (decoded and encoded again with encoding/json: object keys sorted, no
// insignificant space, numbers as written, '<', '>' and '&' not escaped).
type Hasher struct {
	text, reasoning, tools hash.Hash
	n                      int64
}

// Add adds a delta of the answer.
func (h *Hasher) Add(d protocol.Delta) {
	if d.Text != "" {
		h.n += writeText(part(&h.text), d.Text)
	}
	if d.Reasoning != "" {
		h.n += writeText(part(&h.reasoning), d.Reasoning)
	}
	if len(d.ToolCalls) > 0 {
		c := canonicalJSON(d.ToolCalls)
		tools := part(&h.tools)
		tools.Write(binary.BigEndian.AppendUint64(nil, uint64(len(c))))
		tools.Write(c)
		h.n += int64(len(c))
	}
}

// part returns the digest of a part, made on its first bytes: most answers are text alone.
func part(h *hash.Hash) hash.Hash {
	if *h == nil {
		*h = sha256.New()
	}
	return *h
}

// emptySHA256 is the digest of a part without bytes.
var emptySHA256 = sha256.Sum256(nil)

// Sum returns the output hash of the deltas added so far, in lowercase hex.
func (h *Hasher) Sum() string {
	m := make([]byte, 0, len(outputDomain)+3*sha256.Size)
	m = append(m, outputDomain...)
	for _, p := range []hash.Hash{h.text, h.reasoning, h.tools} {
		if p == nil {
			m = append(m, emptySHA256[:]...)
		} else {
			m = p.Sum(m)
		}
	}
	sum := sha256.Sum256(m)
	return hex.EncodeToString(sum[:])
}

// Len returns the number of bytes hashed so far: of text and reasoning, counting each invalid
// byte as the 3 of U+FFFD, and of the tool calls' canonical JSON.
func (h *Hasher) Len() int64 { return h.n }

var replacement = []byte(string(utf8.RuneError))

// writeText writes s to w as encoding/json delivers it, and returns the bytes written.
func writeText(w io.Writer, s string) int64 {
	if utf8.ValidString(s) {
		io.WriteString(w, s)
		return int64(len(s))
	}
	var n int64
	for s != "" {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			w.Write(replacement)
			n += int64(len(replacement))
		} else {
			io.WriteString(w, s[:size])
			n += int64(size)
		}
		s = s[size:]
	}
	return n
}

// canonicalJSON returns raw decoded and encoded again. JSON that does not decode is returned as
// it is: no frame can carry it, so only the sender can have it.
func canonicalJSON(raw []byte) []byte {
	if !json.Valid(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return raw
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
