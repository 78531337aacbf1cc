package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The message catalogues: messages/<lang>/<area>.json, each a flat JSON object of key → text.
// A language is a directory; its files are merged, and a key defined twice (in one file or
// in two) is an error at load. Besides the texts, each language describes itself with the
// keys below, so that another language is a directory of files and no code:
//
//	lang.name      the language's own name ("English", "فارسی"), shown in the switch
//	lang.dir       "rtl" or "ltr"
//	lang.digits    the ten digits, zero first ("0123456789", "۰۱۲۳۴۵۶۷۸۹")
//	lang.group     the thousands separator ("," "٬")
//	lang.decimal   the decimal separator ("." "٫")
//	lang.percent   the percent sign ("%" "٪")
//	lang.calendar  "gregorian" or "persian" (the Solar Hijri calendar) for dates
//
//go:embed messages
var messageFS embed.FS

// defaultLang is the language of last resort: every key must exist in it.
const defaultLang = "en"

// langCookie holds the language the user chose with the switch.
const langCookie = "lang"

// Lang is a language of the catalogue.
type Lang struct {
	Code string // "en", "fa": the directory's name, as in Accept-Language
	Name string // its own name: "English", "فارسی"
	Dir  string // "ltr", "rtl"
}

// locale is how a language writes numbers and dates.
type locale struct {
	Lang
	digits   [10]string
	group    string
	decimal  string
	percent  string
	calendar string // "gregorian", "persian"
}

// Catalog holds the message catalogues.
type Catalog struct {
	msgs    map[string]map[string]string // lang → key → text
	locales map[string]*locale
	langs   []Lang // sorted by code

	log    *slog.Logger // where missing keys are reported, once each
	missed sync.Map     // lang + "\x00" + key → struct{}
}

// LoadCatalog loads messages/<lang>/*.json.
func LoadCatalog() (*Catalog, error) {
	sub, err := fs.Sub(messageFS, "messages")
	if err != nil {
		return nil, err
	}
	return loadCatalog(sub)
}

// loadCatalog loads <lang>/*.json from fsys.
func loadCatalog(fsys fs.FS) (*Catalog, error) {
	c := &Catalog{msgs: map[string]map[string]string{}, locales: map[string]*locale{}, log: slog.New(slog.DiscardHandler)}
	dirs, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("console: messages: %w", err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		lang := d.Name()
		if lang != strings.ToLower(lang) {
			return nil, fmt.Errorf("console: messages/%s: a language's directory is its lower-case code", lang)
		}
		files, err := fs.Glob(fsys, lang+"/*.json")
		if err != nil {
			return nil, err
		}
		msgs := map[string]string{}
		from := map[string]string{} // key → file, to name both files of a duplicate
		for _, name := range files {
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, fmt.Errorf("console: messages/%s: %w", name, err)
			}
			kv, err := decodeMessages(b)
			if err != nil {
				return nil, fmt.Errorf("console: messages/%s: %w", name, err)
			}
			for _, e := range kv {
				if prev, ok := from[e.key]; ok {
					return nil, fmt.Errorf("console: messages/%s: key %q is already defined in messages/%s", name, e.key, prev)
				}
				from[e.key] = name
				msgs[e.key] = e.text
			}
		}
		if len(msgs) == 0 {
			continue
		}
		c.msgs[lang] = msgs
	}
	if c.msgs[defaultLang] == nil {
		return nil, fmt.Errorf("console: messages/%s: the default language has no messages", defaultLang)
	}
	for lang := range c.msgs {
		l, err := c.newLocale(lang)
		if err != nil {
			return nil, fmt.Errorf("console: messages/%s: %w", lang, err)
		}
		c.locales[lang] = l
		c.langs = append(c.langs, l.Lang)
	}
	slices.SortFunc(c.langs, func(a, b Lang) int { return strings.Compare(a.Code, b.Code) })
	return c, nil
}

type message struct{ key, text string }

