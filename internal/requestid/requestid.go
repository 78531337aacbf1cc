// Package requestid names every HTTP request of the coordinator: an id (req_…) in its context,
// its X-Request-Id response header and the log lines logged with its context. The buyer API and
// the console both serve requests under it; the request core bills and records them by it.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Header is the response header that carries a request's id.
const Header = "X-Request-Id"

type requestIDKey struct{}

// idEncoding is base32 in an alphabet in ASCII order, so that ids sort as their bytes do.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// New returns a fresh request id: 48 bits of the Unix time in milliseconds, then 72 random
// bits. Ids made later sort later, so the database's indexes of requests (holds, usage,
// ledger entries) grow at their ends, a few pages written per batch of requests, instead of
// one page per request at random places.
func New() string {
	var b [15]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	return "req_" + idEncoding.EncodeToString(b[:])
}

// Minted returns when New made id, to the millisecond, and false for an id New did not make.
func Minted(id string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, "req_")
	if !ok || len(rest) != idEncoding.EncodedLen(15) {
		return time.Time{}, false
	}
	var b [15]byte
	if n, err := idEncoding.Decode(b[:], []byte(rest)); err != nil || n != len(b) {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]) >> 16)), true
}

// Handler gives every request an id, in its context and in the X-Request-Id response header.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := New()
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// From returns the request's id, or a new one when Handler did not run.
func From(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return id
	}
	return New()
}

// LogHandler wraps h so that a record logged with a request's context (log.InfoContext(ctx, …))
// carries the request's id, as request_id.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDHandler); ok {
		return h
	}
	return requestIDHandler{h}
}

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
