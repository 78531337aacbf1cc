package receipt

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

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
	if _, err := (Signed{Receipt: json.RawMessage("{ broken")}).MarshalJSON(); err == nil {
		t.Error("a receipt that is not JSON encoded without error")
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
