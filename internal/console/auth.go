package console

// Accounts in the console: sign-up, log-in, log-out, sessions, CSRF protection, and c.as, which
// guards every page.
//
// Sessions. A logged-in browser holds a random 32-byte secret in the cookie shareai_session
// (HttpOnly, SameSite=Lax, Path=/, Secure when Config.Secure), for 7 days from log-in; the
// store keeps only the secret's SHA-256 (store.WebSession), so that a copy of the database logs
// no one in. Logging in or signing up always starts a new session (no fixation); logging out
// deletes it from the store.
//
// CSRF. Each session has a random token, stored with it. Every unsafe request (not GET, HEAD or
// OPTIONS) to a page wrapped by c.as must carry it, in the form field "csrf" or, for a script's
// fetch, the header X-CSRF-Token; it is compared in constant time. The log-in and sign-up forms
// are posted before there is a session, so they use a double-submit token instead: showing the
// form sets a random token in the cookie shareai_csrf (HttpOnly, SameSite=Lax) and in the form's
// hidden field "csrf", and a post is accepted only when the two are equal. Another site can
// neither read the cookie nor know the field. Besides, every unsafe request passes net/http's
// CrossOriginProtection, which refuses what the browser marks as cross-origin (Sec-Fetch-Site,
// or an Origin unlike the Host): that also covers a sibling subdomain able to set our cookies.
//
// Log-in rate limit. Failed log-ins are counted per client address (RemoteAddr; IPv6 per /64)
// and per email, in sliding windows: 5 per 15 minutes per email, 20 per 15 minutes per
// address. Over either, log-ins are refused with 429 (and Retry-After) without looking at the
// password, until the window frees; a successful log-in clears its email's count. Sign-ups are
// limited to 20 per hour per address. The counts are in memory, per coordinator process: a
// restart forgets them, and coordinators behind one load balancer count apart. Behind a
// reverse proxy every client has the proxy's address; no X-Forwarded-For is trusted.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"math"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/store"
)

const (
	sessionCookie = "shareai_session"
	csrfCookie    = "shareai_csrf" // the log-in and sign-up forms' double-submit token
	csrfField     = "csrf"         // the form field of the CSRF token
	csrfHeader    = "X-CSRF-Token" // the same, for a script's fetch
	sessionTTL    = 7 * 24 * time.Hour
	secretLen     = 32 // bytes of a session's secret and of a CSRF token

	maxAuthForm = 64 << 10 // bytes of a log-in or sign-up form
	maxPageForm = 1 << 20  // bytes of another page's form, read to find its CSRF token
)

// Log-in and sign-up limits; see the comment at the top of the file.
const (
	loginWindow   = 15 * time.Minute
	loginsByEmail = 5
	loginsByAddr  = 20
	signupWindow  = time.Hour
	signupsByAddr = 20
)

// crossOrigin refuses unsafe requests that browsers mark as cross-origin.
var crossOrigin = http.NewCrossOriginProtection()

// websess is a request's logged-in session. The log-in and sign-up pages render with one whose
// user is nil, to hand the form's CSRF token to the layout.
type websess struct {
	user *store.User
	csrf string
	hash []byte // SHA-256 of the cookie's secret
}

type sessionKey struct{}

// sessionOf returns the session the middleware found for r, or nil.
func sessionOf(r *http.Request) *websess {
	s, _ := r.Context().Value(sessionKey{}).(*websess)
	return s
}

func withSession(r *http.Request, s *websess) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}

