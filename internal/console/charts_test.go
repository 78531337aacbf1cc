package console

import (
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// wellFormed checks that the chart's markup is balanced (it is also valid XML).
func wellFormed(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("chart markup: %v:\n%s", err, s)
		}
	}
}

func TestChart_Escapes(t *testing.T) {
	c := uiConsole(t)
	evil := `<script>alert(1)</script>"'&`
	out := string(c.renderChart("en", Chart{
		Title:  evil + `" onload="x`,
		Labels: []string{evil, "ok"},
		Series: []Series{{Name: `<img src=x onerror=alert(1)>`, Values: []float64{1, 2}}},
		Unit:   `</text><script>`,
	}))
	wellFormed(t, out)
	for _, bad := range []string{"<script", "<img", `" onload="`} {
		if strings.Contains(out, bad) {
			t.Errorf("chart contains %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "&lt;script&gt;") {
		t.Errorf("chart lacks the escaped label:\n%s", out)
	}
}

func TestChart_Accessible(t *testing.T) {
	c := uiConsole(t)
	out := string(c.renderChart("en", Chart{
		Title:  "Tokens per day",
		Labels: []string{"Mar 20", "Mar 21", "Mar 22"},
		Series: []Series{{Name: "llama3", Values: []float64{100, 2500, 40}}, {Name: "qwen", Values: []float64{10, 0, 7}}},
		Unit:   "tokens",
	}))
	wellFormed(t, out)
	for _, want := range []string{
		`role="img"`, `aria-label="Tokens per day"`, `<title>Tokens per day</title>`, `width="100%" height="156"`,
		`<figcaption>Tokens per day <span class="chart-unit">(tokens)</span></figcaption>`,
		`class="chart-legend"`, `llama3</li>`, `<summary>Show the numbers</summary>`,
		`<title>Mar 21 · llama3: 2,500</title>`, `<td class="num">2,500</td>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "style=") {
		t.Errorf("chart has a style attribute, which the CSP forbids:\n%s", out)
	}
	if strings.Contains(out, "viewBox") {
		t.Errorf("chart has a viewBox: scaled, its text would not be the page's size:\n%s", out)
	}
	if got := strings.Count(out, `<rect class="bar`); got != 5 { // a zero draws no bar
		t.Errorf("%d bars, want 5", got)
	}
}

func TestChart_Empty(t *testing.T) {
	c := uiConsole(t)
	for _, ch := range []Chart{
		{Title: "Spend"},
		{Title: "Spend", Labels: []string{"a"}},
		{Title: "Spend", Labels: []string{"a", "b"}, Series: []Series{{Name: "x", Values: []float64{0, math.NaN()}}}},
	} {
		for lang, want := range map[string]string{"en": "No data yet", "fa": "هنوز داده‌ای نیست"} {
			out := string(c.renderChart(lang, ch))
			if !strings.Contains(out, want) || strings.Contains(out, "<svg") {
				t.Errorf("%s empty chart %+v = %s, want %q and no SVG", lang, ch, out, want)
			}
		}
	}
}

var labelRE = regexp.MustCompile(`<text class="label[^"]*" x="([0-9.]+)%"[^>]*>([^<]*)</text>`)

// In Persian the chart reads right to left: the first label is at the right.
func TestChart_RightToLeft(t *testing.T) {
	c := uiConsole(t)
	ch := Chart{Title: "t", Labels: []string{"first", "second", "third"}, Series: []Series{{Values: []float64{1, 2, 3}}}}
	xs := func(lang string) map[string]float64 {
		m := map[string]float64{}
		for _, sub := range labelRE.FindAllStringSubmatch(string(c.renderChart(lang, ch)), -1) {
			x, _ := strconv.ParseFloat(sub[1], 64)
			m[sub[2]] = x
		}
		return m
	}
	en, fa := xs("en"), xs("fa")
	if !(en["first"] < en["second"] && en["second"] < en["third"]) {
		t.Errorf("en labels at %v, want left to right", en)
	}
	if !(fa["first"] > fa["second"] && fa["second"] > fa["third"]) {
		t.Errorf("fa labels at %v, want right to left", fa)
	}
	if out := string(c.renderChart("fa", ch)); !strings.Contains(out, ">۳</text>") {
		t.Errorf("fa axis without Persian digits:\n%s", out)
	}
}

// Stacked bars of a label are as tall as their sum; grouped bars stand side by side.
func TestChart_StackedAndGrouped(t *testing.T) {
	c := uiConsole(t)
	rectRE := regexp.MustCompile(`<rect class="bar s\d" x="([0-9.]+)%" y="([0-9.]+)" width="([0-9.]+)%" height="([0-9.]+)">`)
	ch := Chart{Title: "t", Labels: []string{"a"}, Series: []Series{{Name: "x", Values: []float64{30}}, {Name: "y", Values: []float64{10}}}}
	for _, grouped := range []bool{false, true} {
		ch.Grouped = grouped
		rs := rectRE.FindAllStringSubmatch(string(c.renderChart("en", ch)), -1)
		if len(rs) != 2 {
			t.Fatalf("%d bars, want 2", len(rs))
		}
		f := func(i, j int) float64 { v, _ := strconv.ParseFloat(rs[i][j], 64); return v }
		if grouped {
			if f(0, 1) == f(1, 1) || f(0, 4) <= f(1, 4) {
				t.Errorf("grouped bars %v: want side by side, the first taller", rs)
			}
			continue
		}
		if f(0, 1) != f(1, 1) {
			t.Errorf("stacked bars %v: want one above the other", rs)
		}
		if bottomOfUpper, topOfLower := f(1, 2)+f(1, 4), f(0, 2); math.Abs(bottomOfUpper-topOfLower) > 0.2 {
			t.Errorf("stacked bars %v: the second should sit on the first", rs)
		}
	}
}

// The axis has 3 to 5 ticks of 1, 2 or 5 times a power of ten, the top holding the data.
func TestNiceScale(t *testing.T) {
	for _, peak := range []float64{0.0001, 0.003, 0.05, 0.9, 1, 3, 7, 9.99, 10, 12, 99, 101, 450, 1000, 1234, 55555, 1e6, 3.2e7, 8e9} {
		step, top := niceScale(peak)
		ticks := int(math.Round(top/step)) + 1
		mant := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if ticks < 3 || ticks > 5 || top < peak || !(near(mant, 1) || near(mant, 2) || near(mant, 5)) {
			t.Errorf("niceScale(%g) = step %g, top %g: %d ticks", peak, step, top, ticks)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestCompactTicks(t *testing.T) {
	c := uiConsole(t)
	tests := []struct {
		v, step, top float64
		en, fa       string
	}{
		{0, 5000, 20000, "0", "۰"},
		{15000, 5000, 20000, "15K", "۱۵ هزار"},
		{500, 500, 2000, "500", "۵۰۰"},
		{1.5e6, 5e5, 1.5e6, "1.5M", "۱٫۵ میلیون"},
		{0.05, 0.05, 0.2, "0.05", "۰٫۰۵"},
		{2e9, 1e9, 4e9, "2B", "۲ میلیارد"},
	}
	for _, tt := range tests {
		if got := c.compact("en", tt.v, tt.step, tt.top); got != tt.en {
			t.Errorf("compact(en, %g) = %q, want %q", tt.v, got, tt.en)
		}
		if got := c.compact("fa", tt.v, tt.step, tt.top); got != tt.fa {
			t.Errorf("compact(fa, %g) = %q, want %q", tt.v, got, tt.fa)
		}
	}
}

func TestChart_USD(t *testing.T) {
	c := uiConsole(t)
	out := string(c.renderChart("en", Chart{Title: "Spend", Labels: []string{"a", "b"}, Series: []Series{{Name: "Spend", Values: []float64{0.0012, 0.15}}}, Unit: UnitUSD}))
	for _, want := range []string{`>$0.10</text>`, `>$0</text>`, `<td class="num">$0.0012</td>`, `<figcaption>Spend</figcaption>`} {
		if !strings.Contains(out, want) {
			t.Errorf("USD chart lacks %s:\n%s", want, out)
		}
	}
}

// Labels are thinned for the chart's width: a phone's chart writes few enough to fit 260 px,
// a wide one up to what fits 720 px, each including the narrower's; a few labels are all
// written on every chart.
func TestChart_LabelsThinned(t *testing.T) {
	c := uiConsole(t)
	classRE := regexp.MustCompile(`<text class="label( m| w)?" x="([0-9.]+)%"`)
	for _, tt := range []struct {
		n                 int
		always, mid, wide int // labels on a phone's, a half-width and a full-width chart
	}{
		{30, 2, 4, 8},
		{7, 2, 4, 7},
		{4, 2, 4, 4},
		{2, 2, 2, 2},
	} {
		ch := Chart{Title: "t", Series: []Series{{Values: make([]float64, tt.n)}}}
		for i := range tt.n {
			ch.Labels = append(ch.Labels, strconv.Itoa(i))
			ch.Series[0].Values[i] = 1
		}
		var always, mid, wide int
		for _, m := range classRE.FindAllStringSubmatch(string(c.renderChart("en", ch)), -1) {
			wide++
			if m[1] != " w" {
				mid++
			}
			if m[1] == "" {
				always++
			}
		}
		if always != tt.always || mid != tt.mid || wide != tt.wide {
			t.Errorf("%d labels: %d always, %d from 440 px, %d from 720 px; want %d, %d, %d", tt.n, always, mid, wide, tt.always, tt.mid, tt.wide)
		}
		if always*labelWidth > 260+labelWidth || wide*labelWidth > 720+labelWidth {
			t.Errorf("%d labels: %d on a phone, %d on a wide chart would overlap", tt.n, always, wide)
		}
	}
}
