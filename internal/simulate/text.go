package simulate

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/money"
)

// detailedClass is the most nodes a class may have for the text report to list each of them:
// the story's own nodes (a gamer's, a founder's), not a market's thousands.
const detailedClass = 5

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "ShareAI market simulation: %s days from %s, seed %d, policy %s\n", trimFloat(r.Days, 2),
		r.Start.Format("Mon 2006-01-02 15:04 MST"), r.Seed, r.Policy)
	fmt.Fprintf(b, "%s nodes in %d classes; %s live requests", count(int64(r.Nodes)), len(r.Classes), count(r.Requests.Total))
	if lines := r.Requests.ByTier[rowBatch].Total; lines > 0 {
		fmt.Fprintf(b, ", %s batch lines", count(lines))
	}
	b.WriteString("\n\n")

	tw := &table{}
	tw.row("Requests\ttotal\tserved\tfailed\ttimed out\t")
	for _, t := range r.Requests.ByTier {
		if t.Total == 0 && t.Tier == "batch" {
			continue
		}
		name := "  " + t.Tier
		if t.Tier == "batch" {
			name = "  batch lines"
		}
		tw.rowf("%s\t%s\t%s\t%s\t%s\t\n", name, count(t.Total), count(t.Served), count(t.Failed), count(t.TimedOut))
	}
	rq := r.Requests
	tw.rowf("  all live\t%s\t%s\t%s\t%s\t\n", count(rq.Total), count(rq.Served), count(rq.Failed), count(rq.TimedOut))
	tw.write(b)
	fmt.Fprintf(b, "  served %s; 503s %s", pct(ratio(rq.Served, rq.Total)), count(rq.Unavailable))
	if len(rq.Failures) > 0 {
		var parts []string
		for _, k := range sortedKeys(rq.Failures) {
			parts = append(parts, fmt.Sprintf("%s %s", strings.ReplaceAll(k, "_", " "), count(rq.Failures[k])))
		}
		fmt.Fprintf(b, " (%s)", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	for _, bt := range r.Batches {
		fmt.Fprintf(b, "  batch %s: %s lines, %s done, %s expired, %s failed, %s not started by the end\n", bt.Name,
			count(int64(bt.Submitted)), count(int64(bt.Done)), count(int64(bt.Expired)), count(int64(bt.Failed)), count(int64(bt.Unstarted)))
	}
	b.WriteString("\n")

	tw = &table{}
	tw.row("Latency, ms\tqueue p50\tp95\tTTFT p50\tp95\tfirst token p50\tp95\t")
	for _, l := range r.Latency {
		if l.Requests == 0 {
			continue
		}
		tw.rowf("  %s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Tier, ms(l.QueueWaitP50), ms(l.QueueWaitP95), ms(l.TTFTP50), ms(l.TTFTP95), ms(l.FirstP50), ms(l.FirstP95))
	}
	tw.write(b)
	b.WriteString("  (TTFT counts from the end of the wait in the queue, as the coordinator measures it; first token from arrival)\n")
	e := r.Events
	fmt.Fprintf(b, "  %s preemptions, %s failovers (%s before the first token, %s mid-answer), %s node drops\n\n",
		count(e.Preemptions), count(e.FailoversBefore+e.FailoversMid), count(e.FailoversBefore), count(e.FailoversMid), count(e.Drops))

	tw = &table{}
	tw.row("GPU classes\tnodes\tutilization\t24/7\twindow fill\t(min–max)\tearned\tper node\tby hour of day, UTC\t")
	for _, c := range r.Classes {
		tw.rowf("  %s\t%s\t%s\t%s\t%s\t%s–%s\t$%s\t$%s\t%s\t\n", c.Name, count(int64(c.Nodes)), pct(c.Utilization), pct(c.Utilization24),
			pct(c.Fill), pct(c.FillMin), pct(c.FillMax), usd(c.Earned), usd(c.PerNode), sparkline(byHourOfDay(c.Hourly, r.Start)))
	}
	tw.write(b)
	b.WriteString("  (utilization: busy slot-time ÷ slot-time online; 24/7: ÷ all slot-time; window fill: ÷ slot-time inside the nodes' windows)\n")
	for _, c := range r.Classes {
		if len(c.ByAsk) > 1 || len(c.ByAsk) == 1 && c.ByAsk["flat"] == "" {
			var parts []string
			for _, k := range sortedKeys(c.ByAsk) {
				parts = append(parts, fmt.Sprintf("%s $%s", k, usd(c.ByAsk[k])))
			}
			fmt.Fprintf(b, "  %s earned by ask: %s\n", c.Name, strings.Join(parts, ", "))
		}
	}
	var shown []NodeReport
	for _, c := range r.Classes {
		if c.Nodes > detailedClass {
			continue
		}
		for _, n := range r.NodeList {
			if n.Class == c.Name {
				shown = append(shown, n)
			}
		}
	}
	if len(shown) > 0 {
		b.WriteString("\n")
		tw = &table{}
		tw.row("Nodes\tclass\twindow hours\tfill\tjobs\toutput tokens\tearned\t")
		for _, n := range shown {
			tw.rowf("  %s\t%s\t%s\t%s\t%s\t%s\t$%s\t\n", n.ID, n.Class, trimFloat(n.WindowHours, 1), pct(n.Fill), count(n.Jobs), count(n.Tokens), usd(n.Earned))
		}
		tw.write(b)
	}
	b.WriteString("\n")

	tw = &table{}
	tw.row("Buyer cost\ttokens\tpaid\tper 1M tokens\t")
	for _, t := range r.Cost.ByTier {
		if t.Tokens == 0 {
			continue
		}
		tw.rowf("  %s\t%s\t$%s\t$%s\t\n", t.Tier, count(t.Tokens), usd(t.Paid), price(t.PerMillion))
	}
	tw.rowf("  live average\t\t\t$%s\t\n", price(r.Cost.PerMillion))
	tw.write(b)
	if len(r.Cost.Dedicated) > 0 {
		b.WriteString("  Against dedicated 24/7 GPUs sized for the same peak:\n")
		for _, d := range r.Cost.Dedicated {
			fmt.Fprintf(b, "    %s on %d × %s at $%s/h: $%s, %s used, $%s per 1M tokens; the market charged $%s: %s saved\n",
				d.Model, d.GPUs, d.Class, usd(d.Hourly), usd(d.Cost), pct(d.Utilization), price(d.PerMillion), price(d.Market), signedPct(d.SavingPct))
		}
		fmt.Fprintf(b, "  Saving against dedicated GPUs: %s\n", signedPct(r.Cost.SavingPct))
	}
	b.WriteString("\n")
	m := r.Money
	balanced := "balanced"
	if !m.Balanced() {
		balanced = "NOT BALANCED"
	}
	fmt.Fprintf(b, "Money: buyers paid $%s = providers earned $%s + platform fees $%s − continuation subsidy $%s (%s, to the nano-dollar)\n",
		usd(m.Debits), usd(m.Earnings), usd(m.Fees), usd(m.Subsidy), balanced)
	fmt.Fprintf(b, "  the platform keeps $%s\n", usd(m.Net))

	if c := r.Comparison; c != nil {
		b.WriteString("\nPolicies, same fleet, demand and seed\n")
		tw = &table{}
		tw.row("\tserved\t503s\tcapacity used\tutilization\tper 1M tokens\tTTFT p95\tqueue p95\tcost over bound\tcapacity under bound\t")
		for _, p := range c.Policies {
			tw.rowf("  %s\t%s\t%s\t%s\t%s\t$%s\t%s ms\t%s ms\t%s\t%s pts\t\n", p.Policy, pct(p.Served), count(p.Unavailable), pct(p.CapacityUsed), pct(p.Utilization),
				price(p.PerMillion), ms(p.TTFTP95), ms(p.QueueP95), signedPct(p.CostGapPct), trimFloat(p.CapacityGapPts, 2))
		}
		tw.rowf("  offline bound\t%s of tokens\t\t%s\t\t$%s\t\t\t\t\t\n", pct(c.Bound.Served), pct(c.Bound.CapacityUsed), price(c.Bound.PerMillion))
		tw.write(b)
		b.WriteString(wrap("  "+c.Bound.What, 100, "  ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// byHourOfDay averages hourly values by the hour of the day, in UTC.
func byHourOfDay(hourly []float64, start time.Time) []float64 {
	var sum [24]float64
	var n [24]int
	for h, v := range hourly {
		i := start.Add(time.Duration(h) * time.Hour).UTC().Hour()
		sum[i] += v
		n[i]++
	}
	out := make([]float64, 24)
	for i := range out {
		if n[i] > 0 {
			out[i] = sum[i] / float64(n[i])
		}
	}
	return out
}

// sparkline draws values as block characters, the highest full, and names the highest.
func sparkline(vs []float64) string {
	blocks := []rune("▁▂▃▄▅▆▇█")
	top := slices.Max(vs)
	if top <= 0 {
		return strings.Repeat(string(blocks[0]), len(vs))
	}
	var b strings.Builder
	for _, v := range vs {
		b.WriteRune(blocks[int(math.Round(max(v, 0)/top*float64(len(blocks)-1)))])
	}
	return b.String() + " (top " + pct(top) + ")"
}

// table lays rows out in columns: the first left-aligned, the others right-aligned.
type table struct{ rows [][]string }

func (t *table) row(s string) {
	t.rows = append(t.rows, strings.Split(strings.TrimSuffix(s, "\t"), "\t"))
}

func (t *table) rowf(format string, args ...any) {
	t.row(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

func (t *table) write(b *strings.Builder) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				line.WriteString(c + pad)
			case i == len(r)-1 && strings.ContainsRune(c, '▁'):
				line.WriteString("  " + c)
			default:
				line.WriteString("  " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func pct(x float64) string { return trimFloat(100*x, 1) + "%" }

func signedPct(x float64) string { return trimFloat(x, 1) + "%" }

func ms(x float64) string { return count(int64(math.Round(x))) }

// trimFloat formats x with at most d decimals.
func trimFloat(x float64, d int) string {
	s := fmt.Sprintf("%.*f", d, x)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// count writes an integer with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	parts = append([]string{s}, parts...)
	out := strings.Join(parts, ",")
	if neg {
		out = "-" + out
	}
	return out
}

// usd shortens an exact USD amount for reading: cents from a dollar up, four significant
// decimals below.
func usd(s string) string {
	n, err := money.ParseUSD(s)
	if err != nil {
		return s
	}
	f := n.Float()
	switch a := math.Abs(f); {
	case a >= 1:
		cents := int64(math.Round(math.Abs(f) * 100))
		sign := ""
		if f < 0 {
			sign = "-"
		}
		return fmt.Sprintf("%s%s.%02d", sign, count(cents/100), cents%100)
	case a == 0:
		return "0"
	}
	return trimFloat(f, 4-int(math.Floor(math.Log10(math.Abs(f)))))
}

// price writes a price per million tokens with four decimals.
func price(x float64) string { return fmt.Sprintf("%.4f", x) }

// wrap breaks text into lines of at most width, indenting the following ones.
func wrap(s string, width int, indent string) string {
	words := strings.Fields(s)
	var lines []string
	line := indent
	for _, w := range words {
		if len(line)+len(w)+1 > width && strings.TrimSpace(line) != "" {
			lines = append(lines, line)
			line = indent
		}
		if strings.TrimSpace(line) != "" {
			line += " "
		}
		line += w
	}
	lines = append(lines, line)
	return strings.Join(slices.Clip(lines), "\n")
}
