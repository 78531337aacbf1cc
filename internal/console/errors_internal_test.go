package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/store"
)

// Handlers' errors are written by one adapter: the user sees the catalogue's message for the
// error's kind, never the error's text, which goes to the log with its cause.
func TestWriteError(t *testing.T) {
	var logged bytes.Buffer
	c, err := New(Config{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	secret := errors.New("pq: relation secret_table does not exist")
	for _, tt := range []struct {
		name    string
		err     error
		accept  string
		status  int
		key     string
		logs    bool // the cause is logged
		jsonOut bool
	}{
		{"internal", fmt.Errorf("read balance: %w", secret), "", http.StatusInternalServerError, "error.internal", true, false},
		{"not found", fmt.Errorf("node x: %w", store.ErrNotFound), "text/html", http.StatusNotFound, "error.not_found", false, false},
		{"forbidden", errForbidden, "", http.StatusForbidden, "error.forbidden", false, false},
		{"user error", userError(http.StatusForbidden, "error.csrf", secret), "", http.StatusForbidden, "error.csrf", true, false},
		{"wrapped user error", fmt.Errorf("outer: %w", formError(&http.MaxBytesError{Limit: 1})), "", http.StatusRequestEntityTooLarge, "error.bad_request", true, false},
		{"internal, as JSON", secret, "application/json", http.StatusInternalServerError, "error.internal", true, true},
		{"not found, as JSON", store.ErrNotFound, "application/json", http.StatusNotFound, "error.not_found", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logged.Reset()
			r := httptest.NewRequest("GET", "/buyer", nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			w := httptest.NewRecorder()
			c.handle(func(http.ResponseWriter, *http.Request) error { return tt.err }).ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Errorf("status %d, want %d", w.Code, tt.status)
			}
			body := w.Body.String()
			if strings.Contains(body, "secret_table") || strings.Contains(body, "outer") {
				t.Errorf("the answer shows the error's text: %s", body)
			}
			if want := c.i18n.T("en", tt.key); !strings.Contains(body, want) {
				t.Errorf("the answer does not say %q: %s", want, body)
			}
			if got := strings.Contains(logged.String(), "secret_table") || strings.Contains(logged.String(), "http: request body too large"); got != tt.logs {
				t.Errorf("cause logged: %v, want %v (log %q)", got, tt.logs, logged.String())
			}
			if tt.jsonOut {
				var e struct {
					Error struct{ Message, Type, Code string }
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != tt.key || e.Error.Message == "" {
					t.Errorf("JSON answer %s (%v), want the API's error with code %s", body, err, tt.key)
				}
			} else if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type %q, want the error page", ct)
			}
		})
	}
	// An *Error keeps its cause for errors.Is and errors.As.
	ue := userError(http.StatusBadRequest, "error.bad_request", fmt.Errorf("x: %w", store.ErrConflict))
	if wrapped := fmt.Errorf("y: %w", ue); !errors.Is(wrapped, store.ErrConflict) || userErrorOf(wrapped) != ue {
		t.Errorf("the cause or the user error is lost in %v", wrapped)
	}
}
