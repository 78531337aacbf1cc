package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Messages are frames as NDJSON: Batcher writes them, Decode reads them.

// MaxBatch bounds the frames sent in one WebSocket message.
const MaxBatch = 64

// MaxBatchBytes is how large a message may grow before a batch takes no more frames: a message
// is at most MaxBatchBytes and one frame more, which keeps an agent's messages under
// MaxMessageBytes.
const MaxBatchBytes = 1 << 20

// Batcher encodes frames as one message: the first frame, then whatever more is already waiting
// on a channel, up to MaxBatch frames and about MaxBatchBytes, so that a burst costs one write
// instead of one per frame.
type Batcher struct {
	buf []byte
}

// Encode returns the message for first and the frames waiting on more. The returned bytes are
// valid until the next call.
func (b *Batcher) Encode(first Frame, more <-chan Frame) ([]byte, error) {
	var err error
	if b.buf, err = appendFrame(b.buf[:0], &first); err != nil {
		return nil, err
	}
	b.buf = append(b.buf, '\n')
	for range MaxBatch - 1 {
		if len(b.buf) >= MaxBatchBytes {
			break
		}
		select {
		case fr := <-more:
			if b.buf, err = appendFrame(b.buf, &fr); err != nil {
				return nil, err
			}
			b.buf = append(b.buf, '\n')
		default:
			return b.buf, nil
		}
	}
	return b.buf, nil
}

// Decode calls handle with each frame of a message, in order, and stops at the first error.
// A message is NDJSON: each line one frame. A line that holds more than one value is decoded
// as a stream of them, as a json.Decoder reads it; blank lines are skipped.
func Decode(msg []byte, handle func(Frame) error) error {
	for len(msg) > 0 {
		line := msg
		if i := bytes.IndexByte(msg, '\n'); i >= 0 {
			line, msg = msg[:i], msg[i+1:]
		} else {
			msg = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var fr Frame
		if decodeFrame(line, &fr) {
			if err := handle(fr); err != nil {
				return err
			}
			continue
		}
		if err := json.Unmarshal(line, &fr); err != nil {
			var syn *json.SyntaxError
			if !errors.As(err, &syn) {
				return fmt.Errorf("bad frame: %w", err)
			}
			// Not one value on the line: several, or one that spans lines. The rest of the
			// message is read as a stream, as before NDJSON was read line by line.
			return decodeStream(slices.Concat(line, []byte{'\n'}, msg), handle)
		}
		if err := handle(fr); err != nil {
			return err
		}
	}
	return nil
}

// decodeStream calls handle with each JSON value of msg, in order.
func decodeStream(msg []byte, handle func(Frame) error) error {
	dec := json.NewDecoder(bytes.NewReader(msg))
	for dec.More() {
		var fr Frame
		if err := dec.Decode(&fr); err != nil {
			return fmt.Errorf("bad frame: %w", err)
		}
		if err := handle(fr); err != nil {
			return err
		}
	}
	return nil
}

// Messages reads a connection's messages into one buffer that it reuses: Decode copies
// whatever it keeps of a message, so its bytes are needed only until the next read, and a
// reader need not allocate each message anew (io.ReadAll's growing copies were 3 KB a
// request).
type Messages struct {
	buf []byte
}

// keptMessageBytes bounds the buffer Messages keeps between messages: a large message (a
// job with a long prompt) is read into a buffer of its own, dropped after it.
const keptMessageBytes = 64 << 10

// Read returns all of r, a message's reader, valid until the next call.
func (m *Messages) Read(r io.Reader) ([]byte, error) {
	b := m.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if cap(b) <= keptMessageBytes {
		m.buf = b
	} else {
		m.buf = nil
	}
	return b, nil
}