// decodeMessages reads a flat JSON object of strings, refusing a key defined twice (which
// encoding/json would silently let the last one win), nested values and empty texts.
func decodeMessages(b []byte) ([]message, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("want a JSON object of key → text")
	}
	var out []message
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := t.(string) // inside an object, a token in key position is a string
		var text string
		if err := dec.Decode(&text); err != nil {
			return nil, fmt.Errorf("key %q: want a string: %w", key, err)
		}
		switch {
		case seen[key]:
			return nil, fmt.Errorf("key %q is defined twice", key)
		case key == "" || strings.TrimSpace(text) == "":
			return nil, fmt.Errorf("key %q: empty key or text", key)
		}
		seen[key] = true
		out = append(out, message{key, text})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return out, nil
}

// newLocale reads a language's lang.* keys, falling back to English's.
func (c *Catalog) newLocale(lang string) (*locale, error) {
	get := func(key string) string {
		if s, ok := c.msgs[lang][key]; ok {
			return s
		}
		return c.msgs[defaultLang][key]
	}
	l := &locale{
		Lang:     Lang{Code: lang, Name: c.msgs[lang]["lang.name"], Dir: get("lang.dir")},
		group:    get("lang.group"),
		decimal:  get("lang.decimal"),
		percent:  get("lang.percent"),
		calendar: get("lang.calendar"),
	}
	if l.Name == "" {
		return nil, errors.New(`the language has no "lang.name"`)
	}
	if l.Dir != "rtl" {
		l.Dir = "ltr"
	}
	if l.group == "" {
		l.group = ","
	}
	if l.decimal == "" {
		l.decimal = "."
	}
	if l.percent == "" {
		l.percent = "%"
	}
	digits := get("lang.digits")
	if digits == "" {
		digits = "0123456789"
	}
	if utf8.RuneCountInString(digits) != 10 {
		return nil, fmt.Errorf(`"lang.digits" is %q: want the ten digits, zero first`, digits)
	}
	i := 0
	for _, r := range digits {
		l.digits[i] = string(r)
		i++
	}
	switch l.calendar {
	case "", "gregorian":
		l.calendar = "gregorian"
	case "persian":
	default:
		return nil, fmt.Errorf(`"lang.calendar" is %q: want "gregorian" or "persian"`, l.calendar)
	}
	return l, nil
}

// T translates key into lang, formatting args into it with fmt's verbs (%s, %d, %v). Numbers
// among args are written with lang's digits. A key missing in lang falls back to English, then
// to the key itself; each miss is logged once.
func (c *Catalog) T(lang, key string, args ...any) string {
	text, ok := c.msgs[lang][key]
	if !ok {
		c.missing(lang, key)
		if text, ok = c.msgs[defaultLang][key]; !ok {
			text = key
		}
	}
	if len(args) == 0 {
		return text
	}
	l := c.locale(lang)
	local := make([]any, len(args)) // not args itself: it may be the caller's slice
	for i, a := range args {
		local[i] = a
		if isNumber(a) {
			local[i] = localNumber{a, l}
		}
	}
	return fmt.Sprintf(text, local...)
}

// Known says whether English, the catalogue every key must be in, has key.
func (c *Catalog) Known(key string) bool {
	_, ok := c.msgs[defaultLang][key]
	return ok
}

// missing logs a missing key, once per language and key.
func (c *Catalog) missing(lang, key string) {
	if _, dup := c.missed.LoadOrStore(lang+"\x00"+key, struct{}{}); !dup {
		c.log.Warn("console: missing message", "lang", lang, "key", key)
	}
}

// Has reports whether lang is a language of the catalogue.
func (c *Catalog) Has(lang string) bool { return c.locales[lang] != nil }

// Dir is the writing direction of lang: "rtl" or "ltr".
func (c *Catalog) Dir(lang string) string { return c.locale(lang).Dir }

// Langs lists the catalogue's languages, by code, each with its own name.
func (c *Catalog) Langs() []Lang { return slices.Clone(c.langs) }

