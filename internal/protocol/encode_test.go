package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// appendFrame writes every frame as encoding/json does, byte for byte.
func TestAppendFrame_AsEncodingJSON(t *testing.T) {
	raw := json.RawMessage(`{"a": [1, 2],` + "\n" + `"b":"x y"}`)
	for _, fr := range []Frame{
		{},
		{Type: TypeCredit, Job: "job_1", Credit: 16},
		{Type: TypeCancel, Job: "job_1"},
		{Type: TypeDelta, Job: "j", Delta: &Delta{}},
		{Type: TypeDelta, Job: "j", Delta: &Delta{Pieces: 3, Text: "東京 <b>&amp;</b> \"q\" \\ \n\r\t\b\f\x00\x1f\x7f é \u2028\u2029 😀 \xff\xfe end"}},
		{Type: TypeDelta, Job: "j", Delta: &Delta{Reasoning: "why", ToolCalls: raw}},
		{Type: TypeDelta, Job: "j", Delta: &Delta{Pieces: -1, ToolCalls: json.RawMessage(`[{"id":"c"}]`)}},
		{Type: TypeEnd, Job: "j", End: &End{}},
		{Type: TypeEnd, Job: "j", End: &End{FinishReason: "stop", Usage: Usage{12, 34}, Estimated: true, Receipt: raw, ReceiptFollows: true}},
		{Type: TypeEnd, Job: "j", End: &End{FinishReason: "length", Usage: Usage{1, 0}, ReceiptFollows: true}},
		{Type: TypeEnd, Job: "j", End: &End{Error: &Error{Status: 400, Message: "bad <request>"}}},
		{Type: TypeReceipt, Job: "j", Receipt: json.RawMessage(`{"receipt":{}}`)},
		{Type: TypeHeartbeat, Heartbeat: &Heartbeat{Running: 2, Loaded: []string{"m"}}},
		{Type: TypeJob, Job: "j", Request: &Request{Model: "m"}, Trace: map[string]string{"traceparent": "00-x"}},
		{Type: TypeJob, Job: "j", Request: fullRequest(), Trace: map[string]string{"tracestate": "a=<b>", "traceparent": "00-x"}},
		{Type: TypeJob, Job: "j", Request: &Request{Kind: "completion", Model: "m", Prompt: "Once <upon>", Partial: "a", Continue: true,
			Temperature: ptr(1e-7), TopP: ptr(-0.0), FrequencyPenalty: ptr(1e21), PresencePenalty: ptr(123456789.125), Stop: []string{}}},
		{Type: "odd\u00e9<", Job: "\xff"},
	} {
		want, err := json.Marshal(fr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendFrame([]byte("prefix"), &fr)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%+v:\n got %s, %v\nwant prefix%s", fr, got, err, want)
		}
	}
	if _, err := appendFrame(nil, &Frame{Type: TypeReceipt, Receipt: json.RawMessage("{ broken")}); err == nil {
		t.Error("a raw receipt that is not JSON encoded without error")
	}
}

func ptr[T any](v T) *T { return &v }

// fullRequest is a job's request with every member set, its raw ones spaced as a buyer may
// send them (encoding/json and appendRaw compact them alike: no HTML in them).
func fullRequest() *Request {
	return &Request{Kind: "chat", Model: "llama3.1:8b",
		Messages:  json.RawMessage("[ {\"role\": \"user\",\n \"content\": \"Hi \\\" there\\\\\"} ,\t{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"x y\"}]} ]"),
		MaxTokens: 64, Temperature: ptr(0.7), TopP: ptr(1.0), Seed: ptr(int64(-42)), Stop: []string{"\n", "END"},
		FrequencyPenalty: ptr(-2.0), PresencePenalty: ptr(0.5), Continue: true, Partial: "p",
		Tools: json.RawMessage(`[{"type": "function", "function": {"name": "f", "parameters": {}}}]`), ToolChoice: json.RawMessage(`"auto"`),
		ResponseFormat: json.RawMessage(`{"type" : "json_object"}`)}
}

