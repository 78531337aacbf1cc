package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"unicode/utf8"
)

// Chart is a bar chart drawn on the server as inline SVG: one group of bars per label, one bar
// per series, stacked (the default: the total per label reads at a glance) or side by side.
type Chart struct {
	Title  string   // translated; the caption and the image's accessible name
	Labels []string // translated, one per group, oldest first for time (see renderChart on RTL)
	Series []Series
	// Unit is the values' unit, translated ("tokens"), shown beside the title; UnitUSD makes
	// the values dollars (money.Nanos.Float()), written as money on the axis and in the data.
	Unit    string
	Grouped bool // bars side by side instead of stacked
}

// Series is one set of bars, with one value per label (missing values count as 0; negative,
// NaN and infinite values are drawn as 0).
type Series struct {
	Name   string // translated, or a model's name; shown in the legend
	Values []float64
}

// UnitUSD is Chart.Unit for amounts of dollars.
const UnitUSD = "$"

// The chart's geometry. The SVG has no viewBox, so it is never scaled and its text is drawn at
// the page's text size (static/style.css, .chart-svg text) however wide the chart is: across,
// positions are percentages of the plot's width; down, CSS pixels. The value axis's ticks are
// written outside the SVG's box, in the margin that style.css leaves at its start.
const (
	chartH      = 156 // the SVG's height: the plot and the labels' row
	chartTop    = 10  // room above the top tick, whose label is centred on its line
	chartBottom = 34  // the labels' row
	chartColors = 8   // classes s0…s7
	chartGap    = 8   // between a tick's label and the plot
	labelWidth  = 80  // pixels a day's label needs; fewer labels are written when they would overlap
	chartLabelY = 27  // the labels' baseline below the plot: clear of the lowest tick's label
)

// labelPlots are the plot widths, in pixels, that a chart's labels are thinned for, narrowest
// first, with the class of the labels written only from that width on: every chart is at
// least 260 px wide (a phone); style.css's container queries (.chart-svg .label.m, .w) show
// the others on charts of the width.
var labelPlots = []struct {
	width float64
	class string
}{{260, ""}, {440, " m"}, {720, " w"}}

