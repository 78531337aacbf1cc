package console

import (
	"fmt"
	"html/template"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// funcs are the templates' functions. Each takes the Page ($) first, for its language:
//
//	T $ "area.page.what" args…   translated text; numbers among args get the language's digits
//	num $ 1234                     "1,234" / "۱٬۲۳۴"; floats keep at most 2 decimals
//	usd $ amount                   money.Nanos, api.USD or any integer of nano-dollars, to the
//	                               cent or 2 significant digits: "$12.50", "$0.0012" (see money)
//	price $ p                      money.Price (or api.USD) per million tokens, to the cent or 4
//	                               significant digits: "$0.15 / 1M", "$0.075 / 1M" (see money)
//	price $ in out                 an input and an output price: "$0.05 / $0.10 per 1M"
//	date $ t, datetime $ t         time.Time or *time.Time in UTC: "2025-03-21", "2025-03-21 13:05 UTC";
//	                               in Persian the Solar Hijri date: "۱۴۰۴/۰۱/۰۱"; zero or nil: "—"
//	day $ t                        a short day for chart labels and headings: "Mar 21", "۱ فروردین"
//	pct $ 0.935                    "93.5%" / "۹۳٫۵٪" (a fraction; at most one decimal)
//	tier $ name                    a service tier as stored (tier.Tier's String; "" is silver) or
//	                               by OpenAI's name: "Priority (gold)", "Default (silver)", …;
//	                               a name of no tier as it is
//	csrf $                         the hidden input carrying the session's CSRF token
//	chart $ c                      a Chart (or *Chart) as an inline SVG bar chart (charts.go)
//	nav $                          the menu for the user's roles, the current item marked
//	langs                          the catalogue's languages, for the switch
//
// A value of a type a function does not know is an error, so the page fails loudly in tests.
func (c *Console) funcs() template.FuncMap {
	// The catalogue has no logger of its own until now: report its missing keys in ours.
	if c.i18n != nil && c.log != nil {
		c.i18n.log = c.log
	}
	return template.FuncMap{
		"T": func(p Page, key string, args ...any) string { return c.i18n.T(p.Lang, key, args...) },
		"num": func(p Page, v any) (string, error) {
			if !isNumber(v) {
				return "", fmt.Errorf("num: %T is not a number", v)
			}
			return c.loc(p).number(v), nil
		},
		"usd": func(p Page, v any) (string, error) {
			n, ok := toInt64(v)
			if !ok {
				return "", fmt.Errorf("usd: %T is not an amount of nano-dollars", v)
			}
			return c.loc(p).usd(n), nil
		},
		"price": func(p Page, v any, out ...any) (string, error) {
			var ps []string
			for _, v := range append([]any{v}, out...) {
				n, ok := toInt64(v)
				if !ok {
					return "", fmt.Errorf("price: %T is not a price in nano-dollars per million tokens", v)
				}
				ps = append(ps, c.loc(p).price(n))
			}
			switch len(ps) {
			case 1:
				return c.i18n.T(p.Lang, "layout.price.per_million", ps[0]), nil
			case 2:
				return c.i18n.T(p.Lang, "layout.price.in_out_per_million", ps[0], ps[1]), nil
			}
			return "", fmt.Errorf("price: %d prices, want one, or input and output", len(ps))
		},
		"date": func(p Page, v any) (string, error) {
			t, err := toTime(v)
			if err != nil || t.IsZero() {
				return "—", err
			}
			return c.loc(p).date(t), nil
		},
		"datetime": func(p Page, v any) (string, error) {
			t, err := toTime(v)
			if err != nil || t.IsZero() {
				return "—", err
			}
			return c.loc(p).datetime(t), nil
		},
		"day": func(p Page, v any) (string, error) {
			t, err := toTime(v)
			if err != nil || t.IsZero() {
				return "—", err
			}
			return c.dayLabel(p.Lang, t), nil
		},
		"pct": func(p Page, v any) (string, error) {
			f, ok := toFloat(v)
			if !ok {
				return "", fmt.Errorf("pct: %T is not a number", v)
			}
			return c.loc(p).pct(f), nil
		},
		"tier": func(p Page, name string) string {
			t, err := tier.Parse(name)
			if err != nil {
				return name // written by another version: shown as it is, not failing the page
			}
			return c.i18n.T(p.Lang, "buyer.tier."+t.String())
		},
		"csrf": func(p Page) template.HTML {
			return template.HTML(`<input type="hidden" name="csrf" value="` + template.HTMLEscapeString(p.CSRF) + `">`)
		},
		"chart": func(p Page, v any) (template.HTML, error) {
			switch ch := v.(type) {
			case Chart:
				return c.renderChart(p.Lang, ch), nil
			case *Chart:
				if ch == nil {
					return c.renderChart(p.Lang, Chart{}), nil
				}
				return c.renderChart(p.Lang, *ch), nil
			}
			return "", fmt.Errorf("chart: %T is not a console.Chart", v)
		},
		"nav":   func(p Page) []NavSection { return navFor(p, c.cfg.Batches != nil) },
		"langs": c.i18n.Langs,
	}
}

func (c *Console) loc(p Page) *locale { return c.i18n.locale(p.Lang) }

// dayLabel is a short day in lang, for a chart's labels: "Mar 21" in English, "۱ فروردین" in
// Persian (its calendar's month names come from the catalogue, lang.month.1 to 12).
func (c *Console) dayLabel(lang string, t time.Time) string {
	l := c.i18n.locale(lang)
	_, m, d := l.ymd(t)
	return c.i18n.T(lang, "lang.day_month", l.localDigits(strconv.Itoa(d)), c.i18n.T(lang, "lang.month."+strconv.Itoa(m)))
}

// NavItem is an entry of the menu.
type NavItem struct {
	Href    string
	Key     string // its label's message key
	Current bool   // the page shown is this item's, or below it
}

// NavSection is the menu of one role.
type NavSection struct {
	Key   string // its heading's message key
	Items []NavItem
}

// navFor is the menu of p's user: a section per role, in the order buyer, provider, admin;
// the buyer's batches when the console has them (Config.Batches).
// The item whose path is the longest prefix of the page's path is the current one, so that
// /buyer/requests/req_1 marks Requests and /provider/nodes/n1 marks Nodes.
func navFor(p Page, batches bool) []NavSection {
	u := p.User
	if u == nil {
		return nil
	}
	var out []NavSection
	market := NavItem{Href: "/models", Key: "layout.nav.models"}
	if u.Has(store.RoleBuyer) {
		items := []NavItem{
			{Href: "/buyer", Key: "layout.nav.overview"},
			{Href: "/buyer/keys", Key: "layout.nav.keys"},
			{Href: "/buyer/playground", Key: "layout.nav.playground"},
			{Href: "/buyer/requests", Key: "layout.nav.requests"},
		}
		if batches {
			items = append(items, NavItem{Href: "/buyer/batches", Key: "layout.nav.batches"})
		}
		items = append(items, NavItem{Href: "/buyer/splits", Key: "layout.nav.splits"}, market)
		out = append(out, NavSection{Key: "layout.nav.buyer", Items: items})
	}
	if u.Has(store.RoleProvider) {
		items := []NavItem{
			{Href: "/provider", Key: "layout.nav.nodes"},
			{Href: "/provider/earnings", Key: "layout.nav.earnings"},
		}
		if !u.Has(store.RoleBuyer) {
			items = append(items, market)
		}
		out = append(out, NavSection{Key: "layout.nav.provider", Items: items})
	}
	if u.Has(store.RoleAdmin) {
		items := []NavItem{
			{Href: "/admin", Key: "layout.nav.fleet"},
			{Href: "/admin/accounts", Key: "layout.nav.accounts"},
		}
		if !u.Has(store.RoleBuyer) && !u.Has(store.RoleProvider) {
			items = append(items, market)
		}
		out = append(out, NavSection{Key: "layout.nav.admin", Items: items})
	}
	best, bi, bj := -1, -1, -1
	for i, s := range out {
		for j, it := range s.Items {
			if (p.Path == it.Href || strings.HasPrefix(p.Path, it.Href+"/")) && len(it.Href) > best {
				best, bi, bj = len(it.Href), i, j
			}
		}
	}
	if bi >= 0 {
		out[bi].Items[bj].Current = true
	}
	return out
}

// Numbers.

func isNumber(v any) bool {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// toInt64 reads any integer (money.Nanos, api.USD, money.Price, int, …).
func toInt64(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	if n, ok := toInt64(v); ok {
		return float64(n), true
	}
	return 0, false
}

func toTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t, nil
	case *time.Time:
		if t == nil {
			return time.Time{}, nil
		}
		return *t, nil
	}
	return time.Time{}, fmt.Errorf("%T is not a time.Time", v)
}

