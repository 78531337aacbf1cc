package ollama

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
)

// maxObject bounds one object of a stream: a longer one is an error, not unbounded memory.
const maxObject = 16 << 20

var errObjectTooLong = errors.New("stream object longer than 16 MiB")

// objects decodes the JSON objects of a stream from Ollama. Ollama writes one object a line
// (application/x-ndjson); the examples in its documentation spread an object over lines,
// which objects reads too, since it takes any JSON whitespace between objects.
//
// The objects are read through a buffer: r is read only when the buffer is empty, and wait,
// when not nil, is called first, since that read may wait for Ollama.
type objects struct {
	r    io.Reader
	wait func() error
	dec  *json.Decoder
	read int64 // bytes read from r
}

func newObjects(r io.Reader, wait func() error) *objects {
	o := &objects{r: r, wait: wait}
	o.dec = json.NewDecoder(bufio.NewReaderSize(o, 16<<10))
	return o
}

// Read reads r for the buffer, which calls it when it is empty.
func (o *objects) Read(p []byte) (int, error) {
	if o.read-o.dec.InputOffset() > maxObject {
		return 0, errObjectTooLong
	}
	if o.wait != nil {
		if err := o.wait(); err != nil {
			return 0, err
		}
	}
	n, err := o.r.Read(p)
	o.read += int64(n)
	return n, err
}

// next decodes the next object into v, which should be zero. At the clean end of the stream it
// returns io.EOF; in the middle of an object, io.ErrUnexpectedEOF; an error of r or wait as it
// is.
func (o *objects) next(v any) error {
	return o.dec.Decode(v)
}
