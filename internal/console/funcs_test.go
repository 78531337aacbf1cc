package console

import (
	"html/template"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// execFuncs executes a template snippet with the console's functions for a page in lang.
func execFuncs(t *testing.T, c *Console, lang, snippet string, data any) (string, error) {
	t.Helper()
	tpl, err := template.New("x").Funcs(c.funcs()).Parse(snippet)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = tpl.Execute(&b, Page{Lang: lang, Dir: c.i18n.Dir(lang), CSRF: `tok"<en>`, Data: data})
	return b.String(), err
}

func TestFuncs_Formats(t *testing.T) {
	c := uiConsole(t)
	day := time.Date(2025, 3, 21, 13, 5, 59, 0, time.FixedZone("IRST", 12600)) // 09:35 UTC
	tests := []struct {
		snippet string
		data    any
		en, fa  string
	}{
		{`{{num . .Data}}`, 1234567, "1,234,567", "۱٬۲۳۴٬۵۶۷"},
		{`{{num . .Data}}`, int64(-1234), "-1,234", "-۱٬۲۳۴"},
		{`{{num . .Data}}`, 0, "0", "۰"},
		{`{{num . .Data}}`, 999, "999", "۹۹۹"},
		{`{{num . .Data}}`, 1234.5, "1,234.5", "۱٬۲۳۴٫۵"},
		{`{{num . .Data}}`, 1.0 / 3, "0.33", "۰٫۳۳"},
		{`{{num . .Data}}`, uint64(math.MaxUint64), "18,446,744,073,709,551,615", "۱۸٬۴۴۶٬۷۴۴٬۰۷۳٬۷۰۹٬۵۵۱٬۶۱۵"},
		{`{{usd . .Data}}`, money.Nanos(0), "$0.00", "$۰٫۰۰"},
		{`{{usd . .Data}}`, money.Nanos(368), "$0.00000037", "$۰٫۰۰۰۰۰۰۳۷"},
		{`{{usd . .Data}}`, 12*money.USD + money.USD/2, "$12.50", "$۱۲٫۵۰"},
		{`{{usd . .Data}}`, api.USD(10_000_000), "$0.01", "$۰٫۰۱"},
		{`{{usd . .Data}}`, int64(-1_250_000_000), "-$1.25", "-$۱٫۲۵"},
		{`{{price . .Data}}`, money.Price(150_000_000), "$0.15 / 1M", "$۰٫۱۵ برای هر ۱ میلیون"},
		{`{{price . .Data}}`, money.Price(75_000_000), "$0.075 / 1M", "$۰٫۰۷۵ برای هر ۱ میلیون"},
		{`{{price . .Data}}`, api.USD(2 * money.USD), "$2.00 / 1M", "$۲٫۰۰ برای هر ۱ میلیون"},
		{`{{pct . .Data}}`, 0.93, "93%", "۹۳٪"},
		{`{{pct . .Data}}`, 0.935, "93.5%", "۹۳٫۵٪"},
		{`{{pct . .Data}}`, 1, "100%", "۱۰۰٪"},
		{`{{date . .Data}}`, day, "2025-03-21", "۱۴۰۴/۰۱/۰۱"},
		{`{{datetime . .Data}}`, day, "2025-03-21 09:35 UTC", "۱۴۰۴/۰۱/۰۱ ۰۹:۳۵ UTC"},
		{`{{date . .Data}}`, &day, "2025-03-21", "۱۴۰۴/۰۱/۰۱"},
		{`{{date . .Data}}`, time.Time{}, "—", "—"},
		{`{{date . .Data}}`, (*time.Time)(nil), "—", "—"},
		{`{{day . .Data}}`, day, "Mar 21", "۱ فروردین"},
		{`{{tier . .Data}}`, "gold", "Priority (gold)", "اولویت‌دار (طلایی)"},
		{`{{tier . .Data}}`, "flex", "Flex (bronze)", "منعطف (برنزی)"},
		{`{{tier . .Data}}`, "", "Default (silver)", "پیش‌فرض (نقره‌ای)"}, // a record from before tiers
		{`{{tier . .Data}}`, "platinum", "platinum", "platinum"},          // no tier this version knows
		{`{{T . "layout.account" "a@b.c"}}`, nil, "Signed in as a@b.c", "واردشده با a@b.c"},
		{`{{csrf .}}`, nil, `<input type="hidden" name="csrf" value="tok&#34;&lt;en&gt;">`, `<input type="hidden" name="csrf" value="tok&#34;&lt;en&gt;">`},
	}
	for _, tt := range tests {
		for lang, want := range map[string]string{"en": tt.en, "fa": tt.fa} {
			got, err := execFuncs(t, c, lang, tt.snippet, tt.data)
			if err != nil || got != want {
				t.Errorf("%s %s(%#v) = %q, %v; want %q", lang, tt.snippet, tt.data, got, err, want)
			}
		}
	}
}

// A value of the wrong type fails the page rather than printing nonsense.
func TestFuncs_WrongTypes(t *testing.T) {
	c := uiConsole(t)
	for _, tt := range []struct {
		snippet string
		data    any
	}{
		{`{{num . .Data}}`, "12"},
		{`{{usd . .Data}}`, 1.5},
		{`{{price . .Data}}`, "0.15"},
		{`{{date . .Data}}`, "2025-03-21"},
		{`{{pct . .Data}}`, "93"},
		{`{{chart . .Data}}`, "chart"},
	} {
		if got, err := execFuncs(t, c, "en", tt.snippet, tt.data); err == nil {
			t.Errorf("%s(%#v) = %q, want an error", tt.snippet, tt.data, got)
		}
	}
}

func TestGregorianToPersian(t *testing.T) {
	tests := []struct {
		g       time.Time
		y, m, d int
	}{
		{time.Date(2025, 3, 21, 0, 0, 0, 0, time.UTC), 1404, 1, 1}, // Nowruz
		{time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC), 1403, 12, 30},
		{time.Date(2024, 3, 20, 0, 0, 0, 0, time.UTC), 1403, 1, 1},
		{time.Date(2023, 3, 21, 0, 0, 0, 0, time.UTC), 1402, 1, 1},
		{time.Date(2020, 3, 20, 0, 0, 0, 0, time.UTC), 1399, 1, 1},
		{time.Date(2024, 12, 21, 0, 0, 0, 0, time.UTC), 1403, 10, 1}, // after Yalda
		{time.Date(2024, 9, 22, 0, 0, 0, 0, time.UTC), 1403, 7, 1},   // Mehr begins
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1404, 10, 11},
	}
	for _, tt := range tests {
		y, m, d := gregorianToPersian(tt.g.Year(), int(tt.g.Month()), tt.g.Day())
		if y != tt.y || m != tt.m || d != tt.d {
			t.Errorf("%s = %d/%d/%d, want %d/%d/%d", tt.g.Format(time.DateOnly), y, m, d, tt.y, tt.m, tt.d)
		}
	}
}

