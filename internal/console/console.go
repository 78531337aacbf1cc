// Package console is the web console for buyers, providers and admins, served by the
// coordinator at "/": server-rendered with html/template, its templates, styles, scripts and
// message catalogues embedded, no JavaScript build step and no CDN.
//
// Pages are templates/<name>.html, each defining "title" and "content" inside
// templates/layout.html. Every text comes from the message catalogues (messages/<lang>/<area>.json)
// through the template function T, so another language is a file. A page's handler returns
// the data it renders; render adds what every page has (the user, the language and its
// direction, the CSRF token, the flash message).
package console

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/batch"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the console.
type Config struct {
	Store  store.Store
	Fleet  *fleet.Fleet
	Ledger *ledger.Ledger
	// Core runs the playground's chats, paid by the signed-in account: no key is made for
	// them, and none reaches the browser. Nil: no playground.
	Core *core.Core
	// Batches opens the files of the buyer's batches, wherever they are kept (the database or
	// the files directory), and cancels batches, as the Batch API does (the coordinator's
	// batch.Batches). Nil: no batch pages.
	Batches *batch.Batches
	// Metrics counts the playground's chats with the API's requests; nil: counted nowhere.
	Metrics *metrics.Coordinator
	// Secure marks the cookies Secure: set it when the coordinator serves HTTPS.
	Secure bool
	// Reputation explains a node's score, factor by factor (the coordinator's prober); nil:
	// node pages show the stored score alone.
	Reputation func(ctx context.Context, nodeID string) (reputation.Score, error)
	// KeyLimits are the coordinator's rate limits of API keys (gateway.Config.Limits): a key
	// made here may have lower ones, never higher. A zero field: any.
	KeyLimits store.RateLimits
	// TierPrices are the service tiers' price multipliers on the nodes' asks
	// (core.Config.TierPrices), for the prices /models shows; zero: tier.DefaultMultipliers.
	TierPrices tier.Multipliers
	Log        *slog.Logger
	Now        func() time.Time
}

// Console serves the web console.
type Console struct {
	cfg   Config
	log   *slog.Logger
	i18n  *Catalog
	mu    sync.Mutex
	pages map[string]*template.Template
	login *limiter // failed log-ins, per address and per email
}

// New loads the templates and message catalogues.
func New(cfg Config) (*Console, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TierPrices == (tier.Multipliers{}) {
		cfg.TierPrices = tier.DefaultMultipliers
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewCoordinator(nil)
	}
	cat, err := LoadCatalog()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Log, i18n: cat, pages: map[string]*template.Template{}, login: newLimiter(cfg.Now)}
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c, nil
}

// parse parses every page with the layout.
func (c *Console) parse() error {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", name)
		if err != nil {
			return fmt.Errorf("console: %s: %w", name, err)
		}
		page := name[len("templates/") : len(name)-len(".html")]
		c.pages[page] = t
	}
	return nil
}

// Page is what every page renders besides its own data.
type Page struct {
	User  *store.User
	Lang  string // "en", "fa"
	Dir   string // "ltr", "rtl"
	CSRF  string
	Flash string // a message for the user, already translated
	Path  string // the request's path, to mark the current menu item
	Data  any    // the page's own
}

// render writes a page. Its template is templates/<name>.html.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t := c.pages[name]
	if t == nil {
		c.log.ErrorContext(r.Context(), "console: no such page", "page", name)
		http.Error(w, "page not found", http.StatusInternalServerError)
		return
	}
	s := sessionOf(r)
	lang := c.lang(r)
	p := Page{Lang: lang, Dir: c.i18n.Dir(lang), Path: r.URL.Path, Data: data}
	if s != nil {
		p.User, p.CSRF = s.user, s.csrf
	}
	if f, err := r.Cookie(flashCookie); err == nil {
		// The cookie is the browser's to send: only a flash message of the catalogue is shown,
		// and nothing else it holds is looked up (or logged as missing).
		if strings.Contains(f.Value, ".flash.") && c.i18n.Known(f.Value) {
			p.Flash = c.i18n.T(lang, f.Value)
		}
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout.html", p); err != nil {
		c.log.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
	}
}

// flashCookie carries a message key to the next page, after a redirect.
const flashCookie = "shareai_flash"

// redirect sends the browser to path with a message (a catalogue key) for the next page.
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, path, flashKey string) {
	if flashKey != "" {
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: flashKey, Path: "/", HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode})
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// Register adds the console's routes to mux. The buyer API's routes (/v1/…) are the
// gateway's; the console's pages live at "/" and below.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle("GET /static/", http.FileServerFS(staticFS))
	mux.Handle("GET /{$}", c.handle(c.home))
	mux.Handle("POST /lang", c.handle(c.setLang))
	c.registerAuth(mux)
	c.registerBuyer(mux)
	c.registerProvider(mux)
	c.registerAdmin(mux)
	mux.Handle("/", c.handle(c.notFound)) // any other path: the console's 404 page
}

// home sends a visitor to log in, and a user to their first page.
func (c *Console) home(w http.ResponseWriter, r *http.Request) error {
	s, err := c.session(r)
	switch {
	case err != nil || s == nil:
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	case s.user.Has(store.RoleBuyer):
		http.Redirect(w, r, "/buyer", http.StatusSeeOther)
	case s.user.Has(store.RoleProvider):
		http.Redirect(w, r, "/provider", http.StatusSeeOther)
	default:
		http.Redirect(w, r, "/admin", http.StatusSeeOther)
	}
	return nil
}
