package fleet

import (
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// A reader that lags a steady number of frames behind the node, for a long answer, keeps an
// inbox as large as its lag, not as the answer.
func TestInbox_StaysAsLargeAsTheLag(t *testing.T) {
	j := &Job{ready: make(chan struct{}, 1)}
	const lag, frames = 200, 100_000
	for i := range frames {
		if !j.put(protocol.Frame{Type: protocol.TypeDelta, Credit: i}, maxDeltas) {
			t.Fatalf("frame %d refused with a lag of %d", i, lag)
		}
		if i >= lag {
			fr, ok := j.take()
			if !ok || fr.Credit != i-lag {
				t.Fatalf("took %v, %v; want frame %d in order", fr.Credit, ok, i-lag)
			}
		}
	}
	if c := cap(j.inbox); c > 4*lag {
		t.Errorf("after %d frames with a lag of %d the inbox holds room for %d frames", frames, lag, c)
	}
	for i := frames - lag; i < frames; i++ {
		if fr, ok := j.take(); !ok || fr.Credit != i {
			t.Fatalf("took %v, %v; want frame %d", fr.Credit, ok, i)
		}
	}
	if _, ok := j.take(); ok {
		t.Error("took a frame from an empty inbox")
	}
}

// A node that sends large deltas to a reader that does not read fills a job's inbox up to
// maxInboxBytes, not its window of frames times the largest delta: the next delta is refused,
// and taking a delta makes room again.
func TestInbox_BoundedInBytes(t *testing.T) {
	j := &Job{ready: make(chan struct{}, 1)}
	big := protocol.Frame{Type: protocol.TypeDelta, Delta: &protocol.Delta{Text: string(make([]byte, protocol.MaxDeltaBytes))}}
	n := 0
	for j.put(big, maxDeltas) {
		n++
	}
	if want := maxInboxBytes / protocol.MaxDeltaBytes; n != want || j.held > maxInboxBytes {
		t.Errorf("took %d deltas of %d bytes (%d held); want %d, at most %d bytes", n, protocol.MaxDeltaBytes, j.held, want, maxInboxBytes)
	}
	if !j.put(protocol.Frame{Type: protocol.TypeEnd, End: &protocol.End{}}, -1) {
		t.Error("the end frame was refused") // finish always delivers the end
	}
	j.take()
	if !j.put(big, maxDeltas) {
		t.Error("no room after a delta was taken")
	}
}
