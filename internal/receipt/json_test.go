package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// plainSigned has Signed's fields and tags, without its methods: what encoding/json makes of
// them by reflection.
type plainSigned Signed

// Signed's MarshalJSON writes what encoding/json writes from its fields' tags, byte for byte,
// whatever is set or not: the stored receipts and the agents' frames do not change.
func TestSigned_MarshalJSONAsEncodingJSON(t *testing.T) {
	type plain Signed // the same fields and tags, without the method
	proof := &Proof{Index: 3, Size: 7, Path: [][]byte{bytes.Repeat([]byte{1}, 32), {}, bytes.Repeat([]byte{0xfe}, 32)}}
	at := time.Date(2026, 12, 7, 17, 33, 41, 123456789, time.FixedZone("x", 3600))
	for _, s := range []Signed{
		{},
		{Receipt: json.RawMessage(`{"version":1,"job_id":"job_1"}`), NodeKey: make([]byte, 32), NodeSignature: make([]byte, 64)},
		{Receipt: json.RawMessage("{\n  \"version\": 1,\n  \"model\": \"a b\"\n}"), NodeKey: []byte{}, NodeProof: proof},
		{Receipt: json.RawMessage(`{"version":1}`), NodeKey: []byte{1, 2, 3}, NodeSignature: []byte{4}, NodeProof: proof,
			RequestID: "req_2345abcdefg", CoordinatorKey: []byte{5, 6}, CoordinatorSignature: bytes.Repeat([]byte{9}, 64),
			CoordinatorProof: &Proof{Index: 0, Size: 1}, CountersignedAt: at},
		{Receipt: json.RawMessage(`"x"`), RequestID: "a<b>&\"c\"\\ é\u2028\x01", CoordinatorKey: []byte{}, CoordinatorSignature: []byte{},
			CountersignedAt: at.UTC().Truncate(time.Second)},
	} {
		want, err := json.Marshal(plain(s))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.MarshalJSON()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("MarshalJSON:\n%s, %v\nencoding/json:\n%s", got, err, want)
		}
		via, err := json.Marshal(&s)
		if err != nil || !bytes.Equal(via, want) {
			t.Errorf("json.Marshal through the method:\n%s, %v\nwant:\n%s", via, err, want)
		}
	}
	for _, raw := range []json.RawMessage{json.RawMessage("{ broken"), {}} {
		if _, err := (Signed{Receipt: raw}).MarshalJSON(); err == nil {
			t.Errorf("a receipt %q, not JSON, encoded without error", raw)
		}
		if _, err := json.Marshal(plainSigned(Signed{Receipt: raw})); err == nil {
			t.Errorf("encoding/json encodes the receipt %q", raw)
		}
	}
}

// A receipt's appendJSON writes what encoding/json's Marshal writes, byte for byte: the bytes
// a node signs, which verifiers compact and never re-encode, are the same as before it.
func TestReceipt_AppendJSONAsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 7, 17, 33, 41, 123_000_000, time.UTC)
	for _, r := range []Receipt{
		{},
		{Version: 1, JobID: "job_1", NodeID: "node_abc", Model: "sim/llama-3.1-8b", PromptTokens: 12, CompletionTokens: 34,
			OutputSHA256: strings.Repeat("ab", 32), OutputBytes: 13, FinishReason: "stop", StartedAt: at, EndedAt: at.Add(time.Second)},
		{Version: 1, JobID: "a<b>&\"c\"\\ é\u2028\x01\xff", NodeID: "n", Model: "qwen3:8b <think>", PromptTokens: -1,
			UsageEstimated: true, OutputBytes: 1 << 40, StartedAt: at.Truncate(time.Second), EndedAt: at.Add(time.Millisecond)},
	} {
		checkReceiptJSON(t, r)
	}
	// A field added to Receipt must be added to appendJSON too, and set in the cases above.
	if n := reflect.TypeFor[Receipt]().NumField(); n != 12 {
		t.Errorf("Receipt has %d fields; appendJSON writes 12", n)
	}
}

func FuzzReceipt_AppendJSON(f *testing.F) {
	f.Add(1, "job_1", "node_abc", "llama3.1:8b", 12, 34, false, "stop", int64(1_764_410_400_123))
	f.Add(2, "<&>", "\u2028", "\xff\xfe", -1, 0, true, "", int64(-62_135_596_800_000))
	f.Fuzz(func(t *testing.T, version int, job, node, model string, prompt, completion int, estimated bool, finish string, ms int64) {
		at := time.UnixMilli(ms).UTC()
		checkReceiptJSON(t, Receipt{Version: version, JobID: job, NodeID: node, Model: model, PromptTokens: prompt,
			CompletionTokens: completion, UsageEstimated: estimated, OutputSHA256: finish + job, OutputBytes: int64(prompt) * 7,
			FinishReason: finish, StartedAt: at, EndedAt: at.Add(time.Duration(completion) * time.Millisecond)})
	})
}

