package console

import (
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/store"
)

// Console handlers return their errors, and one adapter writes them (handle → writeError), as
// the gateway's handlers do for the API: the user is shown a message of the catalogue, never
// an error's own text; the cause goes to the log.

// handler is a console page's handler: it writes its answer, or returns an error for
// writeError to answer with.
type handler func(w http.ResponseWriter, r *http.Request) error

// Error is an error the console shows its user: Key, a message of the catalogue, with Status.
// Err is the cause, for the log; it is never shown. errors.Is and errors.As see through it.
type Error struct {
	Status int
	Key    string // such as "error.not_found"
	Err    error  // nil when there is no more to log than the key
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Key
	}
	return e.Key + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// userError is an *Error of status and catalogue key, caused by err.
func userError(status int, key string, err error) *Error {
	return &Error{Status: status, Key: key, Err: err}
}

// Errors of the console's own, which writeError knows.
var errForbidden = errors.New("forbidden")

// handle adapts h to an http.Handler that writes h's error with writeError.
func (c *Console) handle(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			c.writeError(w, r, err)
		}
	})
}

// userErrorOf is the *Error that err is, or that it means: store.ErrNotFound a 404,
// errForbidden a 403, a body too large a 413, anything else a 500 ("error.internal").
func userErrorOf(err error) *Error {
	if ue := (*Error)(nil); errors.As(err, &ue) {
		return ue
	}
	switch tooBig := (*http.MaxBytesError)(nil); {
	case errors.Is(err, store.ErrNotFound):
		return userError(http.StatusNotFound, "error.not_found", err)
	case errors.Is(err, errForbidden):
		return userError(http.StatusForbidden, "error.forbidden", err)
	case errors.As(err, &tooBig):
		return userError(http.StatusRequestEntityTooLarge, "error.bad_request", err)
	}
	return userError(http.StatusInternalServerError, "error.internal", err)
}

// writeError answers a request with its handler's error: the error page with the message in
// the user's language, or, to a request that asks for JSON and not for a page, the API's shape
// of error ({"error":{"message","type","code"}}) with that message and the key as its code.
// A server error is logged with its cause; a refusal with a cause is logged as information.
//
// An *api.Error is the API's answer (the playground's, which speaks the API): it is written as
// the API writes it, its cause logged.
func (c *Console) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if ae, ok := errors.AsType[*api.Error](err); ok {
		if ae.Status >= http.StatusInternalServerError {
			c.log.WarnContext(r.Context(), "console: API request failed", "path", r.URL.Path, "err", err, "cause", ae.Cause)
		}
		if (ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusTooManyRequests) && ae.RetryAfter >= 0 {
			w.Header().Set("Retry-After", strconv.Itoa(max(ae.RetryAfter, 1))) // as the API's writeError
		}
		ae.Write(w)
		return
	}
	ue := userErrorOf(err)
	switch {
	case ue.Status >= http.StatusInternalServerError:
		c.log.ErrorContext(r.Context(), "console", "path", r.URL.Path, "err", err)
	case ue.Err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, errForbidden):
		c.log.InfoContext(r.Context(), "console: refused a request", "path", r.URL.Path, "status", ue.Status, "err", err)
	}
	if wantsJSON(r) {
		typ := api.TypeInvalidRequest
		switch {
		case ue.Status >= http.StatusInternalServerError:
			typ = api.TypeServer
		case ue.Status == http.StatusForbidden:
			typ = api.TypePermission
		}
		(&api.Error{Status: ue.Status, Type: typ, Code: ue.Key, Message: c.i18n.T(c.lang(r), ue.Key)}).Write(w)
		return
	}
	// The page is the signed-in user's, with their menu, though the error may have come before
	// the session's check (or on a path of no page): a 403 then says whom they are signed in as.
	if s, err := c.session(r); err == nil && s != nil {
		r = withSession(r, s)
	}
	c.render(w, r, ue.Status, "error", errorPage{Title: errorTitle(ue.Key), Message: ue.Key, Status: ue.Status})
}

// errorPage is the error page's data: the catalogue keys of its heading and message.
type errorPage struct {
	Title, Message string
	Status         int
}

// errorTitle is the error page's heading for a message: what happened, where it has a name
// (a page that does not exist, a page the user may not open), else "Something went wrong".
func errorTitle(key string) string {
	switch key {
	case "error.not_found":
		return "error.title_not_found"
	case "error.forbidden":
		return "error.title_forbidden"
	}
	return "error.title"
}

// notFound answers a path that no page has: the console's 404 page, not the mux's plain text.
func (c *Console) notFound(http.ResponseWriter, *http.Request) error { return store.ErrNotFound }

// wantsJSON reports whether a request asks for JSON and not for a page (Accept).
func wantsJSON(r *http.Request) bool {
	json, page := false, false
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		json = json || mt == "application/json"
		page = page || mt == "text/html" || mt == "*/*"
	}
	return json && !page
}