// Raw values with HTML in their strings, which encoding/json escapes and appendFrame leaves
// as they are, decode to the same frame; what is not JSON is refused.
func TestAppendFrame_RawValues(t *testing.T) {
	raw := json.RawMessage("[{\"role\":\"user\", \"content\": \"<b>&amp;</b> \\\" \\\\ \u2028 \\u00e9 \"}]")
	fr := Frame{Type: TypeJob, Job: "j", Request: &Request{Model: "m", Messages: raw, ToolChoice: json.RawMessage(` "<none>" `)}}
	got, err := appendFrame(nil, &fr)
	if err != nil || !json.Valid(got) || bytes.ContainsAny(got, "\n\r") {
		t.Fatalf("appendFrame = %s, %v; want one line of JSON", got, err)
	}
	want, _ := json.Marshal(fr)
	if !sameJSON(got, want) {
		t.Errorf("appendFrame = %s\nencoding/json: %s", got, want)
	}
	for _, bad := range []string{`[{"role":}]`, "[1, 2", `"open`, `{"a":1}}`} {
		fr.Request.Messages = json.RawMessage(bad)
		if _, err := appendFrame(nil, &fr); err == nil {
			t.Errorf("messages %q encoded without error", bad)
		}
	}
}

// sameJSON says whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func FuzzAppendFrame(f *testing.F) {
	f.Add("delta", "job_1", "hello <world> & \u2028", "", 3, 0, false)
	f.Add("end", "j", "", "stop", 0, 7, true)
	f.Add("x\xff", "\x00", "\xed\xa0\x80", "\u2029", -5, 1<<40, true)
	f.Fuzz(func(t *testing.T, typ, job, text, reason string, pieces, tokens int, estimated bool) {
		fr := Frame{Type: typ, Job: job, Request: &Request{Kind: reason, Model: text, Messages: json.RawMessage(text), Prompt: text,
			MaxTokens: tokens, Temperature: ptr(float64(pieces) / 7), Stop: []string{reason}}}
		if len(text) == 0 {
			fr.Request.Messages = nil
		}
		got, err := appendFrame(nil, &fr)
		want, wantErr := json.Marshal(fr)
		if (err == nil) != (wantErr == nil) || err == nil && (!sameJSON(got, want) || bytes.ContainsAny(got, "\n\r")) {
			t.Errorf("%q:\n got %s, %v\nwant %s, %v", text, got, err, want, wantErr)
		}
		for _, fr := range []Frame{
			{Type: typ, Job: job, Delta: &Delta{Pieces: pieces, Text: text, Reasoning: reason}},
			{Type: typ, Job: job, Credit: pieces, End: &End{FinishReason: reason, Usage: Usage{tokens, pieces}, Estimated: estimated}},
		} {
			want, err := json.Marshal(fr)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := appendFrame(nil, &fr); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%+v:\n got %s, %v\nwant %s", fr, got, err, want)
			}
		}
	})
}

func BenchmarkBatcher_Encode(b *testing.B) {
	frames := []Frame{
		{Type: TypeDelta, Job: "job_abcdefghijklmnop", Delta: &Delta{Pieces: 20, Text: " word word word word word word word word word word word word word word word word word word word word"}},
		{Type: TypeEnd, Job: "job_abcdefghijklmnop", End: &End{FinishReason: "stop", Usage: Usage{12, 20}, ReceiptFollows: true}},
	}
	more := make(chan Frame, 1)
	var bt Batcher
	for b.Loop() {
		more <- frames[1]
		if _, err := bt.Encode(frames[0], more); err != nil {
			b.Fatal(err)
		}
	}
}

