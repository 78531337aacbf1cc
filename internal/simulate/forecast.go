package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// ForecastReport is a provider's forecast: their node in a market, over several seeds, as
// ranges; and, when asked, the same with other settings (what if).
type ForecastReport struct {
	Node   NodeSpec `json:"node"`
	Seeds  int      `json:"seeds"`
	Days   float64  `json:"days"`
	Market string   `json:"market"`
	// Asked lists the models the demand asks for, for a node whose models none asks for.
	Asked  []string  `json:"models_asked"`
	Base   Outlook   `json:"forecast"`
	WhatIf *WhatIf   `json:"what_if,omitempty"`
	Notes  []string  `json:"notes,omitempty"`
	Start  time.Time `json:"start"`
}

// NodeSpec is what the forecast's node is.
type NodeSpec struct {
	Name          string   `json:"name"`
	GPU           string   `json:"gpu"`
	Models        []string `json:"models"`
	Windows       string   `json:"windows"`
	Timezone      string   `json:"timezone"`
	Ask           string   `json:"ask_usd_per_million"`
	MaxConcurrent int      `json:"max_concurrent"`
}

// WhatIf is the forecast with other settings.
type WhatIf struct {
	Changes string   `json:"changes"`
	Node    NodeSpec `json:"node"`
	Outlook Outlook  `json:"forecast"`
	// EarnedChangePct is the change of the median weekly earnings, in %.
	EarnedChangePct float64 `json:"earned_change_pct"`
}

// Outlook is a node's measures over the seeds: p10, p50 and p90 of each.
type Outlook struct {
	// WeeklyEarned is USD per week (a run's earnings × 7 days ÷ its days).
	WeeklyEarned Range `json:"weekly_earned_usd"`
	// Fill is busy slot-time ÷ slot-time inside the node's windows.
	Fill         Range `json:"fill"`
	WeeklyTokens Range `json:"weekly_output_tokens"`
	WeeklyJobs   Range `json:"weekly_jobs"`
	// ByAsk is the median run's earnings by ask window, per week.
	ByAsk       map[string]float64 `json:"weekly_earned_by_ask_usd,omitempty"`
	WindowHours float64            `json:"window_hours_per_week"`
}

