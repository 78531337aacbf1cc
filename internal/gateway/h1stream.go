package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h1Stream is the response writer of a streamed answer over HTTP/1.1. Once the stream has been
// open for takeoverAfter (a timer started with its header) it takes the connection over from
// net/http (Hijack), after net/http has sent what it holds, and writes the rest of the chunked
// body itself, so that a stream held open for minutes keeps none of net/http's per-connection
// buffers (4 KiB to read requests, 4 KiB to write, 2 KiB before chunking: about 10 KiB a
// stream), nor net/http's goroutine reading the connection in the background. An answer that
// ends sooner, as short ones do, is net/http's from start to end and costs no takeover (the
// hijack, the watch, and a new server connection for the next request: about 8% of a short
// stream's CPU). Its watch does
// what that read does: it ends the request's context when the buyer goes away, and once the
// answer is whole it waits for the connection's next request and gives the connection back to
// the server for it (keep-alive), or closes it. On Linux watch starts only once the connection
// has something to read, which one goroutine polls for all streams (h1watch_linux.go): an
// open stream's only goroutine is then its request's.
//
// Until it takes the connection over, and where the connection cannot be taken over (a
// recorder in a test), it is its ResponseWriter.
type h1Stream struct {
	w      http.ResponseWriter // the request's; its header map holds the stream's headers
	srv    *http.Server        // that serves the request, to give the connection back to
	held   *heldConns          // the connections waiting for their next request
	closes bool                // the buyer asked for the connection to close after the answer
	cancel context.CancelCauseFunc
	// after is how long past its header the stream is left to net/http. 0: it is taken over
	// before its header; negative: never (the connection could not be taken).
	after time.Duration
	// mu orders the takeover's timer against the handler's writes: every use of w and of the
	// fields below is under it.
	mu    sync.Mutex
	timer *time.Timer // the takeover's, from the header on

	wroteHeader bool
	conn        net.Conn // once taken over; nil: w writes
	out         []byte   // written, not yet flushed: a buffer of the chunk pool, nil when empty
	err         error    // the first write's error: every later write fails with it
	finished    bool     // the last chunk and the trailers are written
	// ended is closed when the answer is over on the writer's side: watch then owns the
	// connection. reuse, set before, says whether the connection may serve another request.
	ended chan struct{}
	reuse bool
	// next is what net/http had read of the connection's next request when the stream took
	// it over (a request sent before this answer ended): the connection goes back to the
	// server with it once the answer ends, with no watch meanwhile.
	next []byte
	// polled is the stream's place in the poller of connections (h1watch_linux.go), which
	// starts watch when the connection becomes readable.
	polled polled
}

// newH1Stream returns the writer of a streamed answer to r, an HTTP/1.1 request, on w. cancel
// ends r's context as Serve sees it (the buyer went away).
func (g *Gateway) newH1Stream(w http.ResponseWriter, r *http.Request, cancel context.CancelCauseFunc) *h1Stream {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv != nil {
		g.held.watch(srv)
	}
	return &h1Stream{w: w, srv: srv, held: &g.held, closes: r.Close, cancel: cancel, after: takeoverAfter}
}

// takeoverAfter is how long a stream is left to net/http: long enough for an answer the node
// has at once to end (within milliseconds), short against the minutes a slow stream is held
// open. Meanwhile it keeps net/http's buffers and reading goroutine, about 18 KiB: streams
// opened at a rate of N a second hold N × 1.8 KiB more, and 10,000 streams opened within 8 s
// took about 5% more RSS (scripts/stream-memory.sh).
const takeoverAfter = 100 * time.Millisecond

// errBuyerGone ends the context of a request whose buyer closed the connection.
var errBuyerGone = errors.New("buyer closed the connection")

// Header returns the response's header map.
func (s *h1Stream) Header() http.Header { return s.w.Header() }

// Unwrap returns the request's ResponseWriter, for http.ResponseController.
func (s *h1Stream) Unwrap() http.ResponseWriter { return s.w }

