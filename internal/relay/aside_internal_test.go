package relay

import (
	"encoding/json"
	"strings"
	"testing"
)

// A tool call streamed in fragments is counted as the model wrote it: its name, its
// arguments and the JSON around them once, not the JSON of every fragment.
func TestAsideToolCalls(t *testing.T) {
	var b strings.Builder
	for _, d := range []string{
		`[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]`,
		`[{"index":0,"function":{"arguments":"{\"city\":"}}]`,
		`[{"index":0,"function":{"arguments":"\"Paris\"}"}}]`,
		`not json`,
	} {
		asideToolCalls(&b, json.RawMessage(d))
	}
	if got, want := b.String(), `{"name": "get_weather", "arguments": {"city":"Paris"}not json`; got != want {
		t.Errorf("aside %q, want %q", got, want)
	}
}