func checkReceiptJSON(t *testing.T, r Receipt) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := r.appendJSON(nil)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Errorf("appendJSON:\n%s, %v\nencoding/json:\n%s, %v", got, err, want, wantErr)
	}
}

func BenchmarkSigned_MarshalJSON(b *testing.B) {
	s := Signed{Receipt: json.RawMessage(`{"version":1,"job_id":"job_abcdefghijklmnop","node_id":"node_abcdefgh","model":"llama3.1:8b","prompt_tokens":12,"completion_tokens":20,"finish_reason":"stop","output_sha256":"` + string(bytes.Repeat([]byte("a"), 64)) + `","output_bytes":120,"started_at":"2026-12-07T17:33:41.123Z","ended_at":"2026-12-07T17:33:41.223Z"}`),
		NodeKey: make([]byte, 32), NodeSignature: make([]byte, 64), NodeProof: &Proof{Index: 1, Size: 4, Path: [][]byte{make([]byte, 32), make([]byte, 32)}},
		RequestID: "req_2345abcdefghijklmnopqrstu", CoordinatorKey: make([]byte, 32), CoordinatorSignature: make([]byte, 64),
		CoordinatorProof: &Proof{Index: 5, Size: 9, Path: [][]byte{make([]byte, 32), make([]byte, 32), make([]byte, 32), make([]byte, 32)}},
		CountersignedAt:  time.Now()}
	type plain Signed
	b.Run("method", func(b *testing.B) {
		for b.Loop() {
			s.MarshalJSON()
		}
	})
	b.Run("reflection", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(plain(s))
		}
	})
}

// A signed receipt decoded in one pass is what encoding/json decodes, and a receipt likewise
// what the strict decoder decodes.
func FuzzDecodeFast(f *testing.F) {
	key := make([]byte, 32)
	proof := &Proof{Index: 3, Size: 7, Path: [][]byte{bytes.Repeat([]byte{1}, 32), {}}}
	r := `{"version":1,"job_id":"job_1","node_id":"node_1","model":"m \u00e9","prompt_tokens":12,"completion_tokens":3,"usage_estimated":true,"output_sha256":"` +
		string(bytes.Repeat([]byte("ab"), 32)) + `","output_bytes":120,"finish_reason":"stop","started_at":"2026-12-07T17:33:41.123Z","ended_at":"2026-12-07T17:33:42Z"}`
	for _, s := range []Signed{
		{Receipt: json.RawMessage(r), NodeKey: key, NodeSignature: make([]byte, 64), NodeProof: proof},
		{Receipt: json.RawMessage(`{"version":2}`), NodeKey: key, RequestID: "req_1", CoordinatorKey: key, CoordinatorSignature: []byte{1},
			CoordinatorProof: &Proof{Size: 1}, CountersignedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
	} {
		b, _ := s.MarshalJSON()
		f.Add(b)
	}
	f.Add([]byte(r))
	f.Add([]byte(`{"receipt":{},"node_key":"","node_signature":"!!","node_proof":{"path":null}}`))
	f.Add([]byte(`{"receipt":[],"node_proof":{"index":1,"size":2,"path":["AA==",""]},"NODE_KEY":"AA=="}`))
	f.Add([]byte(`{"version":1,"job_id":"j","started_at":"2026-13-01T00:00:00Z","x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast Signed
		if fast.decodeFast(b) {
			var slow Signed
			if err := slow.unmarshalJSON(b); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Errorf("%q:\none pass %+v\nencoding/json %+v, %v", b, fast, slow, err)
			}
		}
		if r, ok := decodeFast(b); ok {
			var want Receipt
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&want); err != nil || !reflect.DeepEqual(r, want) {
				t.Errorf("%q:\none pass %+v\nencoding/json %+v, %v", b, r, want, err)
			}
		}
	})
}

// decodeFast itself takes the signed receipts MarshalJSON writes, and the receipts encode
// writes: encoding/json is only for what other writers send.
func TestDecodeFast_TakesOurReceipts(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	r := Receipt{Version: Version, JobID: "job_1", NodeID: "node_1", Model: "m", PromptTokens: 3, CompletionTokens: 4,
		OutputSHA256: strings.Repeat("ab", 32), OutputBytes: 9, FinishReason: "stop",
		StartedAt: time.Now().UTC().Truncate(time.Millisecond), EndedAt: time.Now().UTC().Truncate(time.Millisecond)}
	signed, errs := SignBatch(key, []Receipt{r, r})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	b, err := signed[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var s Signed
	if !s.decodeFast(b) || !reflect.DeepEqual(s, signed[0]) {
		t.Errorf("%s: not taken, or decoded as %+v", b, s)
	}
	if got, ok := decodeFast(s.Receipt); !ok || !reflect.DeepEqual(got, r) {
		t.Errorf("receipt %s: not taken (%v), or decoded as %+v", s.Receipt, ok, got)
	}
}
