package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/relay"
)

// h1Server serves every request with a stream of two chunks written through an h1Stream (the
// second once gate, if any, is closed) and the cost trailer. When a request's context ends
// before its stream does, the cause goes on causes.
type h1Server struct {
	*httptest.Server
	g      Gateway
	m      takeover
	causes chan error
	gate   chan struct{} // closed: the second chunk goes; nil: at once
	tlsIDs chan bool     // whether each request came over TLS
}

func newH1Server(t *testing.T, m takeover, useTLS bool, gate chan struct{}, configure func(*http.Server)) *h1Server {
	t.Helper()
	s := &h1Server{m: m, causes: make(chan error, 10), gate: gate, tlsIDs: make(chan bool, 10)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if configure != nil {
		configure(s.Server.Config)
	}
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *h1Server) serve(w http.ResponseWriter, r *http.Request) {
	s.tlsIDs <- r.TLS != nil
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	h := s.g.newH1Stream(w, r, cancel)
	h.after = s.m.after
	defer h.finish()
	h.Header().Set("Content-Type", "text/event-stream")
	h.Header().Set("Trailer", relay.HeaderCost)
	h.WriteHeader(http.StatusOK)
	h.Write([]byte("data: one\n\n"))
	h.FlushError()
	if s.m.mid {
		h.takeOverLater() // as its timer does
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			s.causes <- context.Cause(ctx)
			return
		}
	}
	h.Write([]byte("data: two\n\n"))
	h.Header().Set(relay.HeaderCost, "0.000001")
	h.FlushError()
}

// takeover is when the streams of a test take their connections over: the tests run in each.
type takeover struct {
	name  string
	after time.Duration // h1Stream.after
	mid   bool          // the takeover comes between the first chunk and the second
}

var takeovers = []takeover{
	{name: "at the header"},
	{name: "mid-stream", after: time.Hour, mid: true},
	{name: "by its timer", after: time.Nanosecond}, // racing the handler's first writes
	{name: "never", after: time.Hour},              // net/http's from start to end
}

// eachTakeover runs test once for each takeover.
func eachTakeover(t *testing.T, test func(t *testing.T, m takeover)) {
	for _, m := range takeovers {
		t.Run(m.name, func(t *testing.T) { test(t, m) })
	}
}

// request writes a streamed request on conn.
func request(t *testing.T, conn net.Conn) {
	t.Helper()
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

// response reads a streamed response from br up to its first chunk, and returns the rest.
func response(t *testing.T, br *bufio.Reader) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the response: %v", err)
	}
	first := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: one\n\n" {
		t.Fatalf("first chunk %q, %v", first, err)
	}
	return resp
}

// rest reads the rest of a response, and checks it.
func rest(t *testing.T, resp *http.Response) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "data: two\n\n" || resp.Trailer.Get(relay.HeaderCost) != "0.000001" {
		t.Fatalf("rest %q (%v), trailer %v; want the second chunk and the cost", body, err, resp.Trailer)
	}
}

// closed waits until the server closes conn, failing the test after 10 seconds.
func closed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want the connection closed", b, err)
	}
}

// A buyer who closes the connection mid-stream ends the request's context: the stream's watch
// does once it has taken the connection over, net/http's own before.
func TestH1Stream_BuyerGoneCancels(t *testing.T) {
	eachTakeover(t, func(t *testing.T, m takeover) {
		s := newH1Server(t, m, false, make(chan struct{}), nil)
		conn, br := dial(t, s)
		request(t, conn)
		response(t, br)
		conn.Close()
		select {
		case cause := <-s.causes:
			// The stream's watch ends it once it has the connection, net/http before.
			taken, kept := errors.Is(cause, errBuyerGone), errors.Is(cause, context.Canceled)
			switch {
			case m.after == 0 || m.mid:
				kept = false
			case m.after == time.Hour:
				taken = false
			}
			if !taken && !kept {
				t.Errorf("the request's context ended with %v", cause)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the request's context did not end after the buyer went away")
		}
	})
}

// dial connects to s, over TLS when it serves TLS, speaking HTTP/1.1.
func dial(t *testing.T, s *h1Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	var (
		conn net.Conn
		err  error
	)
	if s.TLS != nil {
		conn, err = tls.Dial("tcp", s.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	} else {
		conn, err = net.Dial("tcp", s.Listener.Addr().String())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// A connection whose stream ended serves the next request, also one sent before the stream
// ended; over TLS too, where the next request still reads as TLS. The server closes it once
// it has been idle for its idle timeout.
func TestH1Stream_NextRequests(t *testing.T) {
	eachTakeover(t, func(t *testing.T, m takeover) { testNextRequests(t, m) })
}

func testNextRequests(t *testing.T, m takeover) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "TCP", true: "TLS"}[useTLS], func(t *testing.T) {
			gate := make(chan struct{})
			s := newH1Server(t, m, useTLS, gate, func(srv *http.Server) { srv.IdleTimeout = 100 * time.Millisecond })
			conn, br := dial(t, s)
			request(t, conn)
			first := response(t, br)
			request(t, conn) // before the first stream has ended
			close(gate)
			rest(t, first)
			rest(t, response(t, br))
			request(t, conn) // after
			rest(t, response(t, br))
			for i := range 3 {
				if got := <-s.tlsIDs; got != useTLS {
					t.Errorf("request %d over TLS: %v; want %v", i, got, useTLS)
				}
			}
			closed(t, conn, br)
		})
	}
}

