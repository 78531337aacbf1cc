package openaicompat

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		in      string
		want    []string // "event|data" of each event
		wantErr error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"|a", "|b"}, io.EOF},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"|a", "|b"}, io.EOF},
		{"no space after colon", "data:a\n\n", []string{"|a"}, io.EOF},
		{"two spaces keep one", "data:  a\n\n", []string{"| a"}, io.EOF},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []string{"|{\"a\":\n1}"}, io.EOF},
		{"comments and other fields", ": ping\nid: 7\nretry: 10\nfoo: bar\ndata: a\n\n", []string{"|a"}, io.EOF},
		{"event name", "event: error\ndata: a\n\ndata: b\n\n", []string{"error|a", "|b"}, io.EOF},
		{"event without data is dropped", "event: ping\n\ndata: a\n\n", []string{"|a"}, io.EOF},
		{"empty data is dropped", "data:\n\ndata\n\ndata: a\n\n", []string{"|a"}, io.EOF},
		{"last event without blank line", "data: a\n\ndata: [DONE]", []string{"|a", "|[DONE]"}, io.EOF},
		{"last event with line end only", "data: [DONE]\n", []string{"|[DONE]"}, io.EOF},
		{"byte order mark", "\uFEFFdata: a\n\n", []string{"|a"}, io.EOF},
		{"line longer than the buffer", "data: " + long + "\n\n", []string{"|" + long}, io.EOF},
		{"empty", "", nil, io.EOF},
		{"cut connection drops the event", "data: a\n\ndata: {\"cho", []string{"|a"}, iotest.ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in io.Reader = strings.NewReader(tt.in)
			if tt.wantErr != io.EOF {
				in = io.MultiReader(in, iotest.ErrReader(tt.wantErr))
			}
			s := sseReader{br: bufio.NewReaderSize(nil, 16)}
			s.reset(iotest.OneByteReader(in))
			var got []string
			for {
				ev, data, err := s.next()
				if err != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Errorf("error = %v, want %v", err, tt.wantErr)
					}
					break
				}
				got = append(got, string(ev)+"|"+string(data))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzRead feeds anything to the stream reader: it must not panic, and must never finish
// without "[DONE]".
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\r\n\r\ndata: [DONE]",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n",
		"data: {\"error\":{\"message\":\"x\",\"code\":500}}\n\n",
		"event: error\ndata: oops\n\n",
		": c\ndata: {\"choices\":[]}\ndata: 1\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := readers.Get().(*reader)
		defer putReader(r)
		r.start(strings.NewReader(in), engine.Emit(func(protocol.Delta) error { return nil }))
		res, err := r.read(helloChat)
		if err == nil && !strings.Contains(in, "[DONE]") {
			t.Errorf("read finished without [DONE]: %+v", res)
		}
		if err == nil && res.FinishReason == "" {
			t.Errorf("read finished without a finish reason")
		}
	})
}
