package console

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"text/template/parse"
	"time"
)

// uiConsole is a console with the real catalogue and only the error page, so that these tests
// do not depend on the other pages.
func uiConsole(t *testing.T) *Console {
	t.Helper()
	cat, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	c := &Console{cfg: Config{Now: time.Now}, log: slog.New(slog.DiscardHandler), i18n: cat, pages: map[string]*template.Template{}}
	tpl, err := template.New("layout.html").Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/error.html")
	if err != nil {
		t.Fatal(err)
	}
	c.pages["error"] = tpl
	return c
}

// Every language has every key of every other, with the same number of arguments.
func TestCatalog_SameKeysInEveryLanguage(t *testing.T) {
	cat, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cat.Langs()); got < 2 {
		t.Fatalf("%d languages, want en and fa at least", got)
	}
	for _, a := range cat.Langs() {
		for _, b := range cat.Langs() {
			if a.Code == b.Code {
				continue
			}
			var missing []string
			for key, text := range cat.msgs[a.Code] {
				other, ok := cat.msgs[b.Code][key]
				if !ok {
					missing = append(missing, key)
					continue
				}
				if x, y := verbArgs(text), verbArgs(other); x != y && a.Code < b.Code {
					t.Errorf("%q takes %d arguments in %s (%q) but %d in %s (%q)", key, x, a.Code, text, y, b.Code, other)
				}
			}
			slices.Sort(missing)
			if len(missing) > 0 {
				t.Errorf("messages/%s lacks %d keys that messages/%s has:\n  %s", b.Code, len(missing), a.Code, strings.Join(missing, "\n  "))
			}
		}
	}
}

var verbRE = regexp.MustCompile(`%(\[(\d+)\])?[-+# 0]*\d*(\.\d+)?[a-zA-Z%]`)

// verbArgs is how many arguments a catalogue text formats.
func verbArgs(text string) int {
	n, seq := 0, 0
	for _, m := range verbRE.FindAllStringSubmatch(text, -1) {
		if strings.HasSuffix(m[0], "%") {
			continue
		}
		if m[2] != "" {
			i, _ := strconv.Atoi(m[2])
			seq = i
		} else {
			seq++
		}
		n = max(n, seq)
	}
	return n
}

// Every literal key of a T call in the templates exists, with as many arguments as its text.
func TestCatalog_TemplateKeysExist(t *testing.T) {
	c := uiConsole(t)
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	seenKeys := 0
	for _, name := range names {
		tpl, err := template.New(name).Funcs(c.funcs()).ParseFS(templateFS, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, d := range tpl.Templates() {
			if d.Tree == nil {
				continue
			}
			walkT(d.Tree.Root, func(key string, args int, pos parse.Pos) {
				seenKeys++
				text, ok := c.i18n.msgs[defaultLang][key]
				switch {
				case !ok:
					t.Errorf("%s: T %q: no such key in messages/%s", name, key, defaultLang)
				case verbArgs(text) != args:
					t.Errorf("%s: T %q with %d arguments, but its text %q takes %d", name, key, args, text, verbArgs(text))
				}
			})
		}
	}
	if seenKeys < 10 {
		t.Errorf("found %d T calls in the templates: is the walk broken?", seenKeys)
	}
	t.Logf("%d T calls with literal keys in %d templates", seenKeys, len(names))
}

// walkT calls found for each {{T $ "key" args…}} under n.
func walkT(n parse.Node, found func(key string, args int, pos parse.Pos)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, m := range n.Nodes {
			walkT(m, found)
		}
	case *parse.ActionNode:
		walkT(n.Pipe, found)
	case *parse.IfNode:
		walkT(n.Pipe, found)
		walkT(n.List, found)
		walkT(n.ElseList, found)
	case *parse.RangeNode:
		walkT(n.Pipe, found)
		walkT(n.List, found)
		walkT(n.ElseList, found)
	case *parse.WithNode:
		walkT(n.Pipe, found)
		walkT(n.List, found)
		walkT(n.ElseList, found)
	case *parse.TemplateNode:
		walkT(n.Pipe, found)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, cmd := range n.Cmds {
			walkT(cmd, found)
		}
	case *parse.CommandNode:
		if len(n.Args) >= 3 {
			if id, ok := n.Args[0].(*parse.IdentifierNode); ok && id.Ident == "T" {
				if s, ok := n.Args[2].(*parse.StringNode); ok {
					found(s.Text, len(n.Args)-3, n.Pos)
				}
			}
		}
		for _, a := range n.Args {
			walkT(a, found)
		}
	}
}

