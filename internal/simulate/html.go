package simulate

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// The HTML report: one self-contained page, its charts inline SVG drawn here, no script, no
// external asset.

var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#475569", "#ea580c"}

// series is one line of a line chart.
type series struct {
	name   string
	values []float64
}

// lineChart draws series over x = 0..n-1 with y in [0, top], a vertical line every tick x.
func lineChart(ss []series, top float64, tick int, tickLabel func(int) string, yLabel func(float64) string) template.HTML {
	const w, h, left, bottom, pad = 880.0, 260.0, 48.0, 24.0, 8.0
	n := 0
	for _, s := range ss {
		n = max(n, len(s.values))
	}
	if n < 2 || top <= 0 {
		return ""
	}
	x := func(i int) float64 { return left + float64(i)/float64(n-1)*(w-left-pad) }
	y := func(v float64) float64 { return pad + (1-v/top)*(h-bottom-pad) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" width="100%%" role="img" xmlns="http://www.w3.org/2000/svg">`, w, h+18*float64((len(ss)+3)/4))
	for k := 0; k <= 4; k++ {
		v := top * float64(k) / 4
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="ylab">%s</text>`,
			left, w-pad, y(v), y(v), left-4, y(v)+4, template.HTMLEscapeString(yLabel(v)))
	}
	for i := 0; i < n; i += tick {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="grid"/><text x="%.1f" y="%g" class="xlab">%s</text>`,
			x(i), x(i), pad, h-bottom, x(i)+2, h-bottom+14, template.HTMLEscapeString(tickLabel(i)))
	}
	for si, s := range ss {
		var pts []string
		for i, v := range s.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(min(v, top))))
		}
		color := palette[si%len(palette)]
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>`, strings.Join(pts, " "), color)
		lx, ly := left+float64(si%4)*210, h+14+18*float64(si/4)
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="12" height="4" fill="%s"/><text x="%g" y="%g" class="leg">%s</text>`,
			lx, ly-4, color, lx+16, ly, template.HTMLEscapeString(s.name))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// bar is one bar of a bar chart, with an optional range (lo–hi) drawn as a whisker.
type bar struct {
	label  string
	value  float64
	lo, hi float64
	group  int // its color
	text   string
}

// barChart draws horizontal bars scaled to the largest.
func barChart(bars []bar, format func(float64) string) template.HTML {
	if len(bars) == 0 {
		return ""
	}
	const w, row, left, pad = 880.0, 22.0, 230.0, 230.0
	top := 0.0
	for _, b := range bars {
		top = max(top, b.value, b.hi)
	}
	if top <= 0 {
		top = 1
	}
	h := row*float64(len(bars)) + 8
	var s strings.Builder
	fmt.Fprintf(&s, `<svg viewBox="0 0 %g %g" width="100%%" role="img" xmlns="http://www.w3.org/2000/svg">`, w, h)
	for i, b := range bars {
		y := 4 + row*float64(i)
		bw := b.value / top * (w - left - pad)
		color := palette[b.group%len(palette)]
		fmt.Fprintf(&s, `<text x="%g" y="%.1f" class="blab">%s</text><rect x="%g" y="%.1f" width="%.1f" height="%g" fill="%s"/>`,
			left-6, y+row*0.62, template.HTMLEscapeString(b.label), left, y+3, math.Max(bw, 0.5), row-8, color)
		if b.hi > b.lo {
			lo, hi := left+b.lo/top*(w-left-pad), left+b.hi/top*(w-left-pad)
			fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="whisk"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="whisk"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="whisk"/>`,
				lo, hi, y+row/2-1, y+row/2-1, lo, lo, y+5, y+row-7, hi, hi, y+5, y+row-7)
		}
		text := b.text
		if text == "" {
			text = format(b.value)
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" class="bval">%s</text>`, left+math.Max(bw, b.hi/top*(w-left-pad))+6, y+row*0.62, template.HTMLEscapeString(text))
	}
	s.WriteString("</svg>")
	return template.HTML(s.String())
}