// localDigits writes the ASCII digits of s with l's digits.
func (l *locale) localDigits(s string) string {
	if l.digits[0] == "0" {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteString(l.digits[r-'0'])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// localNumber writes a number that fmt wrote ("-12.5") with l's digits and decimal separator.
func (l *locale) localNumber(s string) string {
	return l.localDigits(strings.ReplaceAll(s, ".", l.decimal))
}

// grouped writes an unsigned integer's ASCII digits with l's digits and thousands separator.
func (l *locale) grouped(digits string) string {
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteString(l.group)
		}
		b.WriteString(l.digits[r-'0'])
	}
	return b.String()
}

// decimal writes a sign, whole part (ASCII digits) and fraction (ASCII digits, may be "") the
// way l writes numbers.
func (l *locale) decimalNumber(neg bool, whole, frac string) string {
	s := l.grouped(whole)
	if frac != "" {
		s += l.decimal + l.localDigits(frac)
	}
	if neg {
		s = "-" + s
	}
	return s
}

// number writes an integer with thousands separators, or a float with at most 2 decimals.
func (l *locale) number(v any) string {
	if n, ok := toInt64(v); ok {
		return l.integer(n)
	}
	if f, ok := toFloat(v); ok {
		return l.float(f, 2)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Uint64 || rv.Kind() == reflect.Uint || rv.Kind() == reflect.Uintptr {
		return l.grouped(strconv.FormatUint(rv.Uint(), 10))
	}
	return l.localDigits(fmt.Sprint(v))
}

func (l *locale) integer(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	return l.decimalNumber(neg, strings.TrimPrefix(s, "-"), "")
}

// float writes f rounded to at most prec decimals, trailing zeros trimmed.
func (l *locale) float(f float64, prec int) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	s := strconv.FormatFloat(f, 'f', prec, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	if neg && strings.Trim(whole+frac, "0") == "" {
		neg = false // "-0"
	}
	return l.decimalNumber(neg, whole, frac)
}

// fixed writes f with exactly prec decimals.
func (l *locale) fixed(f float64, prec int) string {
	s := strconv.FormatFloat(math.Abs(f), 'f', prec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	return l.decimalNumber(f < 0 && strings.Trim(whole+frac, "0") != "", whole, frac)
}

// Money: every amount and price the console shows, server or script, is written by one
// rule, locale.money, so that a page never shows "$0.00" beside "$0.000000368":
//
//   - an amount (balances, costs, caps, totals, earnings) to the cent, but with at least
//     amountDigits significant digits: "$12.50", "$0.50", "$0.012", "$0.00037", "$0.000000001";
//   - a price per million tokens the same way with priceDigits: "$0.15", "$0.075", "$0.1725".
//
// Rounding is half away from zero, on the integer nano-dollars (never a float); zero is
// "$0.00", and no other amount reads as zero. static/money.js is the same rule for the
// playground's script (the browser tests hold the two to one table).
const (
	amountDigits = 2
	priceDigits  = 4
)

// usd writes an amount of nano-dollars (see money).
func (l *locale) usd(n int64) string { return l.money(n, amountDigits) }

// price writes a price in nano-dollars per million tokens, without its unit (see money).
func (l *locale) price(n int64) string { return l.money(n, priceDigits) }

// money writes n nano-dollars rounded to the cent, or to sig significant digits when the
// cent would keep fewer (never past the nano-dollar), trailing zeros past the cent trimmed:
// "$1,234.50", "-$1.25", "$0.0012", "$0.00"; in Persian "$۰٫۰۰۱۲".
func (l *locale) money(n int64, sig int) string {
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-(n + 1)) + 1
	}
	// The sig-th significant digit of u nano-dollars is at decimal 9 - len(u) + sig.
	dec := min(max(9-len(strconv.FormatUint(u, 10))+sig, 2), 9)
	unit := uint64(math.Pow10(9 - dec))
	q, r := u/unit, u%unit
	if 2*r >= unit {
		q++ // half away from zero; a carry (0.0999 → 0.100) leaves a zero that is trimmed
	}
	scale := uint64(math.Pow10(dec))
	frac := strings.TrimRight(fmt.Sprintf("%0*d", dec, q%scale), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := "$" + l.decimalNumber(false, strconv.FormatUint(q/scale, 10), frac)
	if neg {
		s = "-" + s
	}
	return s
}

// dollars writes a float amount of dollars (a chart's value) as money writes an amount.
func (l *locale) dollars(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64/1e9 {
		return "—"
	}
	return l.usd(int64(math.Round(f * 1e9)))
}

// pct writes a fraction as a percentage with at most one decimal: 0.935 → "93.5%".
func (l *locale) pct(f float64) string {
	return l.float(f*100, 1) + l.percent
}

// Dates.

// ymd is t's UTC date in l's calendar.
func (l *locale) ymd(t time.Time) (y, m, d int) {
	t = t.UTC()
	if l.calendar == "persian" {
		return gregorianToPersian(t.Year(), int(t.Month()), t.Day())
	}
	return t.Year(), int(t.Month()), t.Day()
}

// date writes t's UTC day: "2025-03-21"; in the Persian calendar "۱۴۰۴/۰۱/۰۱" (year first, as
// Iranians write it).
func (l *locale) date(t time.Time) string {
	y, m, d := l.ymd(t)
	sep := "-"
	if l.calendar == "persian" {
		sep = "/"
	}
	return l.localDigits(fmt.Sprintf("%04d%s%02d%s%02d", y, sep, m, sep, d))
}

// datetime writes t's UTC day and minute: "2025-03-21 13:05 UTC".
func (l *locale) datetime(t time.Time) string {
	t = t.UTC()
	return l.date(t) + " " + l.localDigits(t.Format("15:04")) + " UTC"
}

// gregorianToPersian converts a Gregorian date to the Solar Hijri (Jalali) calendar, Iran's
// civil calendar, by the arithmetic of its 33-year cycles, which agrees with the official
// (astronomical) calendar for the years around ours.
func gregorianToPersian(gy, gm, gd int) (jy, jm, jd int) {
	cum := [12]int{0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334}
	gy2 := gy
	if gm > 2 {
		gy2 = gy + 1
	}
	days := 355666 + 365*gy + (gy2+3)/4 - (gy2+99)/100 + (gy2+399)/400 + gd + cum[gm-1]
	jy = -1595 + 33*(days/12053)
	days %= 12053
	jy += 4 * (days / 1461)
	days %= 1461
	if days > 365 {
		jy += (days - 1) / 365
		days = (days - 1) % 365
	}
	if days < 186 {
		jm, jd = 1+days/31, 1+days%31
	} else {
		jm, jd = 7+(days-186)/30, 1+(days-186)%30
	}
	return jy, jm, jd
}
