package console

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// The tests here check statuses, headers, cookies and the store, never translated text: error
// messages are found by their catalogue key in the data-error attribute.

const goodPassword = "correct horse battery"

// The package's tests hash with cheap parameters, to run fast (above all with -race);
// TestPassword_HashVerify checks the real ones.
func init() { argonParams.m, argonParams.t, argonParams.p = 1024, 1, 1 }

// authEnv is a console on a fresh SQLite store, with a clock the test moves, and pages made for
// the tests that count their calls: /test/any (any user), /test/buyer, /test/provider and
// /test/admin, each also taking POST.
type authEnv struct {
	t      *testing.T
	c      *Console
	st     *sqlstore.DB
	dsn    string
	h      http.Handler
	mu     sync.Mutex
	now    time.Time
	called map[string]int
}

func newAuthEnv(t *testing.T, secure bool) *authEnv {
	t.Helper()
	e := &authEnv{t: t, now: time.Date(2025, 3, 21, 12, 0, 0, 0, time.UTC), called: map[string]int{}}
	e.dsn = sqlstoretest.DSN(t, "sqlite")
	st, err := sqlstore.Open(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	e.c, err = New(Config{Store: st, Secure: secure, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", e.c.handle(e.c.home))
	e.c.registerAuth(mux)
	for path, role := range map[string]string{"/test/any": "", "/test/buyer": store.RoleBuyer,
		"/test/provider": store.RoleProvider, "/test/admin": store.RoleAdmin} {
		mux.Handle(path, e.c.as(role, func(w http.ResponseWriter, r *http.Request) error {
			if sessionOf(r) == nil || sessionOf(r).user == nil {
				t.Errorf("%s: no session inside c.as", path)
			}
			e.mu.Lock()
			e.called[r.Method+" "+path]++
			e.mu.Unlock()
			io.WriteString(w, "ok "+sessionOf(r).user.Email)
			return nil
		}))
	}
	e.h = mux
	return e
}

func (e *authEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *authEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

func (e *authEnv) calls(what string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.called[what]
}

// browser is a client with its own cookies and address.
type browser struct {
	e       *authEnv
	addr    string
	cookies map[string]*http.Cookie
}

func (e *authEnv) browser(addr string) *browser {
	return &browser{e: e, addr: addr, cookies: map[string]*http.Cookie{}}
}

type response struct {
	status  int
	header  http.Header
	cookies []*http.Cookie
	body    string
}

func (r *response) location() string { return r.header.Get("Location") }

func (r *response) cookie(name string) *http.Cookie {
	for _, c := range r.cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// do sends a request; a form, when given, is the body. hdr holds extra headers, "Name: value".
func (b *browser) do(method, path string, form url.Values, hdr ...string) *response {
	b.e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr = b.addr
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	for _, c := range b.cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	w := httptest.NewRecorder()
	b.e.h.ServeHTTP(w, req)
	res := w.Result()
	out := &response{status: res.StatusCode, header: res.Header, cookies: res.Cookies(), body: w.Body.String()}
	for _, c := range out.cookies {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return out
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// token returns the CSRF token of the form page at path.
func (b *browser) token(path string) string {
	b.e.t.Helper()
	res := b.do("GET", path, nil)
	m := csrfInput.FindStringSubmatch(res.body)
	if res.status != http.StatusOK || m == nil {
		b.e.t.Fatalf("GET %s: %d, no CSRF token in\n%s", path, res.status, res.body)
	}
	return m[1]
}

// sessionToken returns the logged-in session's CSRF token, as the store has it.
func (b *browser) sessionToken() string {
	b.e.t.Helper()
	ws := b.webSession()
	if ws == nil {
		b.e.t.Fatal("not logged in")
	}
	return ws.CSRF
}

// webSession returns the store's session of the browser's cookie, or nil.
func (b *browser) webSession() *store.WebSession {
	b.e.t.Helper()
	c := b.cookies[sessionCookie]
	if c == nil {
		return nil
	}
	secret, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		b.e.t.Fatal(err)
	}
	ws, err := b.e.st.WebSession(context.Background(), sum256(secret), b.e.clock())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		b.e.t.Fatal(err)
	}
	return ws
}

func (b *browser) signup(email, password, account string, roles ...string) *response {
	b.e.t.Helper()
	f := url.Values{"csrf": {b.token("/signup")}, "email": {email}, "password": {password}, "account": {account}, "role": roles}
	return b.do("POST", "/signup", f)
}

func (b *browser) login(email, password string) *response {
	b.e.t.Helper()
	return b.do("POST", "/login", url.Values{"csrf": {b.token("/login")}, "email": {email}, "password": {password}})
}

// mustSignup signs up and checks that it logged the browser in.
func (b *browser) mustSignup(email, account string, roles ...string) {
	b.e.t.Helper()
	res := b.signup(email, goodPassword, account, roles...)
	if res.status != http.StatusSeeOther || res.location() != "/" || b.cookies[sessionCookie] == nil {
		b.e.t.Fatalf("sign-up of %s: %d to %q, cookies %v\n%s", email, res.status, res.location(), res.cookies, res.body)
	}
}

func wantStatus(t *testing.T, what string, res *response, status int, location string) {
	t.Helper()
	if res.status != status || res.location() != location {
		t.Errorf("%s: %d to %q, want %d to %q\n%s", what, res.status, res.location(), status, location, res.body)
	}
}

func TestPassword_HashVerify(t *testing.T) {
	ctx := context.Background()
	cheap := argonParams
	argonParams.m, argonParams.t, argonParams.p = argonMemory, argonTime, argonThreads
	defer func() { argonParams = cheap }()
	h, err := hashPassword(ctx, goodPassword)
	if err != nil {
		t.Fatal(err)
	}
	phcRE := regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=4\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)
	if !phcRE.MatchString(h) {
		t.Errorf("hashPassword = %q, want the PHC string of argon2id with m=65536,t=3,p=4, a 16-byte salt and a 32-byte hash", h)
	}
	if h2, _ := hashPassword(ctx, goodPassword); h2 == h {
		t.Errorf("two hashes of one password are equal: the salt is not random")
	}

	// Other parameters, as stored before they changed: read back from the string.
	salt := []byte("0123456789abcdef")
	old := "$argon2id$v=19$m=1024,t=1,p=1$" + base64.RawStdEncoding.EncodeToString(salt) + "$" +
		base64.RawStdEncoding.EncodeToString(argon2.IDKey([]byte("an older password"), salt, 1, 1024, 1, 24))

	tests := []struct {
		name, phc, pw string
		want          bool
		err           error
	}{
		{"right", h, goodPassword, true, nil},
		{"wrong", h, "correct horse battery!", false, nil},
		{"empty", h, "", false, nil},
		{"other parameters, right", old, "an older password", true, nil},
		{"other parameters, wrong", old, "an older passwore", false, nil},
		{"too long", h, strings.Repeat("x", maxPasswordBytes+1), false, nil},
		{"argon2i", strings.Replace(h, "argon2id", "argon2i", 1), goodPassword, false, errBadHash},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", goodPassword, false, errBadHash},
		{"version 16", strings.Replace(h, "v=19", "v=16", 1), goodPassword, false, errBadHash},
		{"huge memory", strings.Replace(h, "m=65536", "m=999999999", 1), goodPassword, false, errBadHash},
		{"no lanes", strings.Replace(h, "p=4", "p=0", 1), goodPassword, false, errBadHash},
		{"missing parameter", strings.Replace(h, ",t=3", "", 1), goodPassword, false, errBadHash},
		{"bad salt", strings.Replace(h, "$argon2id$v=19$m=65536,t=3,p=4$", "$argon2id$v=19$m=65536,t=3,p=4$!!", 1), goodPassword, false, errBadHash},
		{"empty", "", goodPassword, false, errBadHash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verifyPassword(ctx, tt.phc, tt.pw)
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("verifyPassword = %v, %v; want %v, %v", got, err, tt.want, tt.err)
			}
		})
	}

	// A password typed with composed or decomposed characters is the same password.
	h, err = hashPassword(ctx, "caf\u00e9 au lait, s'il vous pla\u00eet")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := verifyPassword(ctx, h, "cafe\u0301 au lait, s'il vous plai\u0302t"); !ok || err != nil {
		t.Errorf("the decomposed form of a password: %v, %v; want it to match", ok, err)
	}
}

func TestCheckPassword(t *testing.T) {
	tests := []struct {
		pw   string
		want error
	}{
		{"123456789", errPasswordShort},
		{"1234567890", nil},
		{"گذرواژهٔمن", nil},             // 10 characters, 20 bytes
		{"گذرواژهمن", errPasswordShort}, // 9 characters, 18 bytes: characters count, not bytes
		{strings.Repeat("x", maxPasswordBytes), nil},
		{strings.Repeat("x", maxPasswordBytes+1), errPasswordLong},
	}
	for _, tt := range tests {
		if got := checkPassword(tt.pw); got != tt.want {
			t.Errorf("checkPassword(%q) = %v, want %v", tt.pw, got, tt.want)
		}
	}
}

func TestSignup(t *testing.T) {
	tests := []struct {
		roles     []string
		wantRoles []string
		home      string
		provider  bool
	}{
		{[]string{store.RoleBuyer}, []string{store.RoleBuyer}, "/buyer", false},
		{[]string{store.RoleProvider}, []string{store.RoleProvider}, "/provider", true},
		{[]string{store.RoleProvider, store.RoleBuyer}, []string{store.RoleBuyer, store.RoleProvider}, "/buyer", true},
		// admin is never self-granted: it is ignored.
		{[]string{store.RoleAdmin, store.RoleBuyer}, []string{store.RoleBuyer}, "/buyer", false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.roles, "+"), func(t *testing.T) {
			e := newAuthEnv(t, false)
			b := e.browser("192.0.2.1:1234")
			b.mustSignup(" Alice@Example.COM ", "Alice-Co", tt.roles...)
			if c := b.cookies[csrfCookie]; c != nil {
				t.Errorf("the sign-up form's CSRF cookie is still set after signing up")
			}
			wantStatus(t, "GET /", b.do("GET", "/", nil), http.StatusSeeOther, tt.home)
			wantStatus(t, "GET /signup once logged in", b.do("GET", "/signup", nil), http.StatusSeeOther, "/")
			wantStatus(t, "GET /login once logged in", b.do("GET", "/login", nil), http.StatusSeeOther, "/")

			ctx := context.Background()
			u, err := e.st.UserByEmail(ctx, "alice@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(u.Roles, tt.wantRoles) || !strings.HasPrefix(u.ID, "usr_") || !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
				t.Errorf("user = %+v, want roles %v", u, tt.wantRoles)
			}
			a, err := e.st.Account(ctx, "alice-co")
			if err != nil {
				t.Fatal(err)
			}
			if a.ID != u.AccountID || !strings.HasPrefix(a.ID, "acct_") {
				t.Errorf("account %+v, user's account %s", a, u.AccountID)
			}
			if got := e.isProvider(a.ID); got != tt.provider {
				t.Errorf("account marked provider: %v, want %v", got, tt.provider)
			}
			if ws := b.webSession(); ws == nil || ws.UserID != u.ID || !ws.ExpiresAt.Equal(e.clock().Add(7*24*time.Hour)) {
				t.Errorf("session %+v, want one of %s for 7 days", ws, u.ID)
			}
			if res := b.do("GET", "/test/any", nil); res.status != http.StatusOK {
				t.Errorf("a page once signed up: %d", res.status)
			}
		})
	}
}

// isProvider reads the providers table directly: the store has no query for it.
func (e *authEnv) isProvider(accountID string) bool {
	e.t.Helper()
	db, err := sql.Open("sqlite", e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM providers WHERE account_id = ?`, accountID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n == 1
}

func TestSignup_Invalid(t *testing.T) {
	e := newAuthEnv(t, false)
	e.browser("192.0.2.1:1").mustSignup("taken@example.com", "taken", store.RoleBuyer)
	tests := []struct {
		name, email, password, account string
		roles                          []string
		errs                           []string // the catalogue keys shown
	}{
		{"bad email", "alice", goodPassword, "alice", []string{"buyer"}, []string{"auth.signup.email_invalid"}},
		{"email with a name", "Alice <alice@example.com>", goodPassword, "alice", []string{"buyer"}, []string{"auth.signup.email_invalid"}},
		{"email without a domain", "alice@localhost", goodPassword, "alice", []string{"buyer"}, []string{"auth.signup.email_invalid"}},
		{"short password", "alice@example.com", "123456789", "alice", []string{"buyer"}, []string{"auth.signup.password_short"}},
		{"account name with a space", "alice@example.com", goodPassword, "alice co", []string{"buyer"}, []string{"auth.signup.account_invalid"}},
		{"short account name", "alice@example.com", goodPassword, "al", []string{"buyer"}, []string{"auth.signup.account_invalid"}},
		{"account name like an id", "alice@example.com", goodPassword, "acct_alice", []string{"buyer"}, []string{"auth.signup.account_invalid"}},
		{"no role", "alice@example.com", goodPassword, "alice", nil, []string{"auth.signup.role_required"}},
		{"admin only", "alice@example.com", goodPassword, "alice", []string{"admin"}, []string{"auth.signup.role_required"}},
		{"email taken", "TAKEN@example.com", goodPassword, "alice", []string{"buyer"}, []string{"auth.signup.email_taken"}},
		{"account taken", "alice@example.com", goodPassword, "Taken", []string{"buyer"}, []string{"auth.signup.account_taken"}},
		{"both taken", "taken@example.com", goodPassword, "taken", []string{"buyer"}, []string{"auth.signup.email_taken", "auth.signup.account_taken"}},
		{"all wrong", "", "", "", nil, []string{"auth.signup.email_invalid", "auth.signup.password_short", "auth.signup.account_invalid", "auth.signup.role_required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.browser("192.0.2.2:1")
			res := b.signup(tt.email, tt.password, tt.account, tt.roles...)
			if res.status != http.StatusUnprocessableEntity || res.cookie(sessionCookie) != nil {
				t.Errorf("status %d, session cookie %v; want %d and none", res.status, res.cookie(sessionCookie), http.StatusUnprocessableEntity)
			}
			for _, key := range tt.errs {
				if !strings.Contains(res.body, `data-error="`+key+`"`) {
					t.Errorf("the page does not show %s:\n%s", key, res.body)
				}
			}
			if n := strings.Count(res.body, "data-error="); n != len(tt.errs) {
				t.Errorf("%d errors shown, want %d", n, len(tt.errs))
			}
			if tt.email != "" && !strings.Contains(tt.email, "<") && !strings.Contains(res.body, `value="`+strings.ToLower(tt.email)+`"`) {
				t.Errorf("the email is not kept in the form")
			}
			if strings.Contains(res.body, tt.password) && tt.password != "" {
				t.Errorf("the page shows the password back")
			}
		})
	}
	if _, err := e.st.UserByEmail(context.Background(), "alice@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused sign-up made a user: %v", err)
	}
	if _, err := e.st.Account(context.Background(), "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused sign-up made an account: %v", err)
	}
}

func TestLogin(t *testing.T) {
	e := newAuthEnv(t, false)
	e.browser("192.0.2.1:1").mustSignup("bob@example.com", "bob", store.RoleProvider)

	b := e.browser("192.0.2.2:1")
	for _, tt := range []struct{ name, email, password string }{
		{"wrong password", "bob@example.com", "not bob's password"},
		{"unknown email", "carol@example.com", goodPassword},
		{"empty", "", ""},
	} {
		res := b.login(tt.email, tt.password)
		if res.status != http.StatusUnprocessableEntity || res.cookie(sessionCookie) != nil ||
			!strings.Contains(res.body, `data-error="auth.login.wrong"`) {
			t.Errorf("%s: %d, session cookie %v; want %d, none, and auth.login.wrong\n%s", tt.name, res.status,
				res.cookie(sessionCookie), http.StatusUnprocessableEntity, res.body)
		}
	}
	wantStatus(t, "a page before logging in", b.do("GET", "/test/any", nil), http.StatusSeeOther, "/login")
	wantStatus(t, "GET / before logging in", b.do("GET", "/", nil), http.StatusSeeOther, "/login")

	wantStatus(t, "log-in, in another case", b.login("BOB@example.com", goodPassword), http.StatusSeeOther, "/")
	wantStatus(t, "GET /", b.do("GET", "/", nil), http.StatusSeeOther, "/provider")
	if b.cookies[csrfCookie] != nil {
		t.Errorf("the log-in form's CSRF cookie is still set after logging in")
	}

	// Logging in again, as someone else, ends the first session.
	first := b.webSession()
	e.browser("192.0.2.1:1").mustSignup("carol@example.com", "carol", store.RoleBuyer)
	// Another tab's form: GET /login while logged in only sends to /.
	cookie := b.cookies[sessionCookie]
	delete(b.cookies, sessionCookie)
	tok := b.token("/login")
	b.cookies[sessionCookie] = cookie
	wantStatus(t, "log-in as carol", b.do("POST", "/login", url.Values{"csrf": {tok}, "email": {"carol@example.com"},
		"password": {goodPassword}}), http.StatusSeeOther, "/")
	if _, err := e.st.WebSession(context.Background(), first.Hash, e.clock()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the previous session survives a new log-in: %v", err)
	}
	wantStatus(t, "GET / as carol", b.do("GET", "/", nil), http.StatusSeeOther, "/buyer")
}

func TestLogin_RateLimit(t *testing.T) {
	e := newAuthEnv(t, false)
	e.browser("192.0.2.1:1").mustSignup("bob@example.com", "bob", store.RoleBuyer)
	b := e.browser("192.0.2.2:1")
	for i := range loginsByEmail {
		if res := b.login("bob@example.com", "wrong password"); res.status != http.StatusUnprocessableEntity {
			t.Fatalf("failure %d: %d, want %d", i+1, res.status, http.StatusUnprocessableEntity)
		}
		e.advance(time.Minute)
	}
	// Over the limit, even the right password is refused, from anywhere.
	for _, addr := range []string{"192.0.2.2:1", "198.51.100.7:9"} {
		res := e.browser(addr).login("bob@example.com", goodPassword)
		if res.status != http.StatusTooManyRequests || res.cookie(sessionCookie) != nil {
			t.Fatalf("from %s: %d, session cookie %v; want %d and none", addr, res.status, res.cookie(sessionCookie), http.StatusTooManyRequests)
		}
		// The first failure, 5 minutes ago, leaves the window in 10 minutes.
		if got, want := res.header.Get("Retry-After"), strconv.Itoa(10*60); got != want {
			t.Errorf("Retry-After: %q, want %q", got, want)
		}
		if !strings.Contains(res.body, `data-error="auth.login.too_many"`) {
			t.Errorf("the page does not say to retry later:\n%s", res.body)
		}
	}
	// Another email is not limited by bob's failures.
	e.browser("192.0.2.1:1").mustSignup("carol@example.com", "carol", store.RoleBuyer)
	wantStatus(t, "carol", e.browser("192.0.2.2:1").login("carol@example.com", goodPassword), http.StatusSeeOther, "/")

	e.advance(10 * time.Minute)
	wantStatus(t, "bob, once the first failure left the window", b.login("bob@example.com", goodPassword), http.StatusSeeOther, "/")
	// The success cleared bob's count: five more failures before the limit.
	for i := range loginsByEmail {
		if res := e.browser("203.0.113.1:1").login("bob@example.com", "wrong password"); res.status != http.StatusUnprocessableEntity {
			t.Fatalf("failure %d after a success: %d, want %d", i+1, res.status, http.StatusUnprocessableEntity)
		}
	}
	if res := e.browser("203.0.113.1:1").login("bob@example.com", goodPassword); res.status != http.StatusTooManyRequests {
		t.Errorf("after five more failures: %d, want %d", res.status, http.StatusTooManyRequests)
	}
}

func TestLogin_RateLimitPerAddress(t *testing.T) {
	e := newAuthEnv(t, false)
	e.browser("192.0.2.1:1").mustSignup("bob@example.com", "bob", store.RoleBuyer)
	// One address tries many emails, each fewer times than the email limit.
	for i := range loginsByAddr {
		res := e.browser("[2001:db8::1]:1").login("user"+strconv.Itoa(i)+"@example.com", "wrong password")
		if res.status != http.StatusUnprocessableEntity {
			t.Fatalf("failure %d: %d", i+1, res.status)
		}
	}
	// The same /64 is the same address; another one is not.
	if res := e.browser("[2001:db8::2]:1").login("bob@example.com", goodPassword); res.status != http.StatusTooManyRequests {
		t.Errorf("from the same /64: %d, want %d", res.status, http.StatusTooManyRequests)
	}
	wantStatus(t, "from another address", e.browser("[2001:db8:0:1::1]:1").login("bob@example.com", goodPassword), http.StatusSeeOther, "/")
}

func TestLimiter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(func() time.Time { return now })
	for i := range loginsByEmail - 1 {
		if w := l.loginAttempt("a", "x@example.com"); w != 0 {
			t.Fatalf("attempt %d blocked: %v", i+1, w)
		}
	}
	now = now.Add(time.Minute)
	if w := l.loginAttempt("b", "x@example.com"); w != 0 {
		t.Fatalf("attempt %d blocked: %v", loginsByEmail, w)
	}
	// The oldest attempt, a minute ago, leaves the window in 14 minutes.
	if w := l.loginAttempt("c", "x@example.com"); w != loginWindow-time.Minute {
		t.Errorf("after %d attempts: wait %v, want %v", loginsByEmail, w, loginWindow-time.Minute)
	}
	now = now.Add(loginWindow - time.Minute - time.Second)
	if w := l.loginAttempt("c", "x@example.com"); w != time.Second {
		t.Errorf("a second before the oldest leaves: wait %v, want 1s", w)
	}
	now = now.Add(time.Second)
	if w := l.loginAttempt("c", "x@example.com"); w != 0 {
		t.Errorf("once the oldest left: wait %v, want 0", w)
	}
	// A success takes the email's count back.
	l.loginSucceeded("x@example.com")
	if n := len(l.byEmail.hits["x@example.com"]); n != 0 {
		t.Errorf("after a success: %d attempts kept for the email, want 0", n)
	}
	// Sweeping forgets what left its window.
	now = now.Add(2 * loginWindow)
	l.loginAttempt("d", "y@example.com")
	if len(l.byEmail.hits) != 1 || len(l.byAddr.hits) != 1 {
		t.Errorf("after a sweep: %d emails and %d addresses kept, want 1 and 1", len(l.byEmail.hits), len(l.byAddr.hits))
	}
}

func TestCSRF_Forms(t *testing.T) {
	e := newAuthEnv(t, false)
	e.browser("192.0.2.1:1").mustSignup("bob@example.com", "bob", store.RoleBuyer)
	signup := url.Values{"email": {"eve@example.com"}, "password": {goodPassword}, "account": {"eve"}, "role": {"buyer"}}
	login := url.Values{"email": {"bob@example.com"}, "password": {goodPassword}}
	with := func(v url.Values, tok string) url.Values {
		v = cloneForm(v)
		v.Set("csrf", tok)
		return v
	}

	tests := []struct {
		name   string
		prep   func(b *browser) url.Values // shows the form or not, and returns what to add
		header string
	}{
		{"no token, no cookie", func(b *browser) url.Values { return url.Values{} }, ""},
		{"cookie, no token", func(b *browser) url.Values { b.token("/login"); return url.Values{} }, ""},
		{"cookie, wrong token", func(b *browser) url.Values { b.token("/login"); return url.Values{"csrf": {randomToken()}} }, ""},
		{"token, no cookie", func(b *browser) url.Values {
			tok := b.token("/login")
			delete(b.cookies, csrfCookie)
			return url.Values{"csrf": {tok}}
		}, ""},
		{"another site", func(b *browser) url.Values { return url.Values{"csrf": {b.token("/login")}} }, "Sec-Fetch-Site: cross-site"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, form := range []struct {
				path string
				v    url.Values
			}{{"/login", login}, {"/signup", signup}} {
				b := e.browser("192.0.2.3:1")
				v := cloneForm(form.v)
				for k, vs := range tt.prep(b) {
					v[k] = vs
				}
				res := b.do("POST", form.path, v, tt.header)
				if res.status != http.StatusForbidden || res.cookie(sessionCookie) != nil ||
					!strings.Contains(res.body, `data-error="auth.form.expired"`) {
					t.Errorf("POST %s: %d, session cookie %v; want %d, none, and auth.form.expired\n%s", form.path,
						res.status, res.cookie(sessionCookie), http.StatusForbidden, res.body)
				}
				// The page comes back with a token that works.
				if m := csrfInput.FindStringSubmatch(res.body); m == nil || b.cookies[csrfCookie] == nil || m[1] != b.cookies[csrfCookie].Value {
					t.Errorf("POST %s: the refused form has no fresh token", form.path)
				}
			}
		})
	}
	if _, err := e.st.UserByEmail(context.Background(), "eve@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused sign-up made a user: %v", err)
	}
	b := e.browser("192.0.2.3:1")
	wantStatus(t, "the same forms with their tokens", b.do("POST", "/signup", with(signup, b.token("/signup"))), http.StatusSeeOther, "/")
	b = e.browser("192.0.2.3:1")
	wantStatus(t, "log-in", b.do("POST", "/login", with(login, b.token("/login"))), http.StatusSeeOther, "/")
}

func cloneForm(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func TestCSRF_Pages(t *testing.T) {
	e := newAuthEnv(t, false)
	b := e.browser("192.0.2.1:1")
	b.mustSignup("bob@example.com", "bob", store.RoleBuyer)
	tok := b.sessionToken()
	tests := []struct {
		name   string
		form   url.Values
		header []string
		want   int
	}{
		{"no token", url.Values{"name": {"x"}}, nil, http.StatusForbidden},
		{"empty token", url.Values{"csrf": {""}}, nil, http.StatusForbidden},
		{"wrong token", url.Values{"csrf": {randomToken()}}, nil, http.StatusForbidden},
		{"wrong header", url.Values{"csrf": {tok}}, []string{"X-CSRF-Token: " + randomToken()}, http.StatusForbidden},
		{"another site", url.Values{"csrf": {tok}}, []string{"Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
		{"another origin", url.Values{"csrf": {tok}}, []string{"Origin: https://evil.example"}, http.StatusForbidden},
		{"token", url.Values{"csrf": {tok}}, nil, http.StatusOK},
		{"header", nil, []string{"X-CSRF-Token: " + tok}, http.StatusOK},
		{"same origin", url.Values{"csrf": {tok}}, []string{"Sec-Fetch-Site: same-origin"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.calls("POST /test/buyer")
			res := b.do("POST", "/test/buyer", tt.form, tt.header...)
			if res.status != tt.want {
				t.Errorf("status %d, want %d\n%s", res.status, tt.want, res.body)
			}
			wantCalls := before
			if tt.want == http.StatusOK {
				wantCalls++
			}
			if got := e.calls("POST /test/buyer"); got != wantCalls {
				t.Errorf("the handler ran %d times, want %d", got-before, wantCalls-before)
			}
		})
	}

	// Logging out without the token does not log out.
	wantStatus(t, "POST /logout without a token", b.do("POST", "/logout", url.Values{}), http.StatusForbidden, "")
	if b.webSession() == nil {
		t.Errorf("a refused log-out ended the session")
	}
	// Nor with another session's token.
	other := e.browser("192.0.2.9:1")
	other.mustSignup("carol@example.com", "carol", store.RoleBuyer)
	wantStatus(t, "POST /logout with another session's token", b.do("POST", "/logout", url.Values{"csrf": {other.sessionToken()}}), http.StatusForbidden, "")
	if b.webSession() == nil {
		t.Errorf("a refused log-out ended the session")
	}
}

func TestRoles(t *testing.T) {
	e := newAuthEnv(t, false)
	buyer, provider, admin := e.browser("192.0.2.1:1"), e.browser("192.0.2.2:1"), e.browser("192.0.2.3:1")
	buyer.mustSignup("buyer@example.com", "buyer", store.RoleBuyer)
	provider.mustSignup("provider@example.com", "provider", store.RoleProvider)
	admin.mustSignup("admin@example.com", "admin", store.RoleBuyer)
	u, err := e.st.UserByEmail(context.Background(), "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetUserRoles(context.Background(), u.ID, []string{store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	nobody := e.browser("192.0.2.4:1")

	tests := []struct {
		who  string
		b    *browser
		want map[string]int // path → status of GET
	}{
		{"buyer", buyer, map[string]int{"/test/any": 200, "/test/buyer": 200, "/test/provider": 403, "/test/admin": 403}},
		{"provider", provider, map[string]int{"/test/any": 200, "/test/buyer": 403, "/test/provider": 200, "/test/admin": 403}},
		{"admin", admin, map[string]int{"/test/any": 200, "/test/buyer": 200, "/test/provider": 200, "/test/admin": 200}},
		{"nobody", nobody, map[string]int{"/test/any": 303, "/test/buyer": 303, "/test/provider": 303, "/test/admin": 303}},
	}
	for _, tt := range tests {
		t.Run(tt.who, func(t *testing.T) {
			for path, want := range tt.want {
				before := e.calls("GET " + path)
				res := tt.b.do("GET", path, nil)
				if res.status != want {
					t.Errorf("GET %s: %d, want %d", path, res.status, want)
				}
				if want == 303 && res.location() != "/login" {
					t.Errorf("GET %s: to %q, want /login", path, res.location())
				}
				if ran := e.calls("GET "+path) - before; ran != map[bool]int{true: 1, false: 0}[want == 200] {
					t.Errorf("GET %s: the handler ran %d times", path, ran)
				}
				if want == 403 && res.header.Get("Cache-Control") != "no-store" {
					t.Errorf("GET %s: Cache-Control %q, want no-store", path, res.header.Get("Cache-Control"))
				}
			}
			// A POST with the wrong role is refused too, even with its token.
			if tt.b != nobody && tt.want["/test/admin"] == 403 {
				res := tt.b.do("POST", "/test/admin", url.Values{"csrf": {tt.b.sessionToken()}})
				if res.status != http.StatusForbidden || e.calls("POST /test/admin") != 0 {
					t.Errorf("POST /test/admin: %d", res.status)
				}
			}
		})
	}
	wantStatus(t, "GET / as admin", admin.do("GET", "/", nil), http.StatusSeeOther, "/admin")
}

// The console's own pages, as they are registered: a buyer opens none of the provider's or the
// admin's.
func TestRoles_ConsolePages(t *testing.T) {
	e := newAuthEnv(t, false)
	mux := http.NewServeMux()
	e.c.Register(mux)
	e.h = mux
	b := e.browser("192.0.2.1:1")
	b.mustSignup("buyer@example.com", "buyer", store.RoleBuyer)
	for _, path := range []string{"/provider", "/admin", "/admin/accounts"} {
		req := httptest.NewRequest("GET", path, nil)
		if _, pattern := mux.Handler(req); pattern == "" {
			t.Logf("%s: not registered yet", path)
			continue
		}
		if res := b.do("GET", path, nil); res.status != http.StatusForbidden {
			t.Errorf("GET %s as a buyer: %d, want %d", path, res.status, http.StatusForbidden)
		}
	}
}

func TestLogout(t *testing.T) {
	e := newAuthEnv(t, false)
	b := e.browser("192.0.2.1:1")
	b.mustSignup("bob@example.com", "bob", store.RoleBuyer)
	stolen := *b.cookies[sessionCookie]
	ws := b.webSession()
	res := b.do("POST", "/logout", url.Values{"csrf": {ws.CSRF}})
	wantStatus(t, "POST /logout", res, http.StatusSeeOther, "/login")
	if c := res.cookie(sessionCookie); c == nil || c.MaxAge >= 0 {
		t.Errorf("log-out does not clear the session cookie: %v", c)
	}
	if _, err := e.st.WebSession(context.Background(), ws.Hash, e.clock()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the session is still in the store: %v", err)
	}
	// The old cookie, replayed, logs no one in.
	thief := e.browser("198.51.100.1:1")
	thief.cookies[sessionCookie] = &stolen
	wantStatus(t, "a page with the logged-out cookie", thief.do("GET", "/test/any", nil), http.StatusSeeOther, "/login")
	wantStatus(t, "GET / with the logged-out cookie", thief.do("GET", "/", nil), http.StatusSeeOther, "/login")
	if res := thief.do("GET", "/login", nil); res.status != http.StatusOK {
		t.Errorf("GET /login with the logged-out cookie: %d", res.status)
	}
}

func TestSession_Expires(t *testing.T) {
	e := newAuthEnv(t, false)
	b := e.browser("192.0.2.1:1")
	b.mustSignup("bob@example.com", "bob", store.RoleBuyer)
	e.advance(7*24*time.Hour - time.Second)
	if res := b.do("GET", "/test/any", nil); res.status != http.StatusOK {
		t.Fatalf("a second before the session expires: %d", res.status)
	}
	e.advance(time.Second)
	wantStatus(t, "once the session expired", b.do("GET", "/test/any", nil), http.StatusSeeOther, "/login")
	wantStatus(t, "POST once the session expired", b.do("POST", "/test/any", url.Values{"csrf": {"x"}}), http.StatusSeeOther, "/login")
	if n := e.calls("POST /test/any"); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}

func TestSession_BadCookies(t *testing.T) {
	e := newAuthEnv(t, false)
	b := e.browser("192.0.2.1:1")
	b.mustSignup("bob@example.com", "bob", store.RoleBuyer)
	good := b.cookies[sessionCookie].Value
	secret, _ := base64.RawURLEncoding.DecodeString(good)
	secret[0] ^= 1
	for _, v := range []string{"", "x", good + "A", good[:len(good)-1], base64.RawURLEncoding.EncodeToString(secret),
		base64.RawURLEncoding.EncodeToString(sum256(secret))} {
		b.cookies[sessionCookie] = &http.Cookie{Name: sessionCookie, Value: v}
		wantStatus(t, "cookie "+strconv.Quote(v), b.do("GET", "/test/any", nil), http.StatusSeeOther, "/login")
	}
}

func TestCookies(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run("secure="+strconv.FormatBool(secure), func(t *testing.T) {
			e := newAuthEnv(t, secure)
			b := e.browser("192.0.2.1:1")
			res := b.do("GET", "/signup", nil)
			if res.header.Get("Cache-Control") != "no-store" {
				t.Errorf("GET /signup: Cache-Control %q, want no-store", res.header.Get("Cache-Control"))
			}
			checkCookie(t, res.cookie(csrfCookie), secure, 0)
			res = b.signup("bob@example.com", goodPassword, "bob", store.RoleBuyer)
			c := res.cookie(sessionCookie)
			checkCookie(t, c, secure, 7*24*60*60)
			if raw, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil || len(raw) != 32 {
				t.Errorf("session secret %q: want 32 bytes in URL-safe base64", c.Value)
			}
			for _, h := range res.header.Values("Set-Cookie") {
				if strings.HasPrefix(h, sessionCookie+"=") && (!strings.Contains(h, "HttpOnly") || !strings.Contains(h, "SameSite=Lax") ||
					strings.Contains(h, "Secure") != secure) {
					t.Errorf("Set-Cookie: %s", h)
				}
			}
		})
	}
}

func checkCookie(t *testing.T, c *http.Cookie, secure bool, maxAge int) {
	t.Helper()
	if c == nil {
		t.Fatal("no cookie")
	}
	if !c.HttpOnly || c.Secure != secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != maxAge || c.Domain != "" {
		t.Errorf("cookie %s: HttpOnly %v, Secure %v, SameSite %v, Path %q, MaxAge %d, Domain %q; want true, %v, Lax, /, %d, none",
			c.Name, c.HttpOnly, c.Secure, c.SameSite, c.Path, c.MaxAge, c.Domain, secure, maxAge)
	}
}

func TestClientAddr(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:1234", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"pipe", "pipe"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if got := clientAddr(r); got != tt.want {
			t.Errorf("clientAddr(%s) = %s, want %s", tt.remote, got, tt.want)
		}
	}
}

func sum256(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func TestForms_TooLarge(t *testing.T) {
	e := newAuthEnv(t, false)
	b := e.browser("192.0.2.1:1")
	b.mustSignup("bob@example.com", "bob", store.RoleBuyer)
	big := url.Values{"csrf": {b.sessionToken()}, "x": {strings.Repeat("x", maxPageForm)}}
	if res := b.do("POST", "/test/any", big); res.status != http.StatusRequestEntityTooLarge || e.calls("POST /test/any") != 0 {
		t.Errorf("a page's form over %d bytes: %d, want %d", maxPageForm, res.status, http.StatusRequestEntityTooLarge)
	}
	delete(b.cookies, sessionCookie)
	big = url.Values{"csrf": {b.token("/login")}, "email": {"bob@example.com"}, "password": {strings.Repeat("x", maxAuthForm)}}
	if res := b.do("POST", "/login", big); res.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a log-in form over %d bytes: %d, want %d", maxAuthForm, res.status, http.StatusRequestEntityTooLarge)
	}
}

// Parallel log-in attempts are counted before their passwords are checked: no more than the
// limit get through, however many arrive at once.
func TestLimiter_ParallelAttempts(t *testing.T) {
	l := newLimiter(time.Now)
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() {
			if l.loginAttempt("203.0.113.7", "x@example.com") == 0 {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := passed.Load(); n > 5 {
		t.Errorf("%d of 60 parallel attempts were let through; want at most 5", n)
	}
}

// The platform's own account names, and those the tools make, cannot be signed up for.
func TestReservedAccountNames(t *testing.T) {
	for _, name := range []string{"shareai-platform", "shareai", "local-buyer", "local-provider", "default"} {
		if validAccountName(name) {
			t.Errorf("%q can be signed up for", name)
		}
	}
	if !validAccountName("ada-labs") {
		t.Error("an ordinary name is refused")
	}
}
