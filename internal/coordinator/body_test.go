package coordinator

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// halfBody sends a request's headers and half its body to addr, and returns the connection.
func halfBody(t *testing.T, addr, key string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	half := "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body[:len(body)/2]
	if _, err := io.WriteString(conn, half); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A client that sends half a body is answered 408 and its connection closed once the body
// timeout has passed, not held open.
func TestServe_HalfSentBody(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := sqlstoretest.Open(t, "sqlite")
	acct := &store.Account{ID: store.NewID("acct"), Name: "buyer", CreatedAt: time.Now()}
	if err := db.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	secret, k := store.NewKey(acct.ID, store.KeyBuyer, "key", time.Now())
	if err := db.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	c := New(Config{Store: db, BodyTimeout: timeout, DrainTimeout: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	start := time.Now()
	conn := halfBody(t, ln.Addr().String(), secret)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound, far above the timeout
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a half-sent body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"request_timeout"`) {
		t.Errorf("half-sent body: %d %s; want 408 request_timeout", resp.StatusCode, b)
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("answered after %v, before the body timeout of %v", waited, timeout)
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after the 408, read %v; want the connection closed", err)
	}
}

// The body timeout bounds requests, not answers: with the coordinator's server, an answer
// streamed for longer than it runs to its end on HTTP/1.1 and on HTTP/2 without TLS, and so
// does a hijacked connection (the agents' WebSockets).
func TestServer_LongAnswer(t *testing.T) {
	const timeout = 50 * time.Millisecond
	c := New(Config{Store: sqlstoretest.Open(t, "sqlite"), BodyTimeout: timeout})
	defer c.closeBilling()
	srv := c.server()
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			echo(t, w)
			return
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for range 4 { // a stream, past the timeout
			select {
			case <-r.Context().Done():
				return
			case <-time.After(timeout):
			}
			io.WriteString(w, "data: piece\n\n")
			rc.Flush()
		}
		io.WriteString(w, "done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	for _, tt := range []struct {
		proto     string
		transport *http.Transport
	}{
		{"HTTP/1.1", &http.Transport{}},
		{"HTTP/2.0", &http.Transport{Protocols: &h2c}},
	} {
		t.Run(tt.proto, func(t *testing.T) {
			resp, err := (&http.Client{Transport: tt.transport}).Post(url, "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.Proto != tt.proto || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "done") || strings.Count(string(b), "piece") != 4 {
				t.Errorf("a long answer: %s %d %q; want all of it over %s", resp.Proto, resp.StatusCode, b, tt.proto)
			}
		})
	}
	t.Run("hijacked", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: coordinator\r\n\r\n")
		time.Sleep(3 * timeout) // the client speaks after the timeout
		io.WriteString(conn, "ping\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if line, err := bufio.NewReader(conn).ReadString('\n'); line != "ping\n" {
			t.Errorf("the hijacked connection answered %q, %v; want ping", line, err)
		}
	})
}

// echo hijacks the connection, as a WebSocket upgrade does, and echoes its first line.
func echo(t *testing.T, w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	line, err := rw.ReadString('\n')
	if err != nil {
		t.Errorf("read on the hijacked connection: %v", err)
		return
	}
	io.WriteString(conn, line)
}
