package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// A page the user may not open and a page that does not exist each say what happened, in the
// user's language, with their status; other errors keep the general heading.
func TestErrorPages_SayWhatHappened(t *testing.T) {
	env := testenv.New(t)
	buyer := newWebUser(t, env, "ada@example.com", "ada-labs", store.RoleBuyer)
	generic := "Something went wrong"
	for _, tt := range []struct {
		name, path     string
		status         int
		title, message string
		hint           string // on a 403, whom the user is signed in as
	}{
		{"another role's page", "/provider", http.StatusForbidden, "No access", "You do not have access to this page.", "You are signed in as ada@example.com."},
		{"an admin page", "/admin/accounts", http.StatusForbidden, "No access", "You do not have access to this page.", "You are signed in as ada@example.com."},
		{"a request of no one", "/buyer/requests/req_nobody", http.StatusNotFound, "Page not found", "This page does not exist.", ""},
		{"a path of no page", "/buyer/no-such-page", http.StatusNotFound, "Page not found", "This page does not exist.", ""},
		{"a path outside every area", "/pricing", http.StatusNotFound, "Page not found", "This page does not exist.", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := buyer.get(tt.path)
			if status != tt.status {
				t.Errorf("GET %s: status %d, want %d", tt.path, status, tt.status)
			}
			title, message := elementText(t, body, "error-title"), elementText(t, body, "error-message")
			if title != tt.title || message != tt.message || strings.Contains(body, generic) {
				t.Errorf("GET %s: heading %q, message %q; want %q, %q and not %q", tt.path, title, message, tt.title, tt.message, generic)
			}
			if !strings.Contains(body, "<title>"+tt.title+" · ") {
				t.Errorf("GET %s: the window's title does not say %q", tt.path, tt.title)
			}
			if !strings.Contains(body, `id="logout"`) {
				t.Errorf("GET %s: the page is not the signed-in user's (no log-out button)", tt.path)
			}
			if tt.hint != "" && !strings.Contains(body, tt.hint) {
				t.Errorf("GET %s: no %q", tt.path, tt.hint)
			}
		})
	}

	// In Persian.
	buyer.client.Jar.SetCookies(parseURL(env.URL), []*http.Cookie{{Name: "lang", Value: "fa", Path: "/"}})
	for path, want := range map[string][2]string{
		"/provider":     {"دسترسی ندارید", "به این صفحه دسترسی ندارید."},
		"/no-such-page": {"صفحه پیدا نشد", "این صفحه وجود ندارد."},
	} {
		_, body := buyer.get(path)
		if title, message := elementText(t, body, "error-title"), elementText(t, body, "error-message"); title != want[0] || message != want[1] {
			t.Errorf("Persian GET %s: heading %q, message %q; want %q, %q", path, title, message, want[0], want[1])
		}
	}

	// A visitor's unknown path is the 404 page too, and a request for JSON gets the API's error.
	resp, err := http.Get(env.URL + "/no-such-page")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("a visitor's GET /no-such-page: %d %s; want the 404 page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest(http.MethodGet, env.URL+"/no-such-page", nil)
	req.Header.Set("Accept", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("GET /no-such-page for JSON: %d %s; want a JSON 404", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// An expired form (no CSRF token) is refused with the general heading and its own message.
	resp, err = buyer.client.PostForm(env.URL+"/buyer/keys", url.Values{"name": {"laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if title := elementText(t, string(b), "error-title"); resp.StatusCode != http.StatusForbidden || title != "مشکلی پیش آمد" {
		t.Errorf("POST without its CSRF token: %d, heading %q; want 403 and the general heading", resp.StatusCode, title)
	}
}
