package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/testenv"
)

// A buyer behind an HTTP/2 proxy speaks HTTP/2 without TLS (prior knowledge): the coordinator
// serves it, streams included, one request after another on the client's connection.
func TestH2C_StreamsOverHTTP2WithoutTLS(t *testing.T) {
	env := testenv.New(t)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions",
			strings.NewReader(`{"model":"sim/llama-3.1-8b","stream":true,"messages":[{"role":"user","content":"over h2c"}]}`))
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
			t.Fatalf("request %d: %s %d, body ends %q; want a whole stream over HTTP/2", i, resp.Proto, resp.StatusCode, body[max(0, len(body)-40):])
		}
	}
}
