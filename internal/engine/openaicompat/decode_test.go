package openaicompat

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/shareai/shareai/internal/jsondec"
)

// decodeStd decodes data with encoding/json alone.
func decodeStd(data []byte) (chunk, error) {
	var c chunk
	err := json.Unmarshal(data, &c)
	return c, err
}

// normal makes chunks comparable: the usage storage and an empty list of choices do not count.
func normal(c chunk) chunk {
	c.usageVal = usage{}
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	return c
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		data string
		fast bool // the small decoder handles it
	}{
		{"llama.cpp role chunk", `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1795990461,"id":"chatcmpl-r","model":"tiny-utf8.gguf","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}`, true},
		{"escapes", `{"choices":[{"index":0,"delta":{"content":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\u2028"}}]}`, true},
		{"invalid utf-8", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xffb\xe6\x88\"}}]}", true},
		{"usage with details", `{"choices":[],"usage":{"completion_tokens":16,"prompt_tokens":76,"total_tokens":92,"prompt_tokens_details":{"cached_tokens":75}}}`, true},
		{"usage null", `{"choices":[{"index":0,"text":" city","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`, true},
		{"tool calls raw", `{"choices":[{"index":0,"delta":{"tool_calls":[ {"index":0, "function":{"arguments":"{\"a\": 1}"}} ]}}]}`, true},
		{"message", `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}]}`, true},
		{"error nested", `{"error":{"code":500,"message":"m","type":"server_error"}}`, true},
		{"numbers skipped", `{"created":-1.5e+3,"x":[0,-0,1E2,true,false,null,{}],"choices":[]}`, true},
		{"white space", " \t\r\n{ \"choices\" : [ { \"index\" : 1 , \"text\" : \"a\" } ] } \n", true},
		{"finish reason interned", `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, true},
		{"case-folded key", `{"Choices":[{"index":0,"text":"a"}]}`, false},
		{"kelvin sign key", `{"usage":{"prompt_to` + "\u212a" + `ens":5}}`, false},
		{"escaped key", `{"\u0063hoices":[{"text":"a"}]}`, false},
		{"duplicate key", `{"choices":[{"text":"a"}],"choices":[{"index":1}]}`, false},
		{"float index", `{"choices":[{"index":1.0}]}`, false},
		{"content not a string", `{"choices":[{"delta":{"content":5}}]}`, false},
		{"null choice", `{"choices":[null]}`, false},
		{"top-level null", `null`, false},
		{"trailing data", `{"choices":[]} x`, false},
		{"control character", "{\"id\":\"a\tb\",\"choices\":[]}", false},
		{"bad escape", `{"id":"\x","choices":[]}`, false},
		{"leading zero", `{"created":01}`, false},
		{"cut", `{"choices":[{"index":0,"delta":{"content":"a"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fast chunk
			d := jsondec.New([]byte(tt.data))
			gotFast := readChunk(&d, &fast) && d.End()
			if gotFast != tt.fast {
				t.Errorf("small decoder took it: %v, want %v", gotFast, tt.fast)
			}
			var got chunk
			err := got.decode([]byte(tt.data))
			want, wantErr := decodeStd([]byte(tt.data))
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("decode error = %v, encoding/json's = %v", err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(normal(got), normal(want)) {
				t.Errorf("decode = %+v\nwant %+v", normal(got), normal(want))
			}
		})
	}
}

// FuzzDecode holds the small decoder to encoding/json's answers.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*")
	more, _ := filepath.Glob("testdata/*/*/*")
	for _, name := range append(files, more...) {
		b, _ := os.ReadFile(name)
		for line := range bytes.Lines(b) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				f.Add(bytes.TrimSpace(data))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast chunk
		d := jsondec.New(data)
		if !readChunk(&d, &fast) || !d.End() {
			return
		}
		want, err := decodeStd(data)
		if err != nil {
			t.Fatalf("small decoder took %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(normal(fast), normal(want)) {
			t.Errorf("%q: small decoder = %+v\nencoding/json = %+v", data, normal(fast), normal(want))
		}
	})
}