// A buyer who asks for the connection to close after the answer is told so, and it closes.
func TestH1Stream_ConnectionClose(t *testing.T) {
	eachTakeover(t, func(t *testing.T, m takeover) {
		s := newH1Server(t, m, false, nil, nil)
		conn, br := dial(t, s)
		io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		resp := response(t, br)
		if !resp.Close {
			t.Errorf("response header %v; want Connection: close", resp.Header)
		}
		rest(t, resp)
		closed(t, conn, br)
	})
}

// A connection waiting for its next request closes when the server shuts down, as net/http's
// idle connections do; the shutdown does not wait for it.
func TestH1Stream_ShutdownClosesIdle(t *testing.T) {
	eachTakeover(t, func(t *testing.T, m takeover) {
		s := newH1Server(t, m, false, nil, nil)
		conn, br := dial(t, s)
		request(t, conn)
		rest(t, response(t, br))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Config.Shutdown(ctx); err != nil {
			t.Errorf("shut down: %v", err)
		}
		closed(t, conn, br)
	})
}

// Two requests written at once (pipelined): net/http has read the second with the first when
// the stream takes the connection over, and the connection serves it once the first answer
// has ended, in order.
func TestH1Stream_Pipelined(t *testing.T) {
	eachTakeover(t, func(t *testing.T, m takeover) {
		s := newH1Server(t, m, false, nil, nil)
		conn, br := dial(t, s)
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Length: 0\r\n\r\n"
		if _, err := io.WriteString(conn, req+req); err != nil {
			t.Fatal(err)
		}
		rest(t, response(t, br))
		rest(t, response(t, br))
		request(t, conn) // and the connection goes on
		rest(t, response(t, br))
	})
}

// A stream is taken over only once it has been open for its delay: one that ends sooner is
// net/http's throughout (no hijack, which a short answer would pay for nothing), and one held
// open past it is taken over while it waits for its next piece.
func TestH1Stream_TakenOverOnlyWhenHeld(t *testing.T) {
	hijacked := func(srv *http.Server) chan struct{} {
		ch := make(chan struct{}, 10)
		srv.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateHijacked {
				ch <- struct{}{}
			}
		}
		return ch
	}
	var short chan struct{}
	s := newH1Server(t, takeover{after: time.Hour}, false, nil, func(srv *http.Server) { short = hijacked(srv) })
	conn, br := dial(t, s)
	request(t, conn)
	rest(t, response(t, br))
	request(t, conn) // the connection is still net/http's, kept alive
	rest(t, response(t, br))
	if len(short) != 0 {
		t.Error("a stream that ended before its delay was taken over")
	}

	gate := make(chan struct{})
	var held chan struct{}
	s = newH1Server(t, takeover{after: time.Millisecond}, false, gate, func(srv *http.Server) { held = hijacked(srv) })
	conn, br = dial(t, s)
	request(t, conn)
	resp := response(t, br)
	select {
	case <-held: // taken over while the stream waits for its second chunk
	case <-time.After(10 * time.Second):
		t.Fatal("a stream held open past its delay was not taken over")
	}
	close(gate)
	rest(t, resp)
}