func TestNavFor(t *testing.T) {
	both := &store.User{Roles: []string{store.RoleBuyer, store.RoleProvider}}
	tests := []struct {
		name     string
		user     *store.User
		path     string
		sections []string
		current  string
	}{
		{"visitor", nil, "/login", nil, ""},
		{"buyer overview", &store.User{Roles: []string{store.RoleBuyer}}, "/buyer", []string{"layout.nav.buyer"}, "/buyer"},
		{"a request", &store.User{Roles: []string{store.RoleBuyer}}, "/buyer/requests/req_1", []string{"layout.nav.buyer"}, "/buyer/requests"},
		{"a batch", &store.User{Roles: []string{store.RoleBuyer}}, "/buyer/batches/batch_1", []string{"layout.nav.buyer"}, "/buyer/batches"},
		{"both roles", both, "/provider/nodes/n1", []string{"layout.nav.buyer", "layout.nav.provider"}, "/provider"},
		{"models", both, "/models", []string{"layout.nav.buyer", "layout.nav.provider"}, "/models"},
		{"admin", &store.User{Roles: []string{store.RoleAdmin}}, "/admin/accounts", []string{"layout.nav.admin"}, "/admin/accounts"},
		{"not a menu page", both, "/buyerx", []string{"layout.nav.buyer", "layout.nav.provider"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sections []string
			current := ""
			markets := 0
			for _, s := range navFor(Page{User: tt.user, Path: tt.path}, true) {
				sections = append(sections, s.Key)
				for _, it := range s.Items {
					if it.Current {
						if current != "" {
							t.Errorf("two current items: %s and %s", current, it.Href)
						}
						current = it.Href
					}
					if it.Href == "/models" {
						markets++
					}
				}
			}
			if strings.Join(sections, ",") != strings.Join(tt.sections, ",") {
				t.Errorf("sections %v, want %v", sections, tt.sections)
			}
			if current != tt.current {
				t.Errorf("current %q, want %q", current, tt.current)
			}
			if tt.user != nil && markets != 1 {
				t.Errorf("/models in the menu %d times, want once", markets)
			}
		})
	}
	// A console without batches (no Config.Batches) has no menu entry for them.
	for _, s := range navFor(Page{User: &store.User{Roles: []string{store.RoleBuyer}}, Path: "/buyer"}, false) {
		for _, it := range s.Items {
			if it.Href == "/buyer/batches" {
				t.Errorf("the menu has %s, though the console has no batches", it.Href)
			}
		}
	}
}

