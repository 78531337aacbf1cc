package openaicompat

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxLine bounds one line of a stream; a longer line is an error, not unbounded memory.
const maxLine = 16 << 20

var errLineTooLong = errors.New("stream line longer than 16 MiB")

// sseReader reads server-sent events as the WHATWG HTML standard defines them: lines end in
// LF or CRLF (a lone CR is not treated as a line end); "data:" lines are joined with LF; a
// blank line ends an event; comments (":"), "id:", "retry:" and unknown fields are ignored;
// "event:" names the event. Unlike the standard, an event at the clean end of the stream (EOF)
// is returned without its blank line, which servers and recordings omit after "[DONE]"; the
// caller finds out whether it was whole. After any other read error it is dropped.
type sseReader struct {
	br    *bufio.Reader
	line  []byte // a line longer than br's buffer
	data  []byte // the current event's data
	event []byte // the current event's name
	first bool   // no line read yet (a byte order mark may come first)
	err   error  // sticky read error
}

func (s *sseReader) reset(r io.Reader) {
	s.br.Reset(r)
	s.line, s.data, s.event = s.line[:0], s.data[:0], s.event[:0]
	s.first, s.err = true, nil
}

// next returns the name and data of the next event with data. The slices are valid until the
// next call. At the end of the stream it returns the read error: io.EOF, or why reading failed.
func (s *sseReader) next() (event, data []byte, err error) {
	s.data, s.event = s.data[:0], s.event[:0]
	hasData := false
	for {
		if s.err != nil {
			if s.err == io.EOF && len(s.data) > 0 {
				return s.event, s.data, nil
			}
			return nil, nil, s.err
		}
		var line []byte
		line, s.err = s.readLine()
		if len(line) == 0 {
			if s.err != nil {
				continue
			}
			// A blank line ends the event; one without data is dropped.
			if len(s.data) > 0 {
				return s.event, s.data, nil
			}
			s.event, hasData = s.event[:0], false
			continue
		}
		if line[0] == ':' {
			continue // a comment, such as a keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		case "event":
			s.event = append(s.event[:0], value...)
		}
	}
}

// readLine returns the next line without its line end. At the end of the stream it returns the
// last, unterminated line (maybe empty) with the error.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.line = append(s.line[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = s.br.ReadSlice('\n')
			s.line = append(s.line, line...)
			if len(s.line) > maxLine {
				return nil, errLineTooLong
			}
		}
		line = s.line
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if s.first {
		s.first = false
		line = bytes.TrimPrefix(line, []byte("\uFEFF"))
	}
	return line, err
}
