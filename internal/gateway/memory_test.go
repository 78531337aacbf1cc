package gateway_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/testenv"
)

// slowStream is a streamed chat request whose answer lasts minutes at the slow engine's pace.
const slowStream = `{"model":"sim/llama-3.1-8b","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"a slow answer"}]}`

// openStreams sends n streamed requests with client and reads each up to its given piece of
// content: the streams are then open, waiting for their next piece. The caller closes them.
func openStreams(t *testing.T, env *testenv.Env, client *http.Client, n, pieces int) []*http.Response {
	t.Helper()
	type opened struct {
		resp *http.Response
		err  error
	}
	ch := make(chan opened, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(slowStream))
			req.Header.Set("Authorization", "Bearer "+env.APIKey)
			resp, err := client.Do(req)
			if err == nil && resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				err = &statusError{resp.StatusCode, string(body)}
			}
			if err == nil {
				err = readContent(resp.Body, pieces)
			}
			ch <- opened{resp, err}
		}()
	}
	var resps []*http.Response
	t.Cleanup(func() {
		for _, r := range resps {
			r.Body.Close()
		}
	})
	for range n {
		o := <-ch
		if o.err != nil {
			t.Fatalf("open a stream: %v", o.err)
		}
		resps = append(resps, o.resp)
	}
	return resps
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// readContent reads a stream up to its given chunk with content.
func readContent(body io.Reader, pieces int) error {
	br := bufio.NewReaderSize(body, 512)
	for pieces > 0 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.Contains(line, []byte(`"content":"`)) && !bytes.Contains(line, []byte(`"content":""`)) {
			pieces--
		}
	}
	return nil
}

// servingGoroutines counts the goroutines that serve buyers' requests in the coordinator: those
// running net/http's server, the gateway, the core or the relay (not the agents', nor the
// clients').
func servingGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, f := range []string{"net/http.(*conn).serve", "net/http.(*http2serverConn)", "net/http.(*connReader).backgroundRead",
			"shareai/internal/gateway.", "shareai/internal/core.", "shareai/internal/relay."} {
			if strings.Contains(g, f) {
				n++
				break
			}
		}
	}
	return n
}

// servingHeap is the live heap allocated on the coordinator's paths (net/http's server, the
// gateway, the request core, the relay, the fleet, the ledger), as the heap profile records
// it, in bytes. It samples every allocation from its first call on (runtime.MemProfileRate 1).
func servingHeap() int64 {
	runtime.MemProfileRate = 1
	runtime.GC()
	runtime.GC() // the profile is as of the last cycle but one
	var recs []runtime.MemProfileRecord
	for n := 1024; ; n *= 2 {
		recs = make([]runtime.MemProfileRecord, n)
		got, ok := runtime.MemProfile(recs, false)
		if ok {
			recs = recs[:got]
			break
		}
	}
	var sum int64
	for i := range recs {
		if serving(recs[i].Stack()) {
			sum += recs[i].InUseBytes()
		}
	}
	return sum
}

// serving says whether an allocation's stack is the coordinator's.
func serving(stack []uintptr) bool {
	frames := runtime.CallersFrames(stack)
	found := false
	for {
		f, more := frames.Next()
		name := f.Function
		switch {
		case strings.Contains(name, "shareai/internal/agent."), strings.Contains(name, "shareai/internal/engine"),
			strings.HasPrefix(name, "net/http.(*Transport)"), strings.HasPrefix(name, "net/http.(*persistConn)"),
			strings.HasPrefix(name, "net/http.(*http2Transport)"), strings.HasPrefix(name, "net/http.(*http2ClientConn)"),
			strings.HasPrefix(name, "net/http.(*http2clientStream)"), strings.Contains(name, "gateway_test."):
			return false
		case strings.HasPrefix(name, "net/http.(*conn)"), strings.HasPrefix(name, "net/http.(*http2serverConn)"),
			strings.HasPrefix(name, "net/http.(*Server)"), strings.HasPrefix(name, "net/http.(*response)"),
			strings.HasPrefix(name, "net/http.(*http2responseWriter"), strings.HasPrefix(name, "net/http.(*http2Server)"),
			strings.Contains(name, "shareai/internal/gateway."), strings.Contains(name, "shareai/internal/core."),
			strings.Contains(name, "shareai/internal/relay."), strings.Contains(name, "shareai/internal/fleet."),
			strings.Contains(name, "shareai/internal/ledger."), strings.Contains(name, "shareai/internal/requestid."):
			found = true
		}
		if !more {
			return found
		}
	}
}