// locale is lang's locale, or English's for an unknown language.
func (c *Catalog) locale(lang string) *locale {
	if l := c.locales[lang]; l != nil {
		return l
	}
	return c.locales[defaultLang]
}

// localNumber formats a number argument of T with its language's digits, whatever the verb.
type localNumber struct {
	v any
	l *locale
}

// With %d or %v and no flags, integers get the thousands separator too, as num writes them.
func (n localNumber) Format(f fmt.State, verb rune) {
	_, wid := f.Width()
	_, prec := f.Precision()
	plain := !wid && !prec && !f.Flag('+') && !f.Flag('-') && !f.Flag('#') && !f.Flag(' ') && !f.Flag('0')
	if plain && (verb == 'd' || verb == 'v') {
		io.WriteString(f, n.l.number(n.v))
		return
	}
	io.WriteString(f, n.l.localNumber(fmt.Sprintf(fmt.FormatString(f, verb), n.v)))
}

// lang is the request's language: the lang cookie (the switch), then the user's preference,
// then the best match of Accept-Language, then English.
func (c *Console) lang(r *http.Request) string {
	if ck, err := r.Cookie(langCookie); err == nil && c.i18n.Has(ck.Value) {
		return ck.Value
	}
	if s := sessionOf(r); s != nil && s.user != nil && c.i18n.Has(s.user.Lang) {
		return s.user.Lang
	}
	if l := matchAcceptLanguage(r.Header.Get("Accept-Language"), c.i18n.Has); l != "" {
		return l
	}
	return defaultLang
}

// matchAcceptLanguage picks the first language of an Accept-Language header, by quality,
// that has reports known: "fa-IR,fa;q=0.9,en-US;q=0.8" → "fa" when "fa-ir" is unknown.
// It returns "" when none is known.
func matchAcceptLanguage(header string, has func(string) bool) string {
	if len(header) > 1024 {
		header = header[:1024]
	}
	type choice struct {
		tag string
		q   float64
	}
	var cs []choice
	for i, part := range strings.Split(header, ",") {
		if i == 32 {
			break
		}
		tag, params, _ := strings.Cut(part, ";")
		tag = strings.ToLower(strings.TrimSpace(tag))
		q := 1.0
		if p := strings.TrimSpace(params); p != "" {
			v, ok := strings.CutPrefix(p, "q=")
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if !ok || err != nil || f < 0 || f > 1 {
				continue
			}
			q = f
		}
		if tag == "" || tag == "*" || q == 0 {
			continue
		}
		cs = append(cs, choice{tag, q})
	}
	slices.SortStableFunc(cs, func(a, b choice) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	for _, ch := range cs {
		if has(ch.tag) {
			return ch.tag
		}
		if base, _, ok := strings.Cut(ch.tag, "-"); ok && has(base) {
			return base
		}
	}
	return ""
}

// setLang handles the language switch: POST /lang with the form field lang. Choosing a
// language is harmless, so it needs no CSRF token, but only a language of the catalogue is
// accepted. It remembers the choice for a year and sends the browser back to the page it came
// from (same origin only).
func (c *Console) setLang(w http.ResponseWriter, r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil { // another site may not switch a visitor's language
		return refusal(err)
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	lang := r.PostFormValue("lang")
	if !c.i18n.Has(lang) {
		return userError(http.StatusBadRequest, "error.bad_request", fmt.Errorf("language %q", lang))
	}
	http.SetCookie(w, &http.Cookie{
		Name: langCookie, Value: lang, Path: "/", MaxAge: 365 * 24 * 3600,
		HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, backTo(r), http.StatusSeeOther)
	return nil
}

// backTo is the path of r's Referer when it is of the same host, else "/".
func backTo(r *http.Request) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host != r.Host || u.Host == "" || u.User != nil ||
		(u.Scheme != "http" && u.Scheme != "https") {
		return "/"
	}
	p := u.EscapedPath()
	// A path of "//evil" or "/\evil" would be another host to a browser.
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, `/\`) {
		return "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
