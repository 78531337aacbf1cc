package relay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

// A tool call streamed in fragments is counted as the model wrote it: its name, its
// arguments and the JSON around them once a call, not the JSON of every fragment, nor a
// wrapper for every fragment that repeats the name.
func TestState_AsideToolCalls(t *testing.T) {
	var st State
	for _, d := range []string{
		`[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]`,
		`[{"index":0,"function":{"arguments":"{\"city\":"}}]`,
		`[{"index":0,"function":{"name":"get_weather","arguments":"\"Paris\"}"}}]`,
	} {
		if err := st.aside(&protocol.Delta{ToolCalls: json.RawMessage(d)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := st.Aside.String(), `{"name": "get_weather", "arguments": {"city":"Paris"}`; got != want || !st.Other {
		t.Errorf("aside %q (other %v), want %q", got, st.Other, want)
	}
}

// Tool calls that are not OpenAI's are the node's fault, and leave the state as it was.
func TestState_AsideRefusesBadToolCalls(t *testing.T) {
	for _, raw := range []string{`{"x":1}`, `not json`, `[{"index":500}]`, `[{"index":-1}]`} {
		var st State
		err := st.aside(&protocol.Delta{Reasoning: "r", ToolCalls: json.RawMessage(raw)})
		if !errors.Is(err, ErrBadToolCalls) || st.Other || st.Aside.Len() != 0 {
			t.Errorf("tool calls %s: %v, other %v, aside %q; want ErrBadToolCalls and nothing recorded", raw, err, st.Other, st.Aside.String())
		}
	}
}