// session reads the session cookie of r; nil, nil when there is none, or it is malformed,
// unknown or expired, or its user is gone. An error is the store's.
func (c *Console) session(r *http.Request) (*websess, error) {
	if s := sessionOf(r); s != nil && s.user != nil {
		return s, nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	secret, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(secret) != secretLen {
		return nil, nil
	}
	sum := sha256.Sum256(secret)
	ws, err := c.cfg.Store.WebSession(r.Context(), sum[:], c.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, err := c.cfg.Store.User(r.Context(), ws.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &websess{user: u, csrf: ws.CSRF, hash: sum[:]}, nil
}

// as wraps a page handler: it needs a logged-in user with the role ("" any; an admin has every
// role), and on an unsafe method a valid CSRF token (form field "csrf", or header
// X-CSRF-Token); the session is then sessionOf(r). Without a session it redirects to /login
// (303); with the wrong role it answers 403 (errForbidden: "error.forbidden"), and for a
// missing or wrong token, or a cross-origin request, 403 with "error.csrf"; the handler is then
// never called. It marks the answer Cache-Control: no-store. Errors, its own and the
// handler's, are written by writeError.
func (c *Console) as(role string, h handler) http.Handler {
	return c.handle(func(w http.ResponseWriter, r *http.Request) error {
		s, err := c.session(r)
		if err != nil {
			return err
		}
		if s == nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		r = withSession(r, s)
		w.Header().Set("Cache-Control", "no-store")
		if !safeMethod(r.Method) {
			if err := crossOrigin.Check(r); err != nil {
				return refusal(err)
			}
			tok, err := c.requestToken(w, r)
			if err != nil {
				return formError(err)
			}
			if !equalTokens(tok, s.csrf) {
				return refusal(errors.New("wrong or missing CSRF token"))
			}
		}
		if role != "" && !s.user.Has(role) && !s.user.Has(store.RoleAdmin) {
			return errForbidden
		}
		return h(w, r)
	})
}

// formError is a form that cannot be read: 413 when it is too large, else 400.
func formError(err error) *Error {
	status := http.StatusBadRequest
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		status = http.StatusRequestEntityTooLarge
	}
	return userError(status, "error.bad_request", err)
}

// refusal is 403 to a request that failed a CSRF check, with the error page saying that the
// form expired ("error.csrf").
func refusal(why error) *Error { return userError(http.StatusForbidden, "error.csrf", why) }

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// requestToken returns the CSRF token an unsafe request carries: the header X-CSRF-Token, or
// else the form field csrf, parsing the form (URL-encoded or multipart, at most maxPageForm
// bytes) so that the handler finds it in r.PostForm. A request with the header keeps its body
// unread, for a handler that reads JSON.
func (c *Console) requestToken(w http.ResponseWriter, r *http.Request) (string, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxPageForm)
	if tok := r.Header.Get(csrfHeader); tok != "" {
		return tok, nil
	}
	var err error
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		err = r.ParseMultipartForm(maxPageForm)
	} else {
		err = r.ParseForm()
	}
	return r.PostForm.Get(csrfField), err
}

// equalTokens compares a token a request carries with the expected one in constant time; an
// empty one matches nothing.
func equalTokens(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// randomToken returns secretLen random bytes, in unpadded URL-safe base64.
func randomToken() string {
	b := make([]byte, secretLen)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *Console) registerAuth(mux *http.ServeMux) {
	mux.Handle("GET /login", c.handle(c.showLogin))
	mux.Handle("POST /login", c.handle(c.postLogin))
	mux.Handle("GET /signup", c.handle(c.showSignup))
	mux.Handle("POST /signup", c.handle(c.postSignup))
	mux.Handle("POST /logout", c.as("", c.postLogout))
}

// msg is a message shown on a form: a catalogue key, with at most one argument for a %d or %s
// in its text (nil: none). Templates write it as
//
//	{{if .Arg}}{{T $ .Key .Arg}}{{else}}{{T $ .Key}}{{end}}
type msg struct {
	Key string
	Arg any
}

// loginData is the log-in page's.
type loginData struct {
	Email string
	Error *msg
}

// signupData is the sign-up page's.
type signupData struct {
	Email, Account  string
	Buyer, Provider bool
	// Errors holds a message per field ("email", "password", "account", "roles") and for the
	// whole form ("form").
	Errors map[string]*msg
}

// MinPassword is the shortest password a sign-up takes, for the page's hint.
func (signupData) MinPassword() int { return minPasswordLen }

// showForm renders the log-in or sign-up page with the double-submit CSRF token: the cookie's
// if the browser has one, else a new one, set in the cookie.
func (c *Console) showForm(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	tok := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && validToken(ck.Value) {
		tok = ck.Value
	} else {
		tok = randomToken()
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true,
			Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode})
	}
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, withSession(r, &websess{csrf: tok}), status, page, data)
}

// validToken reports whether s looks like a token randomToken made.
func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == secretLen
}

// readAuthForm parses a log-in or sign-up post and checks that it comes from our own form: same
// origin, and the double-submit token. When it does not, it answers (403, the form again) and
// returns false.
func (c *Console) readAuthForm(w http.ResponseWriter, r *http.Request, page string, empty any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxAuthForm)
	if err := r.ParseForm(); err != nil {
		c.writeError(w, r, formError(err))
		return false
	}
	err := crossOrigin.Check(r)
	if err == nil {
		ck, cerr := r.Cookie(csrfCookie)
		if cerr != nil || !equalTokens(r.PostForm.Get(csrfField), ck.Value) {
			err = errors.New("wrong or missing CSRF token")
		}
	}
	if err != nil {
		c.log.InfoContext(r.Context(), "console: refused a request", "path", r.URL.Path, "err", err)
		switch d := empty.(type) {
		case *loginData:
			d.Error = &msg{Key: "auth.form.expired"}
		case *signupData:
			d.Errors = map[string]*msg{"form": {Key: "auth.form.expired"}}
		}
		c.showForm(w, r, http.StatusForbidden, page, empty)
		return false
	}
	return true
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request) error {
	if s, err := c.session(r); err == nil && s != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	c.showForm(w, r, http.StatusOK, "login", &loginData{})
	return nil
}