const pageCSS = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:960px;color:#111827;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.sub{color:#4b5563;margin:0 0 12px}table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #f3f4f6;text-align:right}th:first-child,td:first-child{text-align:left}
th{font-weight:600;color:#374151}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #e5e7eb;border-radius:8px;padding:10px 14px;min-width:150px}.card b{display:block;font-size:20px}
.card span{color:#4b5563;font-size:12px}.note{color:#4b5563;font-size:12px}
svg text{font-size:11px;fill:#374151}.grid{stroke:#e5e7eb;stroke-width:1}.ylab{text-anchor:end}.blab{text-anchor:end;font-size:12px}
.bval{font-size:12px}.leg{font-size:12px}.whisk{stroke:#111827;stroke-width:1.2}.ok{color:#15803d}.bad{color:#b91c1c}`

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>ShareAI market simulation</title><style>{{.CSS}}</style></head><body>
<h1>ShareAI market simulation</h1>
<p class="sub">{{.Sub}}</p>
<div class="cards">{{range .Cards}}<div class="card"><b>{{.Value}}</b><span>{{.Label}}</span></div>{{end}}</div>
<h2>Utilization per GPU class, hour by hour</h2>
{{.Utilization}}
<p class="note">Busy slot-time ÷ slot-time of the class's nodes online that hour.</p>
<h2>GPU classes</h2>
<table><tr><th>class</th><th>nodes</th><th>utilization</th><th>24/7</th><th>window fill</th><th>min–max</th><th>output tokens</th><th>earned</th><th>per node</th></tr>
{{range .Classes}}<tr><td>{{.Name}} <span class="note">{{.GPU}}</span></td><td>{{.Nodes}}</td><td>{{.Util}}</td><td>{{.Util24}}</td><td>{{.Fill}}</td><td>{{.FillRange}}</td><td>{{.Tokens}}</td><td>{{.Earned}}</td><td>{{.PerNode}}</td></tr>
{{end}}</table>
<h3>Fill of the nodes' windows, by class (whiskers: the least and most filled node)</h3>
{{.Fill}}
<h3>Providers' earnings by class</h3>
{{.Earnings}}
{{if .Nodes}}<h3>Nodes</h3><table><tr><th>node</th><th>class</th><th>window hours</th><th>fill</th><th>jobs</th><th>output tokens</th><th>earned</th></tr>
{{range .Nodes}}<tr><td>{{.ID}}</td><td>{{.Class}}</td><td>{{.Window}}</td><td>{{.Fill}}</td><td>{{.Jobs}}</td><td>{{.Tokens}}</td><td>{{.Earned}}</td></tr>
{{end}}</table>{{end}}
<h2>Requests</h2>
<table><tr><th></th><th>total</th><th>served</th><th>failed</th><th>timed out</th></tr>
{{range .Requests}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td>{{index . 2}}</td><td>{{index . 3}}</td><td>{{index . 4}}</td></tr>
{{end}}</table>
<p>{{.Events}}</p>
<h3>Queue waits and time to first token, ms</h3>
{{.Latency}}
<p class="note">TTFT counts from the end of the wait in the queue, as the coordinator measures it.</p>
<h2>Buyers' cost per 1M tokens</h2>
{{.Cost}}
{{range .Dedicated}}<p>{{.}}</p>{{end}}
<h2>Money</h2>
<p>{{.Money}}</p>
{{if .Policies}}<h2>Policies and the offline bound</h2>
<h3>Cost per 1M tokens</h3>{{.PolicyCost}}
<h3>Capacity used (output tokens ÷ output capacity in the windows)</h3>{{.PolicyCapacity}}
<table><tr><th>policy</th><th>served</th><th>503s</th><th>TTFT p95</th><th>queue p95</th><th>cost over bound</th><th>capacity under bound</th></tr>
{{range .Policies}}<tr><td>{{.Policy}}</td><td>{{.Served}}</td><td>{{.Unavailable}}</td><td>{{.TTFT}}</td><td>{{.Queue}}</td><td>{{.CostGap}}</td><td>{{.CapGap}}</td></tr>
{{end}}</table><p class="note">{{.Bound}}</p>{{end}}
</body></html>
`))

type htmlCard struct{ Value, Label string }

// WriteHTML writes the report as a self-contained page with charts.
func (r *Report) WriteHTML(w io.Writer) error {
	type classRow struct{ Name, GPU, Nodes, Util, Util24, Fill, FillRange, Tokens, Earned, PerNode string }
	type nodeRow struct{ ID, Class, Window, Fill, Jobs, Tokens, Earned string }
	type policyRow struct{ Policy, Served, Unavailable, TTFT, Queue, CostGap, CapGap string }
	data := struct {
		CSS                                  template.CSS
		Sub                                  string
		Cards                                []htmlCard
		Utilization, Fill, Earnings, Latency template.HTML
		Cost, PolicyCost, PolicyCapacity     template.HTML
		Classes                              []classRow
		Nodes                                []nodeRow
		Requests                             [][5]string
		Events, Money, Bound                 string
		Dedicated                            []string
		Policies                             []policyRow
	}{CSS: template.CSS(pageCSS)}
	data.Sub = fmt.Sprintf("%s days from %s · seed %d · policy %s · %s nodes · %s live requests", trimFloat(r.Days, 2),
		r.Start.Format("Mon 2006-01-02 15:04 MST"), r.Seed, r.Policy, count(int64(r.Nodes)), count(r.Requests.Total))
	var silver TierLatency
	for _, l := range r.Latency {
		if l.Tier == "silver" {
			silver = l
		}
	}
	data.Cards = []htmlCard{
		{pct(ratio(r.Requests.Served, r.Requests.Total)), "live requests served"},
		{count(r.Requests.Unavailable), "503s"},
		{"$" + price(r.Cost.PerMillion), "buyers' cost per 1M tokens"},
		{signedPct(r.Cost.SavingPct), "saved against dedicated GPUs"},
		{ms(silver.TTFTP95) + " ms", "silver TTFT p95"},
		{"$" + usd(r.Money.Earnings), "providers' earnings"},
		{"$" + usd(r.Money.Fees), "platform fees"},
	}
	var ss []series
	for _, c := range r.Classes {
		ss = append(ss, series{c.Name, c.Hourly})
	}
	top := 0.0
	for _, s := range ss {
		for _, v := range s.values {
			top = max(top, v)
		}
	}
	top = math.Min(1, math.Ceil(top*5+1e-9)/5) // ticks at multiples of 5%
	tick := 24
	if r.Hours <= 48 {
		tick = 6
	}
	data.Utilization = lineChart(ss, top, tick, func(h int) string {
		return r.Start.Add(hours(h)).Format("Mon 15h")
	}, func(v float64) string { return pct(v) })
	var fill, earn []bar
	for i, c := range r.Classes {
		fill = append(fill, bar{label: c.Name, value: c.Fill, lo: c.FillMin, hi: c.FillMax, group: i, text: pct(c.Fill) + " (" + pct(c.FillMin) + "–" + pct(c.FillMax) + ")"})
		earn = append(earn, bar{label: c.Name, value: c.earned.Float(), group: i, text: "$" + usd(c.Earned) + " ($" + usd(c.PerNode) + " a node)"})
		data.Classes = append(data.Classes, classRow{c.Name, c.GPU, count(int64(c.Nodes)), pct(c.Utilization), pct(c.Utilization24), pct(c.Fill), pct(c.FillMin) + "–" + pct(c.FillMax),
			count(c.Tokens), "$" + usd(c.Earned), "$" + usd(c.PerNode)})
	}
	data.Fill = barChart(fill, pct)
	data.Earnings = barChart(earn, func(v float64) string { return "$" + trimFloat(v, 2) })
	for _, c := range r.Classes {
		if c.Nodes > detailedClass {
			continue
		}
		for _, n := range r.NodeList {
			if n.Class == c.Name {
				data.Nodes = append(data.Nodes, nodeRow{n.ID, n.Class, trimFloat(n.WindowHours, 1), pct(n.Fill), count(n.Jobs), count(n.Tokens), "$" + usd(n.Earned)})
			}
		}
	}
	for _, t := range r.Requests.ByTier {
		if t.Total > 0 || t.Tier != "batch" {
			data.Requests = append(data.Requests, [5]string{t.Tier, count(t.Total), count(t.Served), count(t.Failed), count(t.TimedOut)})
		}
	}
	e := r.Events
	data.Events = fmt.Sprintf("%s preemptions · %s failovers (%s before the first token, %s mid-answer) · %s node drops · 503s: %s",
		count(e.Preemptions), count(e.FailoversBefore+e.FailoversMid), count(e.FailoversBefore), count(e.FailoversMid), count(e.Drops), count(r.Requests.Unavailable))
	var lat []bar
	for i, l := range r.Latency {
		if l.Requests == 0 {
			continue
		}
		msf := func(v float64) string { return ms(v) + " ms" }
		lat = append(lat, bar{label: l.Tier + " queue wait p95", value: l.QueueWaitP95, group: i, text: msf(l.QueueWaitP95)},
			bar{label: l.Tier + " TTFT p50", value: l.TTFTP50, group: i, text: msf(l.TTFTP50)},
			bar{label: l.Tier + " TTFT p95", value: l.TTFTP95, group: i, text: msf(l.TTFTP95)})
	}
	data.Latency = barChart(lat, func(v float64) string { return ms(v) })
	var cost []bar
	for i, t := range r.Cost.ByTier {
		if t.Tokens > 0 {
			cost = append(cost, bar{label: t.Tier, value: t.PerMillion, group: i, text: "$" + price(t.PerMillion)})
		}
	}
	for _, d := range r.Cost.Dedicated {
		cost = append(cost, bar{label: "dedicated: " + d.Model, value: d.PerMillion, group: 8, text: fmt.Sprintf("$%s (%d × %s, %s used)", price(d.PerMillion), d.GPUs, d.Class, pct(d.Utilization))})
		data.Dedicated = append(data.Dedicated, fmt.Sprintf("%s: %d × %s at $%s/h cost $%s over the run, %s used; the market charged $%s per 1M tokens against $%s: %s saved.",
			d.Model, d.GPUs, d.Class, usd(d.Hourly), usd(d.Cost), pct(d.Utilization), price(d.Market), price(d.PerMillion), signedPct(d.SavingPct)))
	}
	data.Cost = barChart(cost, func(v float64) string { return "$" + price(v) })
	m := r.Money
	balanced := "balanced to the nano-dollar"
	if !m.Balanced() {
		balanced = "NOT BALANCED"
	}
	data.Money = fmt.Sprintf("Buyers paid $%s = providers earned $%s + platform fees $%s − continuation subsidy $%s (%s). The platform keeps $%s.",
		usd(m.Debits), usd(m.Earnings), usd(m.Fees), usd(m.Subsidy), balanced, usd(m.Net))
	if c := r.Comparison; c != nil {
		var pc, pcap []bar
		for i, p := range c.Policies {
			pc = append(pc, bar{label: p.Policy, value: p.PerMillion, group: i, text: "$" + price(p.PerMillion) + " (" + signedPct(p.CostGapPct) + " over the bound)"})
			pcap = append(pcap, bar{label: p.Policy, value: p.CapacityUsed, group: i})
			data.Policies = append(data.Policies, policyRow{p.Policy, pct(p.Served), count(p.Unavailable), ms(p.TTFTP95) + " ms", ms(p.QueueP95) + " ms",
				signedPct(p.CostGapPct), trimFloat(p.CapacityGapPts, 2) + " pts"})
		}
		pc = append(pc, bar{label: "offline bound", value: c.Bound.PerMillion, group: 8, text: "$" + price(c.Bound.PerMillion)})
		pcap = append(pcap, bar{label: "offline bound", value: c.Bound.CapacityUsed, group: 8})
		data.PolicyCost = barChart(pc, func(v float64) string { return "$" + price(v) })
		data.PolicyCapacity = barChart(pcap, pct)
		data.Bound = c.Bound.What
	}
	return reportPage.Execute(w, data)
}

var forecastPage = template.Must(template.New("forecast").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>ShareAI forecast: {{.Name}}</title><style>{{.CSS}}</style></head><body>
<h1>Forecast for {{.Name}}</h1>
<p class="sub">{{.Sub}}</p>
<div class="cards">{{range .Cards}}<div class="card"><b>{{.Value}}</b><span>{{.Label}}</span></div>{{end}}</div>
<h2>Weekly earnings (bars: p50; whiskers: p10–p90)</h2>{{.Earned}}
<h2>Fill of the windows</h2>{{.Fill}}
<table><tr><th></th><th>p10</th><th>p50</th><th>p90</th></tr>
{{range .Rows}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td>{{index . 2}}</td><td>{{index . 3}}</td></tr>
{{end}}</table>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
</body></html>
`))

// WriteHTML writes the forecast as a self-contained page with charts.
func (fr *ForecastReport) WriteHTML(w io.Writer) error {
	n := fr.Node
	data := struct {
		CSS       template.CSS
		Name, Sub string
		Cards     []htmlCard
		Earned    template.HTML
		Fill      template.HTML
		Rows      [][4]string
		Notes     []string
	}{CSS: template.CSS(pageCSS), Name: n.Name, Notes: fr.Notes}
	data.Sub = fmt.Sprintf("%s · %s · windows %q (%s) · ask %s · in %s · %d seeds × %s days", n.GPU, strings.Join(n.Models, ", "), n.Windows, n.Timezone, n.Ask,
		fr.Market, fr.Seeds, trimFloat(fr.Days, 2))
	o := fr.Base
	data.Cards = []htmlCard{
		{"$" + usdf(o.WeeklyEarned.P50), "median weekly earnings"},
		{"$" + usdf(o.WeeklyEarned.P10) + "–$" + usdf(o.WeeklyEarned.P90), "p10–p90"},
		{pct(o.Fill.P50), "median fill of the windows"},
		{trimFloat(o.WindowHours, 1) + " h", "a week inside the windows"},
	}
	earned := []bar{{label: "forecast", value: o.WeeklyEarned.P50, lo: o.WeeklyEarned.P10, hi: o.WeeklyEarned.P90, text: "$" + usdf(o.WeeklyEarned.P50)}}
	fill := []bar{{label: "forecast", value: o.Fill.P50, lo: o.Fill.P10, hi: o.Fill.P90, text: pct(o.Fill.P50)}}
	rows := func(label string, o Outlook) {
		data.Rows = append(data.Rows,
			[4]string{label + ": weekly earnings", "$" + usdf(o.WeeklyEarned.P10), "$" + usdf(o.WeeklyEarned.P50), "$" + usdf(o.WeeklyEarned.P90)},
			[4]string{label + ": fill", pct(o.Fill.P10), pct(o.Fill.P50), pct(o.Fill.P90)},
			[4]string{label + ": output tokens a week", count(int64(o.WeeklyTokens.P10)), count(int64(o.WeeklyTokens.P50)), count(int64(o.WeeklyTokens.P90))})
	}
	rows("forecast", o)
	if wi := fr.WhatIf; wi != nil {
		wo := wi.Outlook
		label := "what if " + wi.Changes
		earned = append(earned, bar{label: "what if", value: wo.WeeklyEarned.P50, lo: wo.WeeklyEarned.P10, hi: wo.WeeklyEarned.P90, group: 1,
			text: "$" + usdf(wo.WeeklyEarned.P50) + " (" + signed(wi.EarnedChangePct) + "%)"})
		fill = append(fill, bar{label: "what if", value: wo.Fill.P50, lo: wo.Fill.P10, hi: wo.Fill.P90, group: 1, text: pct(wo.Fill.P50)})
		rows(label, wo)
		data.Cards = append(data.Cards, htmlCard{signed(wi.EarnedChangePct) + "%", label})
	}
	data.Earned = barChart(earned, func(v float64) string { return "$" + trimFloat(v, 2) })
	data.Fill = barChart(fill, pct)
	return forecastPage.Execute(w, data)
}

func hours(h int) time.Duration { return time.Duration(h) * time.Hour }
