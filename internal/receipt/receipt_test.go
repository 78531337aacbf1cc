package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)

// key returns a fixed key, one per seed.
func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

var (
	nodeKey        = key(1)
	coordinatorKey = key(2)
	otherKey       = key(3)
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// job returns a receipt for a job's answer, and what the coordinator saw of that job.
func job() (receipt.Receipt, receipt.Expected) {
	var h receipt.Hasher
	h.Add(protocol.Delta{Text: "Hello, "})
	h.Add(protocol.Delta{Text: "world."})
	r := receipt.Receipt{
		JobID: "job_1", NodeID: "node_abc", Model: "sim/llama-3.1-8b",
		PromptTokens: 12, CompletionTokens: 34, FinishReason: "stop",
		OutputSHA256: h.Sum(), OutputBytes: h.Len(),
		StartedAt: t0, EndedAt: t0.Add(1500 * time.Millisecond),
	}
	saw := receipt.Expected{
		JobID: r.JobID, NodeID: r.NodeID, NodeKey: pub(nodeKey), Model: r.Model,
		Usage:        protocol.Usage{PromptTokens: 12, CompletionTokens: 34},
		FinishReason: "stop", OutputSHA256: h.Sum(), OutputBytes: h.Len(),
		Sent: t0.Add(-10 * time.Millisecond), Ended: t0.Add(1510 * time.Millisecond),
	}
	return r, saw
}

// countersigned returns a receipt signed by nodeKey and countersigned by coordinatorKey.
func countersigned(t testing.TB) receipt.Signed {
	t.Helper()
	r, saw := job()
	s, err := receipt.Sign(nodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSign_Countersign_Verify(t *testing.T) {
	r, saw := job()
	s, err := receipt.Sign(nodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	want := r
	want.Version = receipt.Version
	if got, err := s.VerifyNode(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("VerifyNode = %+v, %v; want %+v, nil", got, err, want)
	}
	if _, err := s.Verify(nil); !errors.Is(err, receipt.ErrNotCountersigned) {
		t.Errorf("Verify before countersigning: %v; want ErrNotCountersigned", err)
	}
	if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.RequestID != "req_1" || !s.CoordinatorKey.Equal(pub(coordinatorKey)) || !s.CountersignedAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("countersigned: request %q, key %x, at %v", s.RequestID, s.CoordinatorKey, s.CountersignedAt)
	}
	for _, trusted := range []ed25519.PublicKey{nil, pub(coordinatorKey)} {
		if got, err := s.Verify(trusted); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Verify(%x) = %+v, %v; want %+v, nil", trusted, got, err, want)
		}
	}

	// As stored and handed to the buyer: JSON, perhaps pretty-printed on the way.
	for _, enc := range []func(any) ([]byte, error){json.Marshal, func(v any) ([]byte, error) { return json.MarshalIndent(v, "", "\t") }} {
		b, err := enc(s)
		if err != nil {
			t.Fatal(err)
		}
		var back receipt.Signed
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if got, err := back.Verify(pub(coordinatorKey)); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Verify after a JSON round trip through\n%s\n= %+v, %v; want %+v, nil", b, got, err, want)
		}
	}
}

// Sign keeps times to the millisecond in UTC, so a receipt reads the same everywhere.
func TestSign_NormalizesTimes(t *testing.T) {
	r, _ := job()
	paris := time.FixedZone("CET", 3600)
	r.StartedAt = t0.Add(456_789).In(paris)
	r.EndedAt = r.StartedAt.Add(time.Second)
	s, err := receipt.Sign(nodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"started_at":"2026-11-29T10:00:00.123Z","ended_at":"2026-11-29T10:00:01.123Z"`; !strings.Contains(string(s.Receipt), want) {
		t.Errorf("signed receipt %s; want it to contain %s", s.Receipt, want)
	}
}

func TestSign_RefusesAnIncompleteReceipt(t *testing.T) {
	tests := []struct {
		name   string
		change func(*receipt.Receipt)
	}{
		{"no job id", func(r *receipt.Receipt) { r.JobID = "" }},
		{"no node id", func(r *receipt.Receipt) { r.NodeID = "" }},
		{"no model", func(r *receipt.Receipt) { r.Model = "" }},
		{"negative tokens", func(r *receipt.Receipt) { r.CompletionTokens = -1 }},
		{"negative bytes", func(r *receipt.Receipt) { r.OutputBytes = -1 }},
		{"hash not hex", func(r *receipt.Receipt) { r.OutputSHA256 = strings.Repeat("z", 64) }},
		{"hash upper case", func(r *receipt.Receipt) { r.OutputSHA256 = strings.ToUpper(r.OutputSHA256) }},
		{"hash too short", func(r *receipt.Receipt) { r.OutputSHA256 = r.OutputSHA256[:62] }},
		{"no start", func(r *receipt.Receipt) { r.StartedAt = time.Time{} }},
		{"ended before it started", func(r *receipt.Receipt) { r.EndedAt = r.StartedAt.Add(-time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := job()
			tt.change(&r)
			if s, err := receipt.Sign(nodeKey, r); err == nil {
				t.Errorf("Sign = %s, nil; want an error", s.Receipt)
			}
		})
	}
	r, _ := job()
	if _, err := receipt.Sign(nodeKey[:32], r); err == nil {
		t.Error("Sign with a 32-byte key: nil error; want one")
	}
}

// editReceipt returns the receipt's JSON with one field set to value, re-encoded.
func editReceipt(t *testing.T, raw []byte, field string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = value
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type tamperTest struct {
	name    string
	change  func(t *testing.T, s *receipt.Signed)
	trusted ed25519.PublicKey // nil: the key in the receipt
	want    error             // nil: any error
	wantMsg string            // in the error's message
}

func TestVerify_DetectsTampering(t *testing.T) {
	// resignedByOther is the job's receipt as another node key signs it.
	r, _ := job()
	resignedByOther, err := receipt.Sign(otherKey, r)
	if err != nil {
		t.Fatal(err)
	}
	// reCountersigned is the receipt as another coordinator countersigns it.
	reCountersigned := countersigned(t)
	_, saw := job()
	if err := receipt.Countersign(otherKey, &reCountersigned, saw, "req_1", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}

	tests := []tamperTest{
		// The node's claim: see also the loop below.
		{name: "a field added", change: func(t *testing.T, s *receipt.Signed) { s.Receipt = editReceipt(t, s.Receipt, "paid", true) }, want: receipt.ErrNodeSignature},
		{name: "the same JSON in another key order", change: func(t *testing.T, s *receipt.Signed) {
			s.Receipt = editReceipt(t, s.Receipt, "job_id", "job_1") // a map re-encodes with sorted keys
		}, want: receipt.ErrNodeSignature},
		{name: "no receipt", change: func(t *testing.T, s *receipt.Signed) { s.Receipt = nil }, wantMsg: "not JSON"},

		// The node's key and signature.
		{name: "node key swapped", change: func(t *testing.T, s *receipt.Signed) { s.NodeKey = pub(otherKey) }, want: receipt.ErrNodeSignature},
		{name: "node signature changed", change: func(t *testing.T, s *receipt.Signed) { s.NodeSignature = flip(s.NodeSignature, 5) }, want: receipt.ErrNodeSignature},
		{name: "node signature truncated", change: func(t *testing.T, s *receipt.Signed) { s.NodeSignature = s.NodeSignature[:63] }, wantMsg: "node_signature is 63 bytes"},
		{name: "node key truncated", change: func(t *testing.T, s *receipt.Signed) { s.NodeKey = s.NodeKey[:31] }, wantMsg: "node_key is 31 bytes"},
		{name: "signed by another node key", change: func(t *testing.T, s *receipt.Signed) {
			s.NodeKey, s.NodeSignature = resignedByOther.NodeKey, resignedByOther.NodeSignature
		}, want: receipt.ErrCoordinatorSignature},

		// The coordinator's part.
		{name: "request_id", change: func(t *testing.T, s *receipt.Signed) { s.RequestID = "req_2" }, want: receipt.ErrCoordinatorSignature},
		{name: "no request_id", change: func(t *testing.T, s *receipt.Signed) { s.RequestID = "" }, wantMsg: "no request_id"},
		{name: "countersigned_at", change: func(t *testing.T, s *receipt.Signed) { s.CountersignedAt = s.CountersignedAt.Add(time.Millisecond) }, want: receipt.ErrCoordinatorSignature},
		{name: "countersigned_at by a nanosecond", change: func(t *testing.T, s *receipt.Signed) { s.CountersignedAt = s.CountersignedAt.Add(1) }, want: receipt.ErrCoordinatorSignature},
		{name: "countersigned_at 2^64 ns later", change: func(t *testing.T, s *receipt.Signed) {
			s.CountersignedAt = s.CountersignedAt.Add(1 << 62).Add(1 << 62).Add(1 << 62).Add(1 << 62)
		}, want: receipt.ErrCoordinatorSignature},
		{name: "coordinator key swapped", change: func(t *testing.T, s *receipt.Signed) { s.CoordinatorKey = pub(otherKey) }, want: receipt.ErrCoordinatorSignature},
		{name: "coordinator signature changed", change: func(t *testing.T, s *receipt.Signed) {
			s.CoordinatorSignature = flip(s.CoordinatorSignature, 63)
		}, want: receipt.ErrCoordinatorSignature},
		{name: "coordinator signature truncated", change: func(t *testing.T, s *receipt.Signed) {
			s.CoordinatorSignature = s.CoordinatorSignature[:10]
		}, wantMsg: "coordinator_signature is 10 bytes"},
		{name: "countersignature removed", change: func(t *testing.T, s *receipt.Signed) {
			s.CoordinatorKey, s.CoordinatorSignature = nil, nil
		}, want: receipt.ErrNotCountersigned},
		{name: "countersigned by an untrusted coordinator", change: func(t *testing.T, s *receipt.Signed) { *s = reCountersigned },
			trusted: pub(coordinatorKey), want: receipt.ErrUntrustedCoordinator},
		{name: "trusting a coordinator that did not countersign", change: func(t *testing.T, s *receipt.Signed) {},
			trusted: pub(otherKey), want: receipt.ErrUntrustedCoordinator},
	}
	// Every field of the node's claim.
	for field, v := range map[string]any{
		"version": 2, "job_id": "job_2", "node_id": "node_xyz", "model": "sim/llama-3.1-70b",
		"prompt_tokens": 13, "completion_tokens": 340, "usage_estimated": true,
		"output_sha256": strings.Repeat("0", 64), "output_bytes": 1, "finish_reason": "length",
		"started_at": "2026-11-29T09:00:00.123Z", "ended_at": "2026-11-29T11:00:00.123Z",
	} {
		tests = append(tests, tamperTest{name: field, want: receipt.ErrNodeSignature, change: func(t *testing.T, s *receipt.Signed) {
			s.Receipt = editReceipt(t, s.Receipt, field, v)
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := countersigned(t)
			tt.change(t, &s)
			r, err := s.Verify(tt.trusted)
			switch {
			case err == nil:
				t.Fatalf("Verify = %+v, nil; want an error", r)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("Verify: %v; want %v", err, tt.want)
			case !strings.Contains(err.Error(), tt.wantMsg):
				t.Errorf("Verify: %v; want it to say %q", err, tt.wantMsg)
			}
			if r != (receipt.Receipt{}) {
				t.Errorf("Verify returned %+v with its error; want the zero receipt", r)
			}
		})
	}
}

// Any byte of the signed receipt changed breaks the node's signature.
func TestVerify_DetectsAnyByteChanged(t *testing.T) {
	good := countersigned(t)
	for i := range good.Receipt {
		s := good
		s.Receipt = flip(good.Receipt, i)
		if _, err := s.Verify(nil); err == nil {
			t.Errorf("byte %d changed (%s): nil error", i, s.Receipt)
		}
	}
}

// What the coordinator vouches for is an instant: the same time in another zone still verifies,
// as the same receipt pretty-printed does.
func TestVerify_AcceptsTheSameInstantElsewhere(t *testing.T) {
	s := countersigned(t)
	s.CountersignedAt = s.CountersignedAt.In(time.FixedZone("", -5*3600))
	if _, err := s.Verify(pub(coordinatorKey)); err != nil {
		t.Error(err)
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

func TestSigned_JSON(t *testing.T) {
	s := countersigned(t)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"receipt", "node_key", "node_signature", "request_id", "coordinator_key", "coordinator_signature", "countersigned_at"} {
		if !bytes.Contains(b, []byte(`"`+field+`":`)) {
			t.Errorf("JSON %s has no %s", b, field)
		}
	}
	if !bytes.Contains(b, []byte(`"receipt":{"version":1,"job_id":"job_1",`)) {
		t.Errorf("JSON %s does not carry the receipt as an object", b)
	}
	var back receipt.Signed
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, s)
	}

	// Signed only: no coordinator fields.
	r, _ := job()
	ns, err := receipt.Sign(nodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(ns)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("coordinator")) || bytes.Contains(b, []byte("countersigned_at")) || bytes.Contains(b, []byte("request_id")) {
		t.Errorf("a receipt not countersigned encodes as %s; want no coordinator fields", b)
	}
}

func TestSigned_UnmarshalJSON_NamesTheFieldNotBase64(t *testing.T) {
	good, err := json.Marshal(countersigned(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"node_key", "node_signature", "coordinator_key", "coordinator_signature"} {
		t.Run(field, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			m[field] = "not base64!"
			b, _ := json.Marshal(m)
			var s receipt.Signed
			err := json.Unmarshal(b, &s)
			if err == nil || !strings.Contains(err.Error(), field+" is not base64") {
				t.Errorf("Unmarshal: %v; want it to say %q", err, field+" is not base64")
			}
		})
	}
}

func TestCountersign_ChecksTheClaim(t *testing.T) {
	tests := []struct {
		name   string
		change func(*receipt.Expected)
		field  string
	}{
		{"job", func(e *receipt.Expected) { e.JobID = "job_2" }, "job_id"},
		{"node", func(e *receipt.Expected) { e.NodeID = "node_xyz" }, "node_id"},
		{"registered with another key", func(e *receipt.Expected) { e.NodeKey = pub(otherKey) }, "node_key"},
		{"model", func(e *receipt.Expected) { e.Model = "sim/qwen" }, "model"},
		{"prompt tokens", func(e *receipt.Expected) { e.Usage.PromptTokens = 11 }, "prompt_tokens"},
		{"completion tokens", func(e *receipt.Expected) { e.Usage.CompletionTokens = 30 }, "completion_tokens"},
		{"estimated", func(e *receipt.Expected) { e.Estimated = true }, "usage_estimated"},
		{"finish reason", func(e *receipt.Expected) { e.FinishReason = "length" }, "finish_reason"},
		{"output", func(e *receipt.Expected) {
			var h receipt.Hasher
			h.Add(protocol.Delta{Text: "Hello, world!"})
			e.OutputSHA256 = h.Sum()
		}, "output_sha256"},
		{"output bytes", func(e *receipt.Expected) { e.OutputBytes = 5 }, "output_bytes"},
		{"started before the job was sent", func(e *receipt.Expected) { e.Sent = t0.Add(receipt.MaxClockSkew + time.Millisecond) }, "started_at"},
		{"ended after the coordinator saw it end", func(e *receipt.Expected) {
			e.Ended = t0.Add(1500*time.Millisecond - receipt.MaxClockSkew - time.Millisecond)
		}, "ended_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, saw := job()
			tt.change(&saw)
			s, err := receipt.Sign(nodeKey, r)
			if err != nil {
				t.Fatal(err)
			}
			before := s
			err = receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0.Add(2*time.Second))
			var me *receipt.MismatchError
			if !errors.As(err, &me) || me.Field != tt.field {
				t.Fatalf("Countersign: %v; want a MismatchError on %s", err, tt.field)
			}
			if !reflect.DeepEqual(s, before) {
				t.Errorf("a refused receipt was changed to %+v", s)
			}
		})
	}

	t.Run("a clock a little off", func(t *testing.T) {
		r, saw := job()
		saw.Sent, saw.Ended = saw.Sent.Add(30*time.Second), saw.Ended.Add(-30*time.Second)
		s, err := receipt.Sign(nodeKey, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0); err != nil {
			t.Errorf("Countersign: %v; want a clock 30s off accepted", err)
		}
	})
	t.Run("every mismatch told", func(t *testing.T) {
		r, saw := job()
		saw.Model, saw.OutputBytes = "other", 1
		s, err := receipt.Sign(nodeKey, r)
		if err != nil {
			t.Fatal(err)
		}
		err = receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0)
		msg := err.Error()
		if !strings.Contains(msg, `the receipt's model is "sim/llama-3.1-8b", but the coordinator saw "other"`) || !strings.Contains(msg, "output_bytes") {
			t.Errorf("Countersign: %v; want both the model and output_bytes named", err)
		}
	})
	t.Run("the node's signature", func(t *testing.T) {
		r, saw := job()
		s, err := receipt.Sign(nodeKey, r)
		if err != nil {
			t.Fatal(err)
		}
		s.Receipt = editReceipt(t, s.Receipt, "completion_tokens", 340)
		if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0); !errors.Is(err, receipt.ErrNodeSignature) {
			t.Errorf("Countersign of a changed receipt: %v; want ErrNodeSignature", err)
		}
	})
	t.Run("no request", func(t *testing.T) {
		r, saw := job()
		s, _ := receipt.Sign(nodeKey, r)
		if err := receipt.Countersign(coordinatorKey, &s, saw, "", t0); err == nil {
			t.Error("Countersign with no request id: nil error")
		}
	})
}