func (c *Console) postLogin(w http.ResponseWriter, r *http.Request) error {
	if !c.readAuthForm(w, r, "login", &loginData{}) {
		return nil // answered
	}
	ctx := r.Context()
	email := normalizeEmail(r.PostForm.Get("email"))
	addr := clientAddr(r)
	data := &loginData{Email: email}
	if wait := c.login.loginAttempt(addr, email); wait > 0 {
		data.Error = retryLater(w, wait, "auth.login.too_many")
		c.showForm(w, r, http.StatusTooManyRequests, "login", data)
		return nil
	}
	u, err := c.cfg.Store.UserByEmail(ctx, email)
	hash := ""
	switch {
	case err == nil:
		hash = u.PasswordHash
	case errors.Is(err, store.ErrNotFound):
		hash = dummyHash() // as long as for a user, so that the time tells nothing
	default:
		return err
	}
	ok, err := verifyPassword(ctx, hash, r.PostForm.Get("password"))
	if errors.Is(err, errBadHash) {
		c.log.ErrorContext(r.Context(), "console: a user's password hash is not argon2id", "user", u.ID)
	} else if err != nil {
		return err
	}
	if !ok || u == nil { // counted already by loginAttempt
		data.Error = &msg{Key: "auth.login.wrong"}
		c.showForm(w, r, http.StatusUnprocessableEntity, "login", data)
		return nil
	}
	c.login.loginSucceeded(email)
	if err := c.startSession(w, r, u); err != nil {
		return err
	}
	c.redirect(w, r, "/", "")
	return nil
}

// retryLater sets Retry-After to wait, and returns the message key saying in how many minutes
// to try again (its %d).
func retryLater(w http.ResponseWriter, wait time.Duration, key string) *msg {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	return &msg{Key: key, Arg: int(math.Ceil(wait.Minutes()))}
}

func (c *Console) showSignup(w http.ResponseWriter, r *http.Request) error {
	if s, err := c.session(r); err == nil && s != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	c.showForm(w, r, http.StatusOK, "signup", &signupData{})
	return nil
}