// decodeFrame decodes what it takes as encoding/json does, and what encoding/json refuses it
// never takes.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range []Frame{
		{Type: TypeDelta, Job: "job_1", Delta: &Delta{Pieces: 3, Text: "東京 <b> \"q\" \n \u2028 😀"}},
		{Type: TypeDelta, Job: "j", Delta: &Delta{Reasoning: "why", ToolCalls: json.RawMessage(`[{"id":"c","f":{"a":[1,-2.5e3,true,null]}}]`)}},
		{Type: TypeEnd, Job: "j", End: &End{FinishReason: "stop", Usage: Usage{12, 34}, Estimated: true, ReceiptFollows: true}},
		{Type: TypeEnd, Job: "j", End: &End{Receipt: json.RawMessage(`{"receipt":{"version":1},"node_key":"AAAA"}`)}},
		{Type: TypeCredit, Job: "j", Credit: 16},
		{Type: TypeReceipt, Job: "j", Receipt: json.RawMessage(`{"a":"b\\u00e9\\n","c":[]}`)},
		{Type: TypeEnd, Job: "j", End: &End{Error: &Error{Status: 500, Message: "x"}}},
		{Type: TypeJob, Job: "j", Request: fullRequest(), Trace: map[string]string{"traceparent": "00-x"}},
	} {
		b, _ := json.Marshal(fr)
		f.Add(b)
	}
	for _, s := range []string{
		`{"t":"delta","job":"a","delta":{"text":"\ud83d\ude00 \u00e9 \/"}}`, `{"T":"delta"}`, `{"t":"a","t":"b"}`,
		`{"t":"end","end":{"usage":{"prompt_tokens":1.0}}}`, `{"t":"x","credit":-0}`, `{"t":"x","credit":01}`,
		`{"t":"x"} {"t":"y"}`, ` { "t" : "x" , "job" : "y" } `, `{"t":"\xff"}`, `{"t":null}`, `{"delta":null}`,
		`{"receipt":[1,2,{"a":{}}]}`, `{"receipt":"s"}`, `{"credit":99999999999999999999}`,
		`{"t":"job","request":{"temperature":1e400}}`, `{"t":"job","request":{"stop":[]},"trace":{}}`,
		`{"t":"job","request":{"seed":1.5,"top_p":-0}}`, `{"t":"job","request":null}`, `{"t":"job","trace":{"a":"1","a":"2"}}`,
		`{"t":"job","request":{"messages":null,"tools":"x","max_tokens":1e3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast Frame
		if !decodeFrame(line, &fast) {
			return
		}
		var want Frame
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("%q: decodeFrame took it, encoding/json refuses it: %v", line, err)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) || string(fast.Receipt) != string(want.Receipt) || !sameRequest(fast.Request, want.Request) ||
			(fast.Delta != nil && string(fast.Delta.ToolCalls) != string(want.Delta.ToolCalls)) ||
			(fast.End != nil && string(fast.End.Receipt) != string(want.End.Receipt)) {
			t.Fatalf("%q:\ndecodeFrame %s\nencoding/json %s", line, a, b)
		}
	})
}

// sameRequest says whether two requests are the same, their raw members byte for byte.
func sameRequest(a, b *Request) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

func BenchmarkDecode(b *testing.B) {
	more := make(chan Frame, 2)
	more <- Frame{Type: TypeEnd, Job: "job_abcdefghijklmnop", End: &End{FinishReason: "stop", Usage: Usage{12, 20}, ReceiptFollows: true}}
	more <- Frame{Type: TypeReceipt, Job: "job_abcdefghijklmnop", Receipt: json.RawMessage(`{"receipt":{"version":1,"job_id":"job_abcdefghijklmnop","node_id":"node_abcdefgh","model":"llama3.1:8b","prompt_tokens":12,"completion_tokens":20,"finish_reason":"stop","output_sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","output_bytes":120},"node_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","node_signature":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}`)}
	var bt Batcher
	msg, err := bt.Encode(Frame{Type: TypeDelta, Job: "job_abcdefghijklmnop", Delta: &Delta{Pieces: 20, Text: " word word word word word word word word word word word word word word word word word word word word"}}, more)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := Decode(msg, func(Frame) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// decodeFrame itself takes every job frame this package writes: encoding/json is only for the
// others, and for what other writers send.
func TestDecodeFrame_TakesOurJobFrames(t *testing.T) {
	for _, fr := range []Frame{
		{Type: TypeDelta, Job: "job_1", Delta: &Delta{Pieces: 3, Text: "東京 <b> \"q\"\n\u2028", Reasoning: "r", ToolCalls: json.RawMessage(`[{"id":"c"}]`)}},
		{Type: TypeEnd, Job: "job_1", End: &End{FinishReason: "stop", Usage: Usage{12, 34}, Estimated: true, ReceiptFollows: true}},
		{Type: TypeEnd, Job: "job_1", End: &End{Receipt: json.RawMessage(`{"receipt":{"version":1},"node_key":"AA=="}`)}},
		{Type: TypeCredit, Job: "job_1", Credit: 16},
		{Type: TypeCancel, Job: "job_1"},
		{Type: TypeReceipt, Job: "job_1", Receipt: json.RawMessage(`{"receipt":{"a":[1,2.5,null,true]}}`)},
		{Type: TypeJob, Job: "job_1", Request: fullRequest(), Trace: map[string]string{"traceparent": "00-x", "tracestate": "y"}},
	} {
		b, err := appendFrame(nil, &fr)
		if err != nil {
			t.Fatal(err)
		}
		var got Frame
		if !decodeFrame(b, &got) {
			t.Errorf("%s: left to encoding/json", b)
			continue
		}
		again, _ := appendFrame(nil, &got)
		if !bytes.Equal(again, b) {
			t.Errorf("%s decoded as %s", b, again)
		}
	}
}
