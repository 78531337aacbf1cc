package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
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

// Decode reads NDJSON line by line, and what is not one value a line as a stream, as a
// json.Decoder would: several values on a line, a value over several lines, blank lines.
func TestDecode_ReadsEveryLayout(t *testing.T) {
	for _, msg := range []string{
		`{"t":"heartbeat"}` + "\n" + `{"t":"delta","job":"a"}` + "\n" + `{"t":"end","job":"a"}` + "\n",
		`{"t":"heartbeat"}` + "\n\n" + `{"t":"delta","job":"a"}{"t":"end","job":"a"}`,
		`{"t":"heartbeat"}` + "\n" + "{\n  \"t\": \"delta\",\n  \"job\": \"a\"\n}\n \n" + `{"t":"end","job":"a"}` + "\n",
	} {
		var got []string
		if err := Decode([]byte(msg), func(fr Frame) error { got = append(got, fr.Type+fr.Job); return nil }); err != nil {
			t.Errorf("%q: %v", msg, err)
			continue
		}
		if !slices.Equal(got, []string{"heartbeat", "deltaa", "enda"}) {
			t.Errorf("%q decoded as %q; want heartbeat, delta of a, end of a", msg, got)
		}
	}
	for _, msg := range []string{`{"t":"delta"}` + "\n" + `{"t":"end","job":1}`, `{"t":"delta"} x`, `[]`} {
		if err := Decode([]byte(msg), func(Frame) error { return nil }); err == nil || !strings.HasPrefix(err.Error(), "bad frame: ") {
			t.Errorf("%q: err %v; want a bad frame", msg, err)
		}
	}
}

// Messages reuses its buffer for messages up to keptMessageBytes, and drops a larger one's.
func TestMessages_ReuseTheirBuffer(t *testing.T) {
	var m Messages
	first, err := m.Read(iotest.OneByteReader(strings.NewReader("first message")))
	if err != nil || string(first) != "first message" {
		t.Fatalf("read %q, %v", first, err)
	}
	second, _ := m.Read(strings.NewReader("second"))
	if string(second) != "second" || &first[0] != &second[0] {
		t.Errorf("second message %q in a new buffer; want %q in the first's", second, "second")
	}
	big := strings.Repeat("x", keptMessageBytes+1)
	if got, _ := m.Read(strings.NewReader(big)); string(got) != big || m.buf != nil {
		t.Errorf("a message of %d bytes read as %d, buffer kept: %v; want it whole and not kept", len(big), len(got), m.buf != nil)
	}
	if _, err := m.Read(iotest.ErrReader(io.ErrUnexpectedEOF)); err != io.ErrUnexpectedEOF {
		t.Errorf("a failing reader gave %v", err)
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