// WriteHeader writes the response's header: through net/http, starting the takeover's timer,
// or, when the stream is taken over at once, itself, with the chunked transfer coding.
func (s *h1Stream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeader(code)
}

func (s *h1Stream) writeHeader(code int) {
	if s.wroteHeader {
		return
	}
	s.wroteHeader = true
	if s.after == 0 {
		s.takeOver(code)
		return
	}
	s.w.WriteHeader(code)
	if s.after > 0 {
		s.timer = time.AfterFunc(s.after, s.takeOverLater)
	}
}

// takeOverLater takes over the connection of a stream that is still open, once net/http has
// sent what it holds: the takeover's timer calls it.
func (s *h1Stream) takeOverLater() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil // fired: the stream keeps none
	if s.finished || s.conn != nil || s.after < 0 {
		return
	}
	if http.NewResponseController(s.w).Flush() != nil {
		return // the buyer is gone: net/http ends the request
	}
	s.takeOver(0)
}

// takeOver takes the connection over from net/http: before the response's header (code), which
// it then writes, or mid-stream (code 0), once net/http has sent all it was given. Where the
// connection cannot be taken, net/http keeps writing the response.
func (s *h1Stream) takeOver(code int) {
	conn, rw, err := http.NewResponseController(s.w).Hijack()
	if err != nil {
		s.after = -1
		if code != 0 {
			s.w.WriteHeader(code) // net/http writes it all
		}
		return
	}
	s.conn = conn
	// Bytes net/http read past this request: the next one's, sent before this answer ended
	// (pipelined), or its first byte, read by net/http's watch for the buyer going away.
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		s.next = bytes.Clone(b)
	}
	// net/http's buffers are the caller's now; zeroed, they let go of their 4 KiB each, which
	// net/http's connection, still on the stack below the handler, would keep.
	*rw.Reader = bufio.Reader{}
	*rw.Writer = bufio.Writer{}
	s.ended = make(chan struct{})
	s.reuse = true
	if code == 0 {
		s.watchIdle()
		return
	}

	b := getChunk()
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\n"...)
	h := s.w.Header()
	h.WriteSubset((*appender)(&b), excludedHeaders)
	if _, ok := h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
		b = append(b, "\r\n"...)
	}
	if s.closes {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "Transfer-Encoding: chunked\r\n\r\n"...)
	s.out = b
	s.watchIdle()
}

// watchIdle watches the connection for the buyer going away or its next request, unless the
// next request has begun already.
func (s *h1Stream) watchIdle() {
	if s.next == nil {
		s.startWatch()
	}
}

// excludedHeaders are the handler's headers a stream's header leaves out: it writes its own
// framing.
var excludedHeaders = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Connection": true}

// Write adds p to the body, as one chunk: it is sent at the next flush.
func (s *h1Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wroteHeader {
		s.writeHeader(http.StatusOK)
	}
	if s.conn == nil {
		return s.w.Write(p)
	}
	if s.err != nil {
		return 0, s.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if s.out == nil {
		s.out = getChunk()
	}
	s.out = strconv.AppendInt(s.out, int64(len(p)), 16)
	s.out = append(s.out, "\r\n"...)
	s.out = append(s.out, p...)
	s.out = append(s.out, "\r\n"...)
	return len(p), nil
}

// FlushError sends what was written to the buyer.
func (s *h1Stream) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flush()
}

func (s *h1Stream) flush() error {
	if !s.wroteHeader {
		s.writeHeader(http.StatusOK)
	}
	if s.conn == nil {
		return http.NewResponseController(s.w).Flush()
	}
	if s.err == nil && len(s.out) > 0 {
		_, s.err = s.conn.Write(s.out)
	}
	putChunk(s.out)
	s.out = nil
	return s.err
}

// Flush is FlushError, for http.Flusher.
func (s *h1Stream) Flush() { s.FlushError() }