// Countersign stores the receipt compact, as the node signed it.
func TestCountersign_CompactsThePrettyPrinted(t *testing.T) {
	r, saw := job()
	s, err := receipt.Sign(nodeKey, r)
	if err != nil {
		t.Fatal(err)
	}
	signed := s.Receipt
	var pretty bytes.Buffer
	json.Indent(&pretty, s.Receipt, "", "  ")
	s.Receipt = pretty.Bytes()
	if err := receipt.Countersign(coordinatorKey, &s, saw, "req_1", t0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Receipt, signed) {
		t.Errorf("stored receipt %s; want %s", s.Receipt, signed)
	}
}

// FuzzVerify feeds Verify whatever a buyer's file may hold: it never panics, and what verifies
// still verifies after a JSON round trip.
func FuzzVerify(f *testing.F) {
	good, err := json.Marshal(countersigned(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"receipt":null,"node_key":"","node_signature":"AA=="}`))
	f.Add([]byte(`{"receipt":{"version":1},"node_key":"` + base64.StdEncoding.EncodeToString(pub(nodeKey)) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s receipt.Signed
		if json.Unmarshal(data, &s) != nil {
			return
		}
		s.VerifyNode()
		s.Verify(pub(coordinatorKey))
		r, err := s.Verify(nil)
		if err != nil {
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("a verified receipt does not encode: %v", err)
		}
		var back receipt.Signed
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("a verified receipt does not decode again: %v", err)
		}
		if r2, err := back.Verify(nil); err != nil || !reflect.DeepEqual(r2, r) {
			t.Fatalf("after a round trip: %+v, %v; want %+v", r2, err, r)
		}
	})
}