// Message keys in the package's Go code exist: the flash keys of redirect, the keys of T
// calls, and every string literal starting with "error." or "layout." (error pages, menu).
func TestCatalog_GoKeysExist(t *testing.T) {
	cat, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	keyRE := regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)+$`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	check := func(e ast.Expr, always bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !keyRE.MatchString(s) || !always && !strings.HasPrefix(s, "error.") && !strings.HasPrefix(s, "layout.") {
			return
		}
		if ext := filepath.Ext(s); ext == ".html" || ext == ".json" || ext == ".css" || ext == ".js" {
			return // a file's name
		}
		if _, ok := cat.msgs[defaultLang][s]; !ok {
			t.Errorf("%s: %q: messages/%s has no such key", fset.Position(lit.Pos()), s, defaultLang)
		}
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					name = fn.Name
				}
				switch {
				case name == "redirect" && len(n.Args) > 0:
					check(n.Args[len(n.Args)-1], true)
				case name == "T" && len(n.Args) >= 2:
					check(n.Args[1], true)
				}
			case *ast.BasicLit:
				check(n, false)
			}
			return true
		})
	}
}

func TestLoadCatalog_Refuses(t *testing.T) {
	en := `{"lang.name": "English", "a.b": "x"}`
	tests := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"a key in two files", fstest.MapFS{
			"en/one.json": {Data: []byte(en)},
			"en/two.json": {Data: []byte(`{"a.b": "y"}`)},
		}, `"a.b" is already defined`},
		{"a key twice in one file", fstest.MapFS{
			"en/one.json": {Data: []byte(`{"lang.name": "English", "a.b": "x", "a.b": "y"}`)},
		}, "defined twice"},
		{"a nested object", fstest.MapFS{
			"en/one.json": {Data: []byte(`{"lang.name": "English", "a": {"b": "x"}}`)},
		}, "want a string"},
		{"an empty text", fstest.MapFS{
			"en/one.json": {Data: []byte(`{"lang.name": "English", "a.b": " "}`)},
		}, "empty"},
		{"no English", fstest.MapFS{
			"fa/one.json": {Data: []byte(`{"lang.name": "فارسی"}`)},
		}, "default language"},
		{"no name", fstest.MapFS{
			"en/one.json": {Data: []byte(en)},
			"de/one.json": {Data: []byte(`{"a.b": "x"}`)},
		}, "lang.name"},
		{"bad digits", fstest.MapFS{
			"en/one.json": {Data: []byte(`{"lang.name": "English", "lang.digits": "0123"}`)},
		}, "lang.digits"},
		{"trailing data", fstest.MapFS{
			"en/one.json": {Data: []byte(en + `{}`)},
		}, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCatalog(tt.fs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadCatalog: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestCatalog_T(t *testing.T) {
	var logs bytes.Buffer
	cat, err := loadCatalog(fstest.MapFS{
		"en/a.json": {Data: []byte(`{"lang.name": "English", "x.hello": "Hello %s", "x.count": "%d requests", "x.only_en": "English only"}`)},
		"fa/a.json": {Data: []byte(`{"lang.name": "فارسی", "lang.dir": "rtl", "lang.digits": "۰۱۲۳۴۵۶۷۸۹", "lang.group": "٬", "lang.decimal": "٫", "x.hello": "سلام %s", "x.count": "%d درخواست"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	cat.log = slog.New(slog.NewTextHandler(&logs, nil))
	tests := []struct {
		lang, key string
		args      []any
		want      string
	}{
		{"en", "x.hello", []any{"Ada"}, "Hello Ada"},
		{"fa", "x.hello", []any{"آدا"}, "سلام آدا"},
		{"en", "x.count", []any{12345}, "12,345 requests"},
		{"fa", "x.count", []any{12345}, "۱۲٬۳۴۵ درخواست"},
		{"fa", "x.hello", []any{"r2d2"}, "سلام r2d2"}, // strings keep their digits
		{"fa", "x.only_en", nil, "English only"},      // falls back to English
		{"fa", "x.nowhere", nil, "x.nowhere"},         // then to the key
		{"fa", "x.nowhere", nil, "x.nowhere"},         // logged once only
		{"de", "x.hello", []any{"Ada"}, "Hello Ada"},
	}
	for _, tt := range tests {
		if got := cat.T(tt.lang, tt.key, tt.args...); got != tt.want {
			t.Errorf("T(%s, %s, %v) = %q, want %q", tt.lang, tt.key, tt.args, got, tt.want)
		}
	}
	if got := strings.Count(logs.String(), "missing message"); got != 3 { // fa x.only_en, fa x.nowhere, de x.hello
		t.Errorf("%d missing keys logged, want 3:\n%s", got, logs.String())
	}
	if got, want := cat.Dir("fa"), "rtl"; got != want {
		t.Errorf("Dir(fa) = %q, want %q", got, want)
	}
	if got, want := cat.Dir("en"), "ltr"; got != want {
		t.Errorf("Dir(en) = %q, want %q", got, want)
	}
	if got, want := cat.Dir("xx"), "ltr"; got != want {
		t.Errorf("Dir(xx) = %q, want %q", got, want)
	}
}