// finish ends the response, once the handler is done with it: the last chunk, with the trailers
// declared in the header (the cost), and the connection handed over to watch, which gives it
// back to the server for the next request, or closes it. A response net/http writes, net/http
// ends.
func (s *h1Stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.finished = true // and the takeover's timer, if it fires now, does nothing
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.conn == nil {
		return
	}
	if s.err == nil {
		b := s.out
		if b == nil {
			b = getChunk()
		}
		b = append(b, "0\r\n"...)
		b = appendTrailers(b, s.w.Header())
		s.out = append(b, "\r\n"...)
		s.flush()
	}
	s.end(s.err == nil && !s.closes && s.srv != nil)
}

// abort ends a response cut short (the handler panicked): the connection closes without the
// last chunk, so that the buyer reads no complete answer.
func (s *h1Stream) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.finished = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.conn != nil {
		s.end(false)
	}
}

// end hands the connection over to watch: held, with the server's idle timeout, until its
// next request when reuse says it may serve one (and the server is not shutting down); else
// closed.
func (s *h1Stream) end(reuse bool) {
	putChunk(s.out)
	s.out = nil
	s.reuse = s.reuse && reuse && s.held.hold(s.srv, s.conn)
	polled := s.stopPolling() // true: watch has not started
	if s.reuse {
		if d := idleTimeout(s.srv); d > 0 {
			s.conn.SetReadDeadline(time.Now().Add(d))
		}
	} else {
		s.conn.Close()
	}
	close(s.ended)
	switch {
	case s.reuse && s.next != nil:
		go s.handBack(s.next) // its next request has begun
	case s.reuse && polled:
		go s.watch() // waits for the next request, as net/http does on an idle connection
	}
}

// idleTimeout is how long srv keeps an idle connection open, as net/http reads its settings.
func idleTimeout(srv *http.Server) time.Duration {
	if srv.IdleTimeout != 0 {
		return srv.IdleTimeout
	}
	return srv.ReadTimeout
}

// watch reads the connection while the answer is written, as net/http's background read does:
// its end (the buyer went away) cancels the request, and the first byte of a next request,
// once the answer is whole, gives the connection back to the server. It owns the connection
// once the answer has ended.
func (s *h1Stream) watch() {
	var b [1]byte
	n, _ := s.conn.Read(b[:])
	if n == 0 { // the buyer went away, or the idle connection timed out or was closed
		select {
		case <-s.ended:
		default:
			s.cancel(errBuyerGone)
		}
		s.conn.Close()
		<-s.ended
		if s.reuse {
			s.held.release(s.srv, s.conn)
		}
		return
	}
	<-s.ended // a request sent before the answer ended waits for it
	if !s.reuse {
		s.conn.Close()
		return
	}
	s.handBack(b[:])
}

// handBack gives the connection back to the server, for its next request, which began with
// next (read already).
func (s *h1Stream) handBack(next []byte) {
	s.held.release(s.srv, s.conn)
	s.conn.SetReadDeadline(time.Time{})
	c := resume(s.conn, next)
	l := &handback{conn: c}
	s.srv.Serve(l)
	if !l.taken.Load() { // the server is shutting down
		c.Close()
	}
}

// appendTrailers appends the trailers declared in h's Trailer header, and those set with
// http.TrailerPrefix, in the wire format.
func appendTrailers(b []byte, h http.Header) []byte {
	for _, declared := range h["Trailer"] {
		for k := range strings.SplitSeq(declared, ",") {
			k = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))
			for _, v := range h[k] {
				b = appendField(b, k, v)
			}
		}
	}
	for k, vs := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			for _, v := range vs {
				b = appendField(b, textproto.CanonicalMIMEHeaderKey(name), v)
			}
		}
	}
	return b
}

// appendField appends a header field, its value's line breaks made spaces, as net/http does.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, textproto.TrimString(newlineToSpace.Replace(v))...)
	return append(b, "\r\n"...)
}

var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// appender writes to a byte slice, for http.Header.WriteSubset.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

func (a *appender) WriteString(s string) (int, error) {
	*a = append(*a, s...)
	return len(s), nil
}