// Range is p10, p50 and p90 over the seeds.
type Range struct {
	P10 float64 `json:"p10"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
}

// Forecast runs the market with the node added, once per seed from o.Seed on, and gathers
// its measures; with whatIf, again with the other node, on the same seeds.
func Forecast(ctx context.Context, f *Fleet, d *Demand, node Class, o Options, seeds int, whatIf *Class, changes string) (*ForecastReport, error) {
	if seeds <= 0 {
		seeds = 10
	}
	if o.Duration <= 0 {
		o.Duration = 7 * 24 * time.Hour
	}
	node.Count = 1
	taken := map[string]bool{}
	for _, k := range f.Classes {
		taken[k.Name] = true
	}
	for base, i := node.Name, 2; taken[node.Name]; i++ {
		node.Name = fmt.Sprintf("%s-%d", base, i)
	}
	fr := &ForecastReport{Seeds: seeds, Days: round(o.Duration.Hours()/24, 3), Start: f.Start}
	if fr.Start.IsZero() {
		fr.Start = DefaultStart
	}
	asked := map[string]bool{}
	for _, s := range d.Streams {
		asked[s.Model] = true
		for _, m := range s.Fallbacks {
			asked[m] = true
		}
	}
	for _, b := range d.Batches {
		asked[b.Model] = true
	}
	fr.Asked = sortedKeys(asked)
	for _, m := range node.Models {
		if !asked[m] {
			fr.Notes = append(fr.Notes, fmt.Sprintf("No buyer in this demand asks for %s: models asked for are %s.", m, strings.Join(fr.Asked, ", ")))
		}
	}
	var err error
	if fr.Node, fr.Base, err = outlook(ctx, f, d, node, o, seeds); err != nil {
		return nil, err
	}
	if whatIf != nil {
		w := *whatIf
		w.Count, w.Name = 1, node.Name
		spec, out, err := outlook(ctx, f, d, w, o, seeds)
		if err != nil {
			return nil, fmt.Errorf("what if: %w", err)
		}
		fr.WhatIf = &WhatIf{Changes: changes, Node: spec, Outlook: out}
		if b := fr.Base.WeeklyEarned.P50; b > 0 {
			fr.WhatIf.EarnedChangePct = round(100*(out.WeeklyEarned.P50-b)/b, 1)
		}
	}
	return fr, nil
}

// outlook runs the seeds with node in the market.
func outlook(ctx context.Context, f *Fleet, d *Demand, node Class, o Options, seeds int) (NodeSpec, Outlook, error) {
	fleet := *f
	fleet.Classes = append(slices.Clone(f.Classes), node)
	k, err := node.compile(len(f.Classes))
	if err != nil {
		return NodeSpec{}, Outlook{}, err
	}
	spec := NodeSpec{Name: node.Name, GPU: k.GPU, Models: node.Models, Windows: k.windows.String(), Timezone: k.loc.String(),
		Ask: k.in.String() + " in, " + k.out.String() + " out", MaxConcurrent: k.MaxConcurrent}
	if s := k.asks.Schedule(); s != nil {
		var ws []string
		for _, w := range s.Windows {
			ws = append(ws, fmt.Sprintf("%s (%s): %s in, %s out", w.Name, w.When, money.Price(w.InputPrice), money.Price(w.OutputPrice)))
		}
		spec.Ask += "; " + strings.Join(ws, "; ")
	}
	week := 7 * 24 * time.Hour.Hours() / o.Duration.Hours()
	earned, fill, tokens, jobs := make([]float64, seeds), make([]float64, seeds), make([]float64, seeds), make([]float64, seeds)
	byAsk := make([]map[string]float64, seeds)
	windowHours := k.windows.Overlap(DefaultStart, DefaultStart.Add(7*24*time.Hour)).Hours()
	// The seeds run at once, each on one worker: the runs are independent.
	errs := make([]error, seeds)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for s := range seeds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			so := o
			so.Seed, so.Workers, so.Progress = o.Seed+uint64(s), 1, nil // runs at once: their days would interleave
			rep, err := Run(ctx, &fleet, d, so)
			if err != nil {
				errs[s] = err
				return
			}
			i := slices.IndexFunc(rep.Classes, func(c ClassReport) bool { return c.Name == node.Name })
			c := rep.Classes[i]
			earned[s] = c.earned.Float() * week
			fill[s] = c.Fill
			tokens[s] = float64(c.Tokens) * week
			nj := slices.IndexFunc(rep.NodeList, func(n NodeReport) bool { return n.Class == node.Name })
			jobs[s] = float64(rep.NodeList[nj].Jobs) * week
			m := map[string]float64{}
			for name, v := range c.ByAsk {
				x, _ := money.ParseUSD(v)
				m[name] = round(x.Float()*week, 6)
			}
			byAsk[s] = m
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return spec, Outlook{}, err
	}
	out := Outlook{WeeklyEarned: rangeOf(earned, 4), Fill: rangeOf(fill, 4), WeeklyTokens: rangeOf(tokens, 0), WeeklyJobs: rangeOf(jobs, 0),
		WindowHours: round(windowHours, 2)}
	// The median run's earnings by ask.
	order := make([]int, len(earned))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareFloat(earned[a], earned[b]) })
	out.ByAsk = byAsk[order[len(order)/2]]
	return spec, out, nil
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rangeOf is the p10, p50 and p90 of xs, linearly interpolated, rounded to d decimals.
func rangeOf(xs []float64, d int) Range {
	s := slices.Sorted(slices.Values(xs))
	q := func(p float64) float64 {
		if len(s) == 0 {
			return 0
		}
		x := p * float64(len(s)-1)
		i := int(math.Floor(x))
		if i+1 >= len(s) {
			return round(s[len(s)-1], d)
		}
		return round(s[i]+(s[i+1]-s[i])*(x-float64(i)), d)
	}
	return Range{q(0.1), q(0.5), q(0.9)}
}

// WriteText writes the forecast for a terminal.
func (fr *ForecastReport) WriteText(w io.Writer) error {
	b := &strings.Builder{}
	n := fr.Node
	fmt.Fprintf(b, "Forecast for %s: %s, %s, %d slots a model\n", n.Name, n.GPU, strings.Join(n.Models, ", "), n.MaxConcurrent)
	fmt.Fprintf(b, "  windows %q (%s), ask USD per 1M tokens: %s\n", n.Windows, n.Timezone, n.Ask)
	fmt.Fprintf(b, "  in %s, %d seeds × %s days from %s\n\n", fr.Market, fr.Seeds, trimFloat(fr.Days, 2), fr.Start.Format("Mon 2006-01-02"))
	writeOutlook(b, &fr.Base)
	if wi := fr.WhatIf; wi != nil {
		fmt.Fprintf(b, "\nWhat if %s", wi.Changes)
		fmt.Fprintf(b, " (windows %q, ask %s, %s):\n", wi.Node.Windows, wi.Node.Ask, strings.Join(wi.Node.Models, ", "))
		writeOutlook(b, &wi.Outlook)
		fmt.Fprintf(b, "  median weekly earnings %s%% against the forecast above\n", signed(wi.EarnedChangePct))
	}
	for _, note := range fr.Notes {
		b.WriteString("\n" + wrap(note, 100, ""))
	}
	if len(fr.Notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeOutlook(b *strings.Builder, o *Outlook) {
	t := &table{}
	t.row("\tp10\tp50\tp90")
	t.rowf("  weekly earnings\t$%s\t$%s\t$%s", usdf(o.WeeklyEarned.P10), usdf(o.WeeklyEarned.P50), usdf(o.WeeklyEarned.P90))
	t.rowf("  fill of the windows\t%s\t%s\t%s", pct(o.Fill.P10), pct(o.Fill.P50), pct(o.Fill.P90))
	t.rowf("  output tokens a week\t%s\t%s\t%s", count(int64(o.WeeklyTokens.P10)), count(int64(o.WeeklyTokens.P50)), count(int64(o.WeeklyTokens.P90)))
	t.rowf("  jobs a week\t%s\t%s\t%s", count(int64(o.WeeklyJobs.P10)), count(int64(o.WeeklyJobs.P50)), count(int64(o.WeeklyJobs.P90)))
	t.write(b)
	fmt.Fprintf(b, "  %s hours a week inside the windows", trimFloat(o.WindowHours, 1))
	if len(o.ByAsk) > 1 || len(o.ByAsk) == 1 && o.ByAsk["flat"] == 0 {
		var parts []string
		for _, k := range sortedKeys(o.ByAsk) {
			parts = append(parts, fmt.Sprintf("%s $%s", k, usdf(o.ByAsk[k])))
		}
		fmt.Fprintf(b, "; the median week earned by ask: %s", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
}

func usdf(x float64) string { return usd(money.Nanos(math.Round(x * float64(money.USD))).String()) }

func signed(x float64) string {
	if x > 0 {
		return "+" + trimFloat(x, 1)
	}
	return trimFloat(x, 1)
}
