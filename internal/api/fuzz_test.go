package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/api"
)

var fuzzSeeds = []string{
	chatBody(""),
	chatBody(`"max_token":5`),
	chatBody(`"provider":{"sort":"latency","order":["n"]},"models":["a"],"service_tier":"flex"`),
	chatBody(`"stream_options":{"include_usage":true},"stop":["a"],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`),
	chatBody(`"a\"b\\":[{"}":"]"}],"x":-1.5e3,"y":true,"z":null`),
	`{"model":"m","prompt":["p"],"best_of":1,"service_tier":"priority"}`,
	`{ "mo\u0064el" : "m" , "messages" : [ ] }`,
	`[]`, `{`, ``, `{"":1}`,
	chatBody(`"split":{"sim/qwen-2.5-7b":0.2,"b\u003d":1e-12}`),
}

// FuzzDecode: no body makes Decode or Job panic, and every refusal is a 4xx naming no Go type.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkRefusal(t, decodeChat(body))
		var req api.CompletionRequest
		err := api.Decode(strings.NewReader(body), &req)
		if err == nil {
			_, err = req.Job()
		}
		checkRefusal(t, err)
	})
}

func checkRefusal(t *testing.T, err *api.Error) {
	t.Helper()
	if err == nil {
		return
	}
	if err.Status < 400 || err.Status >= 500 || err.Message == "" || err.Type != api.TypeInvalidRequest {
		t.Fatalf("refusal %d %s %q: want a 4xx invalid_request_error with a message", err.Status, err.Type, err.Message)
	}
	if strings.Contains(err.Message, "Go ") || strings.Contains(err.Message, "api.") {
		t.Fatalf("refusal %q names Go", err.Message)
	}
	if err.Status == http.StatusBadRequest && err.Code == "" {
		t.Fatalf("refusal %q without a code", err.Message)
	}
}

// FuzzUnknownMember checks the scan for unknown members against encoding/json's own reading
// of the object's members.
func FuzzUnknownMember(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	known := map[string]bool{"model": true, "messages": true, "x": true}
	f.Fuzz(func(t *testing.T, body string) {
		b := bytes.TrimSpace([]byte(body))
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) != nil || obj == nil {
			return // Decode scans only JSON objects
		}
		want, wantOK := firstUnknown(t, b, known)
		got, ok := api.UnknownMember(b, known)
		if got != want || ok != wantOK {
			t.Fatalf("UnknownMember(%s) = %q, %v; want %q, %v", b, got, ok, want, wantOK)
		}
	})
}

// firstUnknown is the first member of the object b not in known, by encoding/json's tokens.
func firstUnknown(t *testing.T, b []byte, known map[string]bool) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if name := tok.(string); !known[name] {
			return name, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return "", false
}

// Decode, which cuts a chat's messages (a completion's prompt) out for encoding/json and reads
// them in one pass, gives what encoding/json reading the body whole gives: the same request,
// or the same refusal.
func FuzzDecode_Cut(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"messages":[]}`,
		`{"model":"m","Messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":null}`, `{"model":"m","messages":[{"Role":"user","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","role":"tool","content":[]}]}`, `{"model":5,"messages":[]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{}],"content":null}]}`, `{"messages":[null]}`,
		`{"model":"m","messages":[{"role":"user","content":"\u00e9\ud800"}],"stream":"yes"}`,
		`{"model":"m","prompt":"Once upon a time","max_tokens":5}`, `{"model":"m","prompt":["a","b"],"prompt":"c"}`,
		`{"model":"m","prompt":null,"echo":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b := bytes.TrimSpace([]byte(body))
		if len(b) == 0 {
			return
		}
		var got, want api.ChatRequest
		err, wantErr := api.Decode(bytes.NewReader(b), &got), api.DecodeWhole(b, &want)
		if !reflect.DeepEqual(err, wantErr) {
			t.Fatalf("%s: Decode = %v; reading it whole: %v", b, err, wantErr)
		}
		var gotC, wantC api.CompletionRequest
		if err, wantErr := api.Decode(bytes.NewReader(b), &gotC), api.DecodeWhole(b, &wantC); !reflect.DeepEqual(err, wantErr) ||
			err == nil && !reflect.DeepEqual(gotC, wantC) {
			t.Fatalf("%s: as a completion, Decode = %+v, %v; reading it whole: %+v, %v", b, gotC, err, wantC, wantErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nDecode     %+v\nwhole body %+v", b, got, want)
		}
		if v, std := api.ValidateMessages(got.Messages); !reflect.DeepEqual(v, std) {
			t.Fatalf("%s: messages refused %v; with encoding/json: %v", got.Messages, v, std)
		}
	})
}