// chunkPool holds the buffers of streams' writes between flushes, so that a stream waiting for
// its next piece keeps none.
var chunkPool sync.Pool

// maxPooledChunk bounds the buffers the pool keeps: a rare large write is left to the GC.
const maxPooledChunk = 16 << 10

func getChunk() []byte {
	if b, ok := chunkPool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 512)
}

func putChunk(b []byte) {
	if b == nil || cap(b) > maxPooledChunk {
		return
	}
	b = b[:0]
	chunkPool.Put(&b)
}

// resumed is a connection whose first bytes were read already: the next request's, which watch
// read while it waited for it, or net/http before the stream took the connection over.
type resumed struct {
	net.Conn
	next []byte
}

// resume returns conn, whose next bytes were read already, as a connection that reads them
// again. A connection resumed before is resumed again as it is, rather than wrapped once more
// at each request it carries.
func resume(conn net.Conn, next []byte) net.Conn {
	switch c := conn.(type) {
	case *resumedTLS:
		c.next = next
		return c
	case *resumed:
		c.next = next
		return c
	case *tls.Conn:
		return &resumedTLS{resumed: &resumed{Conn: c, next: next}, tls: c}
	}
	return &resumed{Conn: conn, next: next}
}

// NetConn returns the connection resumed, as tls.Conn does: the poller watches that one.
func (c *resumed) NetConn() net.Conn { return c.Conn }

func (c *resumed) Read(p []byte) (int, error) {
	if len(c.next) > 0 {
		n := copy(p, c.next)
		c.next = c.next[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection when it can, as net/http does for a TCP connection.
func (c *resumed) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// resumedTLS is a resumed TLS connection: net/http reads its TLS state from ConnectionState,
// since it is no *tls.Conn.
type resumedTLS struct {
	*resumed
	tls *tls.Conn
}

func (c *resumedTLS) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

// handback is a listener that yields one connection, given back to the server: http.Server
// serves it as a new connection.
type handback struct {
	conn  net.Conn
	taken atomic.Bool
}

func (l *handback) Accept() (net.Conn, error) {
	if l.taken.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	return nil, net.ErrClosed
}

func (l *handback) Close() error   { return nil }
func (l *handback) Addr() net.Addr { return l.conn.LocalAddr() }

// heldConns are the HTTP/1.1 connections of streamed answers that ended, each waiting in its
// watch for its next request: the server does not know them (they were taken over), so they
// are closed here when it shuts down, as it closes its idle connections.
type heldConns struct {
	mu      sync.Mutex
	servers map[*http.Server]*serverConns
}

// serverConns are the held connections of one server.
type serverConns struct {
	closing bool // the server is shutting down: it takes no connection back
	conns   map[net.Conn]struct{}
}

// watch makes sure srv's held connections are closed when it shuts down: a stream calls it
// when it starts, so that the hook is in place before any connection of srv is held.
func (h *heldConns) watch(srv *http.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.servers[srv] != nil {
		return
	}
	if h.servers == nil {
		h.servers = make(map[*http.Server]*serverConns)
	}
	h.servers[srv] = &serverConns{conns: make(map[net.Conn]struct{})}
	srv.RegisterOnShutdown(func() { h.shutdown(srv) })
}

// hold records conn as waiting for its next request to srv; false when srv shuts down, and
// the caller closes conn.
func (h *heldConns) hold(srv *http.Server, conn net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.servers[srv]
	if sc == nil || sc.closing {
		return false
	}
	sc.conns[conn] = struct{}{}
	return true
}

// release forgets conn, which got its next request or closed.
func (h *heldConns) release(srv *http.Server, conn net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sc := h.servers[srv]; sc != nil {
		delete(sc.conns, conn)
	}
}

// shutdown closes srv's held connections, and any held later.
func (h *heldConns) shutdown(srv *http.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.servers[srv]
	sc.closing = true
	for c := range sc.conns {
		c.Close()
	}
	sc.conns = nil
}
