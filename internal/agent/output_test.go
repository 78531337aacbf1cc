package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

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

// An engine's piece longer than a delta may carry goes in several frames, cut between
// characters, with the pieces counted on the last; the text arrives whole, and the answer's
// last delta (which rides on the end frame) is cut the same way.
func TestOutput_CutsLongText(t *testing.T) {
	long := strings.Repeat("東", protocol.MaxDeltaBytes/3+5) + "x"
	for _, last := range []bool{false, true} {
		c := &conn{out: make(chan protocol.Frame, 16), done: make(chan struct{})}
		o := &output{c: c, ctx: context.Background(), credit: protocol.Window}
		if err := o.Delta(protocol.Delta{Text: long, Reasoning: "r"}); err != nil {
			t.Fatal(err)
		}
		var deltas []*protocol.Delta
		var end *protocol.Delta // the delta on the end frame, after those sent before
		if last {
			end = o.last()
		} else if err := o.Flush(); err != nil {
			t.Fatal(err)
		}
		for len(c.out) > 0 {
			deltas = append(deltas, (<-c.out).Delta)
		}
		if end != nil {
			deltas = append(deltas, end)
		}
		var text, reasoning strings.Builder
		pieces := 0
		for _, d := range deltas {
			if n := len(d.Text) + len(d.Reasoning) + len(d.ToolCalls); n > protocol.MaxDeltaBytes {
				t.Errorf("a delta of %d bytes; want at most %d", n, protocol.MaxDeltaBytes)
			}
			if !utf8.ValidString(d.Text) {
				t.Errorf("a delta's text is cut inside a character: %q…", d.Text[len(d.Text)-3:])
			}
			text.WriteString(d.Text)
			reasoning.WriteString(d.Reasoning)
			pieces += d.Pieces
		}
		if len(deltas) < 2 || text.String() != long || reasoning.String() != "r" || pieces != 1 {
			t.Errorf("last %v: %d deltas of %d bytes of text, reasoning %q, %d pieces; want the text whole in several, reasoning \"r\", 1 piece",
				last, len(deltas), text.Len(), reasoning.String(), pieces)
		}
	}
}

// Tool calls too long for one delta fail the job: they cannot be cut.
func TestOutput_RefusesHugeToolCalls(t *testing.T) {
	c := &conn{out: make(chan protocol.Frame, 16), done: make(chan struct{})}
	o := &output{c: c, ctx: context.Background(), credit: protocol.Window}
	huge := json.RawMessage(`[{"function":{"arguments":"` + strings.Repeat("a", protocol.MaxDeltaBytes) + `"}}]`)
	if err := o.Delta(protocol.Delta{ToolCalls: huge}); !errors.Is(err, errToolCallsTooLarge) {
		t.Errorf("tool calls of %d bytes: %v; want errToolCallsTooLarge", len(huge), err)
	}
	if len(c.out) != 0 {
		t.Errorf("%d frames sent; want none", len(c.out))
	}
}