// renderChart draws ch in lang. In a right-to-left language the chart is mirrored: the first
// label (the oldest day) is at the right and the value axis on the right, so that the chart
// reads in the same direction as the page around it, as Persian charts and timelines are
// read; the texts themselves are not mirrored.
func (c *Console) renderChart(lang string, ch Chart) template.HTML {
	l := c.i18n.locale(lang)
	rtl := l.Dir == "rtl"
	esc := template.HTMLEscapeString
	t := func(key string, args ...any) string { return esc(c.i18n.T(lang, key, args...)) }

	var b strings.Builder
	caption := esc(ch.Title)
	if ch.Unit != "" && ch.Unit != UnitUSD {
		caption += ` <span class="chart-unit">(` + esc(ch.Unit) + `)</span>`
	}
	n := len(ch.Labels)
	values := make([][]float64, len(ch.Series)) // [series][label], cleaned
	var peak float64
	for i, s := range ch.Series {
		values[i] = make([]float64, n)
		for j := 0; j < n && j < len(s.Values); j++ {
			if v := s.Values[j]; v > 0 && !math.IsInf(v, 1) {
				values[i][j] = v
			}
		}
	}
	for j := 0; j < n; j++ {
		var sum float64
		for i := range values {
			if ch.Grouped {
				peak = math.Max(peak, values[i][j])
			} else {
				sum += values[i][j]
			}
		}
		peak = math.Max(peak, sum)
	}
	if n == 0 || len(ch.Series) == 0 || peak == 0 {
		fmt.Fprintf(&b, `<figure class="chart chart-empty"><figcaption>%s</figcaption><p class="empty">%s</p></figure>`, caption, t("layout.chart.empty"))
		return template.HTML(b.String())
	}

	value := func(v float64) string {
		if ch.Unit == UnitUSD {
			return l.dollars(v)
		}
		return l.float(v, 2)
	}
	step, top := niceScale(peak)
	tick := func(v float64) string {
		switch {
		case ch.Unit != UnitUSD:
			return c.compact(lang, v, step, top)
		case v != 0 && top < 1e4: // cents as money is written: $0.10, not $0.1
			return "$" + l.fixed(v, max(decimals(step), 2))
		}
		return "$" + c.compact(lang, v, step, top)
	}

	// Where label j's band is, in percent of the plot's width.
	band := 100 / float64(n)
	bandX := func(j int) float64 { // the start edge of label j's band, from the left
		if rtl {
			return 100 - float64(j+1)*band
		}
		return float64(j) * band
	}
	y0, y1 := float64(chartTop), float64(chartH-chartBottom)
	yOf := func(v float64) float64 { return y1 - v/top*(y1-y0) }

	// The ticks, and the margin they need (style.css: .chart-svg.axis-s, -m, -l).
	var ticks []string
	longest := 0
	for v := 0.0; v <= top+step/2; v += step {
		ticks = append(ticks, tick(v))
		longest = max(longest, utf8.RuneCountInString(ticks[len(ticks)-1]))
	}
	axis := "axis-l"
	switch {
	case longest <= 4:
		axis = "axis-s"
	case longest <= 7:
		axis = "axis-m"
	}

	fmt.Fprintf(&b, `<figure class="chart"><figcaption>%s</figcaption>`, caption)
	fmt.Fprintf(&b, `<svg class="chart-svg %s" width="100%%" height="%d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s" focusable="false"><title>%s</title>`,
		axis, chartH, esc(ch.Title), esc(ch.Title))

	// The value axis: grid lines and their values, in the margin before the plot: each value
	// ends (text-anchor, in the page's direction) a gap before the plot's edge.
	tickX, tickDX := "0", -chartGap
	if rtl {
		tickX, tickDX = "100%", chartGap
	}
	b.WriteString(`<g class="chart-grid" aria-hidden="true">`)
	for i, label := range ticks {
		y := yOf(float64(i) * step)
		fmt.Fprintf(&b, `<line class="grid" x1="0" x2="100%%" y1="%s" y2="%s"/>`, f1(y), f1(y))
		fmt.Fprintf(&b, `<text class="tick" x="%s" dx="%d" y="%s" dy="0.35em" text-anchor="end">%s</text>`,
			tickX, tickDX, f1(y), esc(label))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="0" x2="100%%" y1="%s" y2="%s"/></g>`, f1(y1), f1(y1))

	// The bars, each with its value as a tooltip.
	widest := 10.0 // percent of the plot: a few labels must not make slabs
	if ch.Grouped {
		widest *= float64(len(ch.Series))
	}
	groupW := math.Min(band*0.7, widest)
	b.WriteString(`<g class="chart-bars">`)
	for j := 0; j < n; j++ {
		gx := bandX(j) + (band-groupW)/2
		base := 0.0
		for i, s := range ch.Series {
			v := values[i][j]
			if v == 0 {
				continue
			}
			x, w := gx, groupW
			if ch.Grouped {
				w = groupW / float64(len(ch.Series))
				k := i
				if rtl {
					k = len(ch.Series) - 1 - i
				}
				x = gx + float64(k)*w
				base = 0
			}
			yt, yb := yOf(base+v), yOf(base)
			if !ch.Grouped {
				base += v
			}
			h := math.Max(yb-yt, 0.5) // a tiny value stays visible
			tip := c.i18n.T(lang, "layout.chart.point", ch.Labels[j], s.Name, value(v))
			if s.Name == "" {
				tip = c.i18n.T(lang, "layout.chart.point_unnamed", ch.Labels[j], value(v))
			}
			fmt.Fprintf(&b, `<rect class="bar s%d" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`,
				i%chartColors, pc(x), f1(yb-h), pc(math.Max(w-0.2, 0.1)), f1(h), esc(tip))
		}
	}
	b.WriteString(`</g>`)

	// The labels: every k-th where they would overlap, k smaller on a wider chart; each wider
	// chart's labels include the narrower's.
	steps := make([]int, len(labelPlots))
	for i := len(labelPlots) - 1; i >= 0; i-- {
		steps[i] = labelStep(n, labelPlots[i].width)
		if i < len(labelPlots)-1 {
			k := steps[i+1]
			steps[i] = (steps[i] + k - 1) / k * k // a multiple of the wider chart's step
		}
	}
	b.WriteString(`<g class="chart-labels" aria-hidden="true">`)
	for j := 0; j < n; j += steps[len(steps)-1] {
		class := "label"
		for i, p := range labelPlots {
			if j%steps[i] == 0 {
				class += p.class
				break
			}
		}
		fmt.Fprintf(&b, `<text class="%s" x="%s" y="%s" text-anchor="middle">%s</text>`,
			class, pc(bandX(j)+band/2), f1(y1+chartLabelY), esc(shorten(ch.Labels[j], 10)))
	}
	b.WriteString(`</g></svg>`)

	// The legend, and the numbers as a table for those who cannot see the bars.
	if len(ch.Series) > 1 || ch.Series[0].Name != "" {
		b.WriteString(`<ul class="chart-legend">`)
		for i, s := range ch.Series {
			fmt.Fprintf(&b, `<li><span class="swatch s%d" aria-hidden="true"></span>%s</li>`, i%chartColors, esc(s.Name))
		}
		b.WriteString(`</ul>`)
	}
	fmt.Fprintf(&b, `<details class="chart-data"><summary>%s</summary><div class="table-wrap"><table><thead><tr><th scope="col">%s</th>`,
		t("layout.chart.data"), t("layout.chart.label"))
	for _, s := range ch.Series {
		name := s.Name
		if name == "" {
			name = ch.Title
		}
		fmt.Fprintf(&b, `<th scope="col" class="num">%s</th>`, esc(name))
	}
	b.WriteString(`</tr></thead><tbody>`)
	for j, label := range ch.Labels {
		fmt.Fprintf(&b, `<tr><th scope="row">%s</th>`, esc(label))
		for i := range ch.Series {
			fmt.Fprintf(&b, `<td class="num">%s</td>`, esc(value(values[i][j])))
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</tbody></table></div></details></figure>`)
	return template.HTML(b.String())
}