func (c *Console) postSignup(w http.ResponseWriter, r *http.Request) error {
	if !c.readAuthForm(w, r, "signup", &signupData{}) {
		return nil // answered
	}
	ctx := r.Context()
	f := r.PostForm
	data := &signupData{
		Email:   normalizeEmail(f.Get("email")),
		Account: strings.ToLower(strings.TrimSpace(f.Get("account"))),
		Errors:  map[string]*msg{},
	}
	// Only buyer and provider can be chosen: admin is granted by an operator
	// ('shareai admin user role EMAIL admin'), never by oneself.
	var roles []string
	for _, role := range f["role"] {
		switch {
		case role == store.RoleBuyer && !data.Buyer:
			data.Buyer, roles = true, append(roles, role)
		case role == store.RoleProvider && !data.Provider:
			data.Provider, roles = true, append(roles, role)
		}
	}
	password := f.Get("password")
	if !validEmail(data.Email) {
		data.Errors["email"] = &msg{Key: "auth.signup.email_invalid"}
	}
	switch checkPassword(password) {
	case errPasswordShort:
		data.Errors["password"] = &msg{Key: "auth.signup.password_short", Arg: minPasswordLen}
	case errPasswordLong:
		data.Errors["password"] = &msg{Key: "auth.signup.password_long", Arg: maxPasswordBytes}
	}
	if !validAccountName(data.Account) {
		data.Errors["account"] = &msg{Key: "auth.signup.account_invalid"}
	}
	if len(roles) == 0 {
		data.Errors["roles"] = &msg{Key: "auth.signup.role_required"}
	}
	if len(data.Errors) > 0 {
		c.showForm(w, r, http.StatusUnprocessableEntity, "signup", data)
		return nil
	}
	addr := clientAddr(r)
	if wait := c.login.signupBlocked(addr); wait > 0 {
		data.Errors["form"] = retryLater(w, wait, "auth.signup.too_many")
		c.showForm(w, r, http.StatusTooManyRequests, "signup", data)
		return nil
	}

	// Check both names first, to say at once what is taken, and so as not to leave an account
	// without a user behind when the email is taken; the database's unique keys still decide
	// between two sign-ups at once.
	if _, err := c.cfg.Store.UserByEmail(ctx, data.Email); err == nil {
		data.Errors["email"] = &msg{Key: "auth.signup.email_taken"}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, err := c.cfg.Store.Account(ctx, data.Account); err == nil {
		data.Errors["account"] = &msg{Key: "auth.signup.account_taken"}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if len(data.Errors) > 0 {
		c.showForm(w, r, http.StatusUnprocessableEntity, "signup", data)
		return nil
	}
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	acct := &store.Account{ID: store.NewID("acct"), Name: data.Account, CreatedAt: now}
	if err := c.cfg.Store.CreateAccount(ctx, acct); errors.Is(err, store.ErrConflict) {
		data.Errors["account"] = &msg{Key: "auth.signup.account_taken"}
		c.showForm(w, r, http.StatusUnprocessableEntity, "signup", data)
		return nil
	} else if err != nil {
		return err
	}
	if data.Provider {
		if err := c.cfg.Store.MarkProvider(ctx, acct.ID); err != nil {
			return err
		}
	}
	u := &store.User{ID: store.NewID("usr"), Email: data.Email, PasswordHash: hash, AccountID: acct.ID,
		Roles: roles, CreatedAt: now}
	if err := c.cfg.Store.CreateUser(ctx, u); errors.Is(err, store.ErrConflict) {
		// Someone signed up with this email since the check: the account just made stays
		// without a user.
		c.log.WarnContext(r.Context(), "console: sign-up lost a race for its email; its account has no user", "account", acct.ID)
		data.Errors["email"] = &msg{Key: "auth.signup.email_taken"}
		c.showForm(w, r, http.StatusUnprocessableEntity, "signup", data)
		return nil
	} else if err != nil {
		return err
	}
	c.login.signedUp(addr)
	c.log.InfoContext(r.Context(), "console: signed up", "account", acct.ID, "user", u.ID, "roles", strings.Join(roles, ","))
	if err := c.startSession(w, r, u); err != nil {
		return err
	}
	c.redirect(w, r, "/", "auth.flash.welcome")
	return nil
}

func (c *Console) postLogout(w http.ResponseWriter, r *http.Request) error {
	if err := c.cfg.Store.DeleteWebSession(r.Context(), sessionOf(r).hash); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode})
	c.redirect(w, r, "/login", "auth.flash.logged_out")
	return nil
}

// startSession logs the browser in as u: it ends the browser's previous session if it has one,
// stores a new one and sets its cookie, and drops the form's CSRF cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, u *store.User) error {
	ctx := r.Context()
	if old, err := c.session(r); err == nil && old != nil {
		if err := c.cfg.Store.DeleteWebSession(ctx, old.hash); err != nil {
			return err
		}
	}
	secret := make([]byte, secretLen)
	rand.Read(secret)
	sum := sha256.Sum256(secret)
	now := c.cfg.Now()
	ws := &store.WebSession{Hash: sum[:], UserID: u.ID, CSRF: randomToken(), CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}
	if err := c.cfg.Store.CreateWebSession(ctx, ws); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString(secret), Path: "/",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode})
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode})
	return nil
}

func normalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// validEmail accepts a plain address, user@domain.tld, at most 254 bytes (RFC 5321).
func validEmail(s string) bool {
	if len(s) > 254 {
		return false
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	return at > 0 && strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}

// accountName is what an account chosen at sign-up may be called: it shows in pages, element
// ids and URLs, so lower-case letters, digits, '-' and '_', 3 to 32 of them, beginning with a
// letter or digit.
var accountName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{2,31}$`)

// validAccountName also refuses names that look like account ids ("acct_…"), which
// store.Account would confuse with them.
func validAccountName(s string) bool {
	return accountName.MatchString(s) && !strings.HasPrefix(s, "acct_") && !reservedAccountName(s)
}

// reservedAccountName says whether a name is the platform's own or one the coordinator's
// tools make (the probes' account, up's local accounts): nobody may sign up as them.
func reservedAccountName(s string) bool {
	return strings.HasPrefix(s, "shareai") || strings.HasPrefix(s, "local-") || s == "default"
}

// clientAddr is the address log-ins are counted by: the connection's IP, or its /64 for IPv6,
// where one machine commonly holds a whole /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
