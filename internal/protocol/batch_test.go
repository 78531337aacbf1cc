package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestBatcher_TakesWhatIsWaiting(t *testing.T) {
	more := make(chan Frame, 2*MaxBatch)
	for i := range 2 * MaxBatch {
		more <- Frame{Type: TypeCredit, Job: "j", Credit: i + 1}
	}
	var b Batcher
	msg, err := b.Encode(Frame{Type: TypeCancel, Job: "j"}, more)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	var got []Frame
	for dec.More() {
		var fr Frame
		if err := dec.Decode(&fr); err != nil {
			t.Fatal(err)
		}
		got = append(got, fr)
	}
	if len(got) != MaxBatch || got[0].Type != TypeCancel || got[1].Credit != 1 || got[MaxBatch-1].Credit != MaxBatch-1 {
		t.Errorf("batch of %d frames starting %+v; want the first frame then %d waiting ones, in order", len(got), got[0], MaxBatch-1)
	}
	if len(more) != MaxBatch+1 {
		t.Errorf("%d frames left waiting, want %d", len(more), MaxBatch+1)
	}
}

func TestDecode_ReadsWhatBatcherWrites(t *testing.T) {
	more := make(chan Frame, 2)
	more <- Frame{Type: TypeDelta, Job: "j", Delta: &Delta{Text: "東京", Pieces: 2}}
	more <- Frame{Type: TypeEnd, Job: "j", End: &End{FinishReason: "stop"}}
	var b Batcher
	msg, err := b.Encode(Frame{Type: TypeHeartbeat, Heartbeat: &Heartbeat{Running: 1}}, more)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := Decode(msg, func(fr Frame) error { got = append(got, fr.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != TypeHeartbeat || got[1] != TypeDelta || got[2] != TypeEnd {
		t.Errorf("decoded %v; want heartbeat, delta, end", got)
	}
	if err := Decode([]byte("{\"t\":\"delta\"}\n{broken"), func(Frame) error { return nil }); err == nil {
		t.Error("a broken frame decoded without error")
	}
}

// A batch takes no more frames once it holds MaxBatchBytes: a message is at most that and one
// frame more.
func TestBatcher_BoundsItsSize(t *testing.T) {
	more := make(chan Frame, MaxBatch)
	big := Frame{Type: TypeDelta, Job: "j", Delta: &Delta{Text: string(bytes.Repeat([]byte("x"), MaxBatchBytes/4))}}
	for range MaxBatch {
		more <- big
	}
	var b Batcher
	msg, err := b.Encode(big, more)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(msg); n < MaxBatchBytes || n > MaxBatchBytes+MaxBatchBytes/4+100 {
		t.Errorf("a batch of %d bytes; want %d and one frame more at most", n, MaxBatchBytes)
	}
	if left := len(more); left != MaxBatch-3 { // the first frame and 3 more make 1 MiB
		t.Errorf("%d frames left waiting; want %d", left, MaxBatch-3)
	}
}
