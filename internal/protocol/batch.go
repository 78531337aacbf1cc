package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	buf bytes.Buffer
	enc *json.Encoder
}

// Encode returns the message for first and the frames waiting on more. The returned bytes are
// valid until the next call.
func (b *Batcher) Encode(first Frame, more <-chan Frame) ([]byte, error) {
	if b.enc == nil {
		b.enc = json.NewEncoder(&b.buf)
	}
	b.buf.Reset()
	if err := b.enc.Encode(&first); err != nil {
		return nil, err
	}
	for range MaxBatch - 1 {
		if b.buf.Len() >= MaxBatchBytes {
			break
		}
		select {
		case fr := <-more:
			if err := b.enc.Encode(&fr); err != nil {
				return nil, err
			}
		default:
			return b.buf.Bytes(), nil
		}
	}
	return b.buf.Bytes(), nil
}

// Decode calls handle with each frame of a message, in order, and stops at the first error.
func Decode(msg []byte, handle func(Frame) error) error {
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
