package agent

import (
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// A character cut between an engine's pieces is never sent in halves.
func TestOutput_KeepsCharactersWhole(t *testing.T) {
	c := &conn{out: make(chan protocol.Frame, 16), done: make(chan struct{})}
	o := &output{c: c, credit: protocol.Window}
	pieces := []string{"東", "京\xe3", "\x81", "\xaf ok", " 🙂"[:3], " 🙂"[3:]}
	for _, p := range pieces {
		if err := o.Delta(protocol.Delta{Text: p}); err != nil {
			t.Fatal(err)
		}
		if err := o.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(c.out) > 0 {
		got = append(got, (<-c.out).Delta.Text)
	}
	want := []string{"東", "京", "は ok", " ", "🙂"}
	if len(got) != len(want) {
		t.Fatalf("frames %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d = %q, want %q", i, got[i], want[i])
		}
	}
	if o.sent != 6 {
		t.Errorf("%d pieces counted as sent, want 6", o.sent)
	}
}
