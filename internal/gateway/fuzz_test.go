package gateway_test

import (
	"net/http"
	"testing"

	"github.com/shareai/shareai/internal/testenv"
)

// FuzzRequest sends buyers' request bodies, chat and legacy completions, to a test network
// (one per fuzzing process): none may make the gateway panic or answer a server error, and
// whatever it answers is in OpenAI's shape. The one 5xx a body may earn is the documented 503
// no_provider_available, for routing that excludes every node. The seeds run with go test.
func FuzzRequest(f *testing.F) {
	chat := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":8`
	completion := `{"model":"` + model + `","prompt":"Once","max_tokens":8`
	for _, s := range []struct {
		completion bool
		body       string
	}{
		{false, chat + `}`},
		{false, chat + `,"stream":true,"stream_options":{"include_usage":true},"service_tier":"priority"}`},
		{false, chat + `,"provider":{"sort":"latency","allow_fallbacks":false,"order":["x"]},"models":["sim/qwen-2.5-7b"]}`},
		{false, chat + `,"provider":{"only":["nobody"]}}`},
		{false, chat + `,"provider":{"max_price":{"prompt":"0.01","completion":1}},"service_tier":"flex"}`},
		{false, chat + `,"models":["nope","` + model + `"],"service_tier":"auto","user":"u"}`},
		{false, chat + toolsRequest + `,"parallel_tool_calls":true}`},
		{false, chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`},
		{false, chat + `,"max_token":1}`},
		{false, `{"model":"` + model + `","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]}]}`},
		{false, `{"model":1,"messages":{}}`},
		{true, completion + `}`},
		{true, completion + `,"stream":true,"service_tier":"default","provider":{"quantizations":["q4"]}}`},
		{true, completion + `,"models":["sim/qwen-2.5-7b"],"stop":["\n"],"seed":-1}`},
		{true, `[`},
	} {
		f.Add(s.completion, s.body)
	}
	env := testenv.New(f, testenv.Providers(1))
	spec := loadOpenAPI(f)
	f.Fuzz(func(t *testing.T, completion bool, body string) {
		path := "/chat/completions"
		if completion {
			path = "/completions"
		}
		status, resp := rawRequest(t, env, http.MethodPost, path, body)
		if status == http.StatusOK {
			spec.validateAnswer(t, path, resp)
			return
		}
		spec.validate(t, errorSchema, resp)
		e := errorOf(t, resp)
		if status >= 500 && !(status == http.StatusServiceUnavailable && orEmpty(e.Code) == "no_provider_available") {
			t.Fatalf("%d %s for %s", status, resp, body)
		}
	})
}