func TestCatalog_Langs(t *testing.T) {
	cat, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	want := []Lang{{"en", "English", "ltr"}, {"fa", "فارسی", "rtl"}}
	if got := cat.Langs(); !slices.Equal(got[:min(2, len(got))], want) {
		t.Errorf("Langs() = %v, want %v first", got, want)
	}
}

func TestMatchAcceptLanguage(t *testing.T) {
	has := func(l string) bool { return l == "en" || l == "fa" }
	tests := []struct{ header, want string }{
		{"fa-IR,fa;q=0.9,en-US;q=0.8,en;q=0.7", "fa"},
		{"en-US,en;q=0.9,fa;q=0.8", "en"},
		{"en-US;q=0.8, fa-IR", "fa"},
		{"de-DE,de;q=0.9,fa;q=0.5", "fa"},
		{"de-DE,de;q=0.9", ""},
		{"FA", "fa"},
		{"fa;q=0", ""},
		{"*", ""},
		{"fa;q=abc,en;q=0.1", "en"},
		{"fa;q=2", ""},
		{"", ""},
		{",,;;q=,", ""},
		{"en-GB-oxendict", "en"},
		{"de;q=1.0, en;q=0.5, fa;q=0.5", "en"}, // equal quality: the first listed
	}
	for _, tt := range tests {
		if got := matchAcceptLanguage(tt.header, has); got != tt.want {
			t.Errorf("matchAcceptLanguage(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

func FuzzMatchAcceptLanguage(f *testing.F) {
	for _, s := range []string{"fa-IR,fa;q=0.9,en-US;q=0.8", "en;q=0.5", "*;q=0", ";q=1;q=2,,,"} {
		f.Add(s)
	}
	has := func(l string) bool { return l == "en" || l == "fa" }
	f.Fuzz(func(t *testing.T, header string) {
		if got := matchAcceptLanguage(header, has); got != "" && !has(got) {
			t.Errorf("matchAcceptLanguage(%q) = %q, not a known language", header, got)
		}
	})
}

func TestConsole_Lang(t *testing.T) {
	c := uiConsole(t)
	tests := []struct {
		name, cookie, accept, want string
	}{
		{"nothing", "", "", "en"},
		{"browser", "", "fa-IR,fa;q=0.9,en;q=0.8", "fa"},
		{"browser, unknown", "", "de-DE", "en"},
		{"cookie beats browser", "en", "fa-IR", "en"},
		{"cookie", "fa", "", "fa"},
		{"unknown cookie", "xx", "fa", "fa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/buyer", nil)
			if tt.cookie != "" {
				r.AddCookie(&http.Cookie{Name: langCookie, Value: tt.cookie})
			}
			if tt.accept != "" {
				r.Header.Set("Accept-Language", tt.accept)
			}
			if got := c.lang(r); got != tt.want {
				t.Errorf("lang = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConsole_SetLang(t *testing.T) {
	c := uiConsole(t)
	tests := []struct {
		name, lang, referer string
		status              int
		location            string
	}{
		{"back to the page", "fa", "http://example.com/buyer/keys?x=1", http.StatusSeeOther, "/buyer/keys?x=1"},
		{"no referer", "en", "", http.StatusSeeOther, "/"},
		{"another site", "fa", "http://evil.example/buyer", http.StatusSeeOther, "/"},
		{"a scheme-relative path", "fa", "http://example.com//evil.example/x", http.StatusSeeOther, "/"},
		{"not a web page", "fa", "javascript:alert(1)", http.StatusSeeOther, "/"},
		{"an unknown language", "xx", "http://example.com/buyer", http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := url.Values{"lang": {tt.lang}}
			r := httptest.NewRequest("POST", "http://example.com/lang", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.referer != "" {
				r.Header.Set("Referer", tt.referer)
			}
			w := httptest.NewRecorder()
			c.handle(c.setLang).ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status != http.StatusSeeOther {
				if len(w.Result().Cookies()) != 0 {
					t.Errorf("cookies %v set for an unknown language", w.Result().Cookies())
				}
				return
			}
			if got := w.Header().Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			var ck *http.Cookie
			for _, k := range w.Result().Cookies() {
				if k.Name == langCookie {
					ck = k
				}
			}
			if ck == nil || ck.Value != tt.lang || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge <= 0 {
				t.Errorf("cookie %+v, want lang=%s, Path=/, SameSite=Lax, lasting", ck, tt.lang)
			}
		})
	}
}
