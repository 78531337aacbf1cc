package protocol

import (
	"bytes"
	"encoding/json"
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

func FuzzAppendFrame(f *testing.F) {
	f.Add("delta", "job_1", "hello <world> & \u2028", "", 3, 0, false)
	f.Add("end", "j", "", "stop", 0, 7, true)
	f.Add("x\xff", "\x00", "\xed\xa0\x80", "\u2029", -5, 1<<40, true)
	f.Fuzz(func(t *testing.T, typ, job, text, reason string, pieces, tokens int, estimated bool) {
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