// The layout has what the browser tests and people need: the switch, log-out, menu, flash.
func TestLayout(t *testing.T) {
	c := uiConsole(t)
	tpl, err := template.New("layout.html").Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html")
	if err == nil {
		_, err = tpl.New("page").Parse(`{{define "title"}}{{T . "layout.nav.keys"}}{{end}}{{define "content"}}<p>page</p>{{end}}`)
	}
	if err != nil {
		t.Fatal(err)
	}
	user := &store.User{Email: "ada@example.com", Roles: []string{store.RoleBuyer}}
	for _, tt := range []struct {
		page Page
		want []string
		not  []string
	}{
		{Page{Lang: "fa", Dir: "rtl", User: user, CSRF: "tok", Path: "/buyer/keys", Flash: "کلید ساخته شد"}, []string{
			`<html lang="fa" dir="rtl">`, `id="lang"`, `name="lang"`, `id="lang-submit"`, `<option value="fa" lang="fa" dir="rtl" selected>فارسی</option>`,
			`action="/logout"`, `id="logout"`, `name="csrf" value="tok"`, `href="/buyer/keys" aria-current="page"`,
			`role="status">کلید ساخته شد</div>`, `href="#main"`, `id="main"`, `<p>page</p>`, `<title>کلیدهای API · ShareAI</title>`,
		}, []string{`href="/provider"`, `href="/signup"`}},
		{Page{Lang: "en", Dir: "ltr", Path: "/login"}, []string{
			`<html lang="en" dir="ltr">`, `id="lang-submit"`, `href="/login"`, `href="/signup"`, `<option value="en" lang="en" dir="ltr" selected>English</option>`,
		}, []string{`id="logout"`, `role="status"`, `aria-current`, `style=`, `<script`}},
	} {
		var b strings.Builder
		if err := tpl.ExecuteTemplate(&b, "layout.html", tt.page); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s layout lacks %s:\n%s", tt.page.Lang, w, b.String())
			}
		}
		for _, w := range tt.not {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s layout has %s", tt.page.Lang, w)
			}
		}
	}
}

func TestErrorPage(t *testing.T) {
	c := uiConsole(t)
	for lang, want := range map[string]string{"en": "This page does not exist.", "fa": "این صفحه وجود ندارد."} {
		var b strings.Builder
		err := c.pages["error"].ExecuteTemplate(&b, "layout.html", Page{Lang: lang, Dir: c.i18n.Dir(lang), Data: errorPage{Title: "error.title_not_found", Message: "error.not_found", Status: 404}})
		if err != nil || !strings.Contains(b.String(), want) || !strings.Contains(b.String(), `href="/"`) {
			t.Errorf("%s error page, %v: want %q and a link home:\n%s", lang, err, want, b.String())
		}
	}
}