// labelStep is how many labels apart those written are, for n labels on a plot of width
// pixels: 1 when they all fit.
func labelStep(n int, width float64) int {
	return max(int(math.Ceil(float64(n)*labelWidth/width)), 1)
}

// niceScale picks the value axis: a step of 1, 2 or 5 times a power of ten, and a top that is
// a multiple of it, so that the axis has 3 to 5 ticks (0 included) and the top holds max.
func niceScale(max float64) (step, top float64) {
	rough := max / 4
	mag := math.Pow(10, math.Floor(math.Log10(rough)))
	switch norm := rough / mag; {
	case norm <= 1:
		step = mag
	case norm <= 2:
		step = 2 * mag
	case norm <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	top = math.Ceil(max/step-1e-9) * step
	if top/step < 2 { // at least 3 ticks
		top = 2 * step
	}
	return step, top
}

// compact writes a value of an axis whose ticks are step apart up to top: in thousands,
// millions or billions (the catalogue's layout.num.*: "25K") when top reaches 10,000, with as
// many decimals as the step needs (a step of 0.05 needs 2).
func (c *Console) compact(lang string, v, step, top float64) string {
	l := c.i18n.locale(lang)
	if v == 0 {
		return l.integer(0)
	}
	for _, u := range []struct {
		size float64
		key  string
	}{{1e9, "layout.num.billion"}, {1e6, "layout.num.million"}, {1e3, "layout.num.thousand"}} {
		if top >= u.size*10 || u.size > 1e3 && top >= u.size {
			return c.i18n.T(lang, u.key, l.float(v/u.size, decimals(step/u.size)))
		}
	}
	return l.float(v, decimals(step))
}

// decimals is how many decimals a tick step needs.
func decimals(step float64) int {
	if step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

// shorten cuts s to n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// pc writes an SVG coordinate in percent of the plot's width, with two decimals.
func pc(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".") + "%"
}

// f1 writes an SVG coordinate with one decimal.
func f1(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") }