// What an open stream costs the coordinator: one goroutine, its request's, over HTTP/2 and
// over HTTP/1.1 (on Linux, where one goroutine polls every stream's connection for the buyer
// going away; elsewhere a second goroutine a stream reads it), and a bounded live heap,
// measured on the coordinator's own paths (an HTTP/1.1 stream held past its takeover holds
// none of net/http's connection buffers). The bounds are about twice the figures measured
// when they were set (HTTP/1.1: 9.6 KiB, HTTP/2: 12.8 KiB, of which net/http's HTTP/2 stream
// buffer is 4 KiB): a change that keeps another buffer, copy or goroutine per open stream
// fails here.
func TestOpenStreams_GoroutinesAndHeap(t *testing.T) {
	const streams = 100
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	h1Goroutines := 1.0
	if runtime.GOOS != "linux" {
		h1Goroutines = 2
	}
	for _, tt := range []struct {
		name          string
		transport     *http.Transport
		proto         int // the HTTP major version the streams must come over
		maxGoroutines float64
		maxHeap       float64 // bytes a stream
		// pieces is how many pieces of each stream are read before the count: an HTTP/1.1
		// stream takes its connection over 100 ms past its header (h1stream.go), well
		// before its second piece, 2 s after the first.
		pieces int
	}{
		{"HTTP/1.1", &http.Transport{}, 1, h1Goroutines, 20 << 10, 2},
		{"HTTP/2", &http.Transport{Protocols: &h2c}, 2, 1, 26 << 10, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
				c.Agent.MaxConcurrent = streams + 10
				c.Sim = sim.Config{TokensPerSecond: 0.5} // the answer lasts minutes: streams stay open
			})
			client := &http.Client{Transport: tt.transport}
			defer tt.transport.CloseIdleConnections()
			openStreams(t, env, client, 1, tt.pieces) // warm up: the connection, the pools, the matcher's index
			goroutines, heap := servingGoroutines(), servingHeap()
			resps := openStreams(t, env, client, streams, tt.pieces)
			perGoroutines := float64(servingGoroutines()-goroutines) / streams
			perHeap := float64(servingHeap()-heap) / streams
			t.Logf("%s: %.2f goroutines and %.1f KiB of the coordinator's heap per open stream", tt.name, perGoroutines, perHeap/1024)
			if perGoroutines > tt.maxGoroutines+0.1 {
				t.Errorf("%.2f goroutines per open stream; want at most %v", perGoroutines, tt.maxGoroutines)
			}
			if perHeap > tt.maxHeap {
				t.Errorf("%.1f KiB of live heap per open stream; want at most %.0f KiB", perHeap/1024, tt.maxHeap/1024)
			}
			for _, r := range resps {
				if r.ProtoMajor != tt.proto {
					t.Fatalf("a stream over %s; want %s", r.Proto, tt.name)
				}
			}
		})
	}
}

// An HTTP/1.1 stream takes its connection over from net/http, and gives it back whole: the
// same connection carries stream after stream, and answers not streamed, each with its
// headers and the cost trailer.
func TestStream_HTTP1ConnectionKeptAlive(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	transport := &http.Transport{MaxConnsPerHost: 1}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	for i, body := range []string{
		`{"model":"sim/llama-3.1-8b","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"one"}]}`,
		`{"model":"sim/llama-3.1-8b","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"two"}]}`,
		`{"model":"sim/llama-3.1-8b","max_tokens":5,"messages":[{"role":"user","content":"three"}]}`,
		`{"model":"sim/llama-3.1-8b","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"four"}]}`,
	} {
		reused := false
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, %v: %s", i, resp.StatusCode, err, got)
		}
		if i > 0 && !reused {
			t.Errorf("request %d came on a new connection; want the one before, kept alive", i)
		}
		if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Shareai-Node") == "" {
			t.Errorf("request %d: header %v; want the request id and the node", i, resp.Header)
		}
		if !strings.Contains(body, `"stream":true`) {
			continue
		}
		if !strings.HasSuffix(string(got), "data: [DONE]\n\n") || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("request %d: %s, body ends %q; want a whole stream", i, resp.Header.Get("Content-Type"), got[max(0, len(got)-30):])
		}
		if resp.Trailer.Get(relay.HeaderCost) == "" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("request %d: trailer %v, transfer encoding %v; want the cost, chunked", i, resp.Trailer, resp.TransferEncoding)
		}
	}
}
