package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func TestReadMessages(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    []message
		wantErr bool
	}{
		{name: "string content", json: `[{"role":"user","content":"hi"}]`, want: []message{{role: "user", text: "hi"}}},
		{name: "null content and tool calls", json: `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}]`,
			want: []message{{role: "assistant", calls: []toolCall{{"f", `{"a":1}`}}}}},
		{name: "parts", json: `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u","detail":"low"}},{"type":"text","text":"b"},{"type":"input_audio","input_audio":{"data":"x"}}]}]`,
			want: []message{{role: "user", text: "a\nb", images: []string{"u"}, others: []string{"input_audio"}}}},
		{name: "escapes", json: `[{"role":"user","content":"caf\u00e9 \ud83d\ude42 \"q\" \\ \/ \n\ud800x"}]`,
			want: []message{{role: "user", text: "café 🙂 \"q\" \\ / \n\uFFFDx"}}},
		{name: "unknown fields and last key wins", json: ` [ { "name" : {"a":[1,2.5e-3,true,false,null]}, "role":"tool", "content":"x", "content":"y", "tool_call_id":"c" } ] `,
			want: []message{{role: "tool", text: "y"}}},
		{name: "empty", json: `[]`, want: nil},
		{name: "not an array", json: `{"role":"user"}`, wantErr: true},
		{name: "null", json: `null`, wantErr: true},
		{name: "content number", json: `[{"role":"user","content":1}]`, wantErr: true},
		{name: "role number", json: `[{"role":1}]`, wantErr: true},
		{name: "trailing data", json: `[] []`, wantErr: true},
		{name: "trailing comma", json: `[{"role":"user"},]`, wantErr: true},
		{name: "bad escape", json: `[{"role":"\x"}]`, wantErr: true},
		{name: "control character", json: "[{\"role\":\"a\nb\"}]", wantErr: true},
		{name: "unterminated", json: `[{"role":"user`, wantErr: true},
		{name: "bad number", json: `[{"x":01}]`, wantErr: true},
		{name: "bad literal", json: `[{"x":nul}]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []message
			err := readMessages([]byte(tt.json), func(m *message) {
				c := *m
				c.images, c.others, c.calls = clip(c.images), clip(c.others), clip(c.calls)
				got = append(got, c)
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("readMessages error = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("messages = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// clip copies s, or returns nil when it is empty.
func clip[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append([]T(nil), s...)
}

// FuzzReaderString checks that strings decode as encoding/json decodes them.
func FuzzReaderString(f *testing.F) {
	for _, s := range []string{`abc`, `caf\u00e9`, `\ud83d\ude42`, `\ud800\u0041`, "\xff\xfe", `\"`, `\u12`, "a\tb", `\ud83d\ud83d\ude42`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		in := append(append([]byte{'"'}, s...), '"')
		var want string
		wantErr := json.Unmarshal(in, &want)
		r := &reader{b: in}
		got, err := r.strBytes()
		if err == nil {
			err = r.end()
		}
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != want {
			t.Fatalf("%q: got %q, %v; want %q, %v", in, got, err, want, wantErr)
		}
	})
}

// FuzzReadMessages checks that the reader accepts only valid JSON and that white space does not
// change what it reads.
func FuzzReadMessages(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":"u"}]}]`))
	f.Add([]byte(`[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]`))
	f.Add([]byte(`[{"x":[{"y":-1.5E+3}],"role":"tool"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		read := func(b []byte) (string, error) {
			var out []string
			err := readMessages(b, func(m *message) { out = append(out, fmtMessage(m)) })
			return fmtStrings(out), err
		}
		got, err := read(b)
		skipErr := (&reader{b: b}).skipAll()
		if (skipErr == nil) != json.Valid(b) {
			t.Fatalf("%q: skip error %v, json.Valid %v", b, skipErr, json.Valid(b))
		}
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("%q: read invalid JSON", b)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, b, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		if again, err := read(indented.Bytes()); err != nil || again != got {
			t.Fatalf("indented %q: read %q, %v; want %q", indented.Bytes(), again, err, got)
		}
	})
}

func (r *reader) skipAll() error {
	if err := r.skip(); err != nil {
		return err
	}
	return r.end()
}

func fmtMessage(m *message) string {
	b, _ := json.Marshal([]any{m.role, m.text, m.images, m.others, fmt.Sprint(m.calls)})
	return string(b)
}

func fmtStrings(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
