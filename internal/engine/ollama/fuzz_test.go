package ollama

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// FuzzStream reads arbitrary bytes as an answer: it must end in a result or an error, and a
// result only after a done object.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.ndjson")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},"done":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := &stream{out: engine.Emit(func(protocol.Delta) error { return nil }), newID: func() string { return "call_1" }}
		res, err := s.read(context.Background(), newObjects(bytes.NewReader(body), s.flush))
		if err == nil && res.FinishReason == "" {
			t.Errorf("result %+v without a finish reason", res)
		}
	})
}

// FuzzConvertMessages converts arbitrary messages: it must not panic, and what it converts
// must encode.
func FuzzConvertMessages(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":"data:;base64,AA=="}]}]`))
	f.Add([]byte(`[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, err := convertMessages(raw)
		if err != nil {
			return
		}
		if _, err := marshal(msgs); err != nil {
			t.Errorf("converted messages of %q do not encode: %v", raw, err)
		}
	})
}
