package receipt_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
)

func sum(ds ...protocol.Delta) (string, int64) {
	var h receipt.Hasher
	for _, d := range ds {
		h.Add(d)
	}
	return h.Sum(), h.Len()
}

// The hash as the Hasher's doc defines it, computed by hand.
func TestHasher_Definition(t *testing.T) {
	text := sha256.Sum256([]byte("Hello, world."))
	reasoning := sha256.Sum256([]byte("The user greets."))
	call := `{"function":{"arguments":"{\"q\":\"<b>\"}"},"index":0}`
	tools := sha256.Sum256(append(binary.BigEndian.AppendUint64(nil, uint64(len(call))), call...))
	all := sha256.Sum256([]byte("shareai-output-v1\n" + string(text[:]) + string(reasoning[:]) + string(tools[:])))
	want, wantLen := hex.EncodeToString(all[:]), int64(13+16+len(call))

	got, n := sum(
		protocol.Delta{Reasoning: "The user "},
		protocol.Delta{Reasoning: "greets.", Text: "Hello"},
		// Spaces and key order do not count in tool calls, nor does how '<' is escaped.
		protocol.Delta{ToolCalls: json.RawMessage(`{ "index": 0, "function": {"arguments": "{\"q\":\"\u003cb>\"}"} }`)},
		protocol.Delta{Text: ", world."},
	)
	if got != want || n != wantLen {
		t.Errorf("Sum, Len = %s, %d; want %s, %d", got, n, want, wantLen)
	}

	empty := sha256.Sum256(nil)
	none := sha256.Sum256([]byte("shareai-output-v1\n" + string(empty[:]) + string(empty[:]) + string(empty[:])))
	var zero receipt.Hasher
	if got := zero.Sum(); got != hex.EncodeToString(none[:]) || zero.Len() != 0 {
		t.Errorf("zero Hasher: %s, %d; want %x, 0", got, zero.Len(), none)
	}
}

// splits cuts text and reasoning into random deltas, as an agent might merge an engine's pieces:
// between characters, never inside one (as JSON carries it, a character cut in two would be
// two U+FFFD).
func splits(rng *rand.Rand, text, reasoning string) []protocol.Delta {
	tb, rb := boundaries(text), boundaries(reasoning)
	var ds []protocol.Delta
	for ti, ri := 0, 0; ti < len(tb)-1 || ri < len(rb)-1; {
		nt, nr := ti+rng.IntN(len(tb)-ti), ri+rng.IntN(len(rb)-ri)
		ds = append(ds, protocol.Delta{Pieces: rng.IntN(4), Text: text[tb[ti]:tb[nt]], Reasoning: reasoning[rb[ri]:rb[nr]]})
		ti, ri = nt, nr
	}
	return ds
}

// boundaries returns the offsets in s between characters (each invalid byte one), 0 and len(s)
// included.
func boundaries(s string) []int {
	b := []int{0}
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
		b = append(b, i)
	}
	return b
}

func TestHasher_IndependentOfSplits(t *testing.T) {
	const text, reasoning = "Paris is the capital of France. ¿Qué? 東京 🙂", "They ask about capitals."
	want, wantLen := sum(protocol.Delta{Text: text, Reasoning: reasoning})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ds := splits(rng, text, reasoning)
		if got, n := sum(ds...); got != want || n != wantLen {
			t.Fatalf("%+v: %s, %d; want %s, %d as in one delta", ds, got, n, want, wantLen)
		}
	}
}

func TestHasher_TellsOutputsApart(t *testing.T) {
	base := []protocol.Delta{{Text: "Hello, "}, {Reasoning: "think"}, {Text: "world."}}
	call := json.RawMessage(`[{"index":0,"function":{"arguments":"{}"}}]`)
	tests := []struct {
		name string
		ds   []protocol.Delta
	}{
		{"a byte of text moved to the reasoning", []protocol.Delta{{Text: "Hello,"}, {Reasoning: " think"}, {Text: "world."}}},
		{"text and reasoning swapped", []protocol.Delta{{Reasoning: "Hello, world."}, {Text: "think"}}},
		{"a byte changed", []protocol.Delta{{Text: "Hello, "}, {Reasoning: "think"}, {Text: "world!"}}},
		{"a byte dropped", []protocol.Delta{{Text: "Hello "}, {Reasoning: "think"}, {Text: "world."}}},
		{"a tool call added", append(base[:3:3], protocol.Delta{ToolCalls: call})},
		{"an empty tool call added", append(base[:3:3], protocol.Delta{ToolCalls: json.RawMessage(`[]`)})},
		{"text as a tool call's", []protocol.Delta{{Text: "Hello, "}, {Reasoning: "think"}, {ToolCalls: json.RawMessage(`"world."`)}}},
	}
	want, _ := sum(base...)
	for _, tt := range tests {
		if got, _ := sum(tt.ds...); got == want {
			t.Errorf("%s: same hash %s", tt.name, got)
		}
	}

	// Tool call deltas are counted one by one: two are not one.
	one, _ := sum(protocol.Delta{ToolCalls: json.RawMessage(`["ab"]`)})
	two, _ := sum(protocol.Delta{ToolCalls: json.RawMessage(`["a"]`)}, protocol.Delta{ToolCalls: json.RawMessage(`["b"]`)})
	if one == two {
		t.Error("one tool call delta and two hash the same")
	}
}

// The agent hashes the deltas it sends, the coordinator those it decodes from the frames: the
// JSON between them must not change the hash.
func TestHasher_SameAfterTheWire(t *testing.T) {
	sent := []protocol.Delta{
		{Text: "<b>Tom & Jerry</b> \u2028 \x00 tab\t"},
		{Reasoning: "bad UTF-8: \xff\xfe, cut: \xe6\x9d"},
		{ToolCalls: json.RawMessage(`[ {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{\"html\": \"<p>&amp;</p>\", \"n\": 1.50}"}} ]`)},
		{ToolCalls: json.RawMessage(`[{"index":0,"function":{"arguments":"\u00e9\ud83d\ude42"}}]`)},
		{Text: "end"},
	}
	var agent, coordinator receipt.Hasher
	var b protocol.Batcher
	for _, d := range sent {
		agent.Add(d)
		msg, err := b.Encode(protocol.Frame{Type: protocol.TypeDelta, Job: "job_1", Delta: &d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := protocol.Decode(msg, func(fr protocol.Frame) error {
			coordinator.Add(*fr.Delta)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if agent.Sum() != coordinator.Sum() || agent.Len() != coordinator.Len() {
		t.Errorf("agent %s (%d bytes), coordinator %s (%d bytes); want the same", agent.Sum(), agent.Len(), coordinator.Sum(), coordinator.Len())
	}
}

// FuzzHasher_Splits: however text and reasoning are cut into deltas, the hash is the same.
func FuzzHasher_Splits(f *testing.F) {
	f.Add("Hello, world.", "thinking", uint64(1))
	f.Add("\xff\xfe bad \xe6\x9d", "", uint64(7))
	f.Add("", "東京", uint64(42))
	f.Fuzz(func(t *testing.T, text, reasoning string, seed uint64) {
		want, wantLen := sum(protocol.Delta{Text: text, Reasoning: reasoning})
		ds := splits(rand.New(rand.NewPCG(seed, 0)), text, reasoning)
		if got, n := sum(ds...); got != want || n != wantLen {
			t.Errorf("%+v: %s, %d; want %s, %d", ds, got, n, want, wantLen)
		}
	})
}
