package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/report"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// A provider's pages (role provider; an admin may open them too, for their own account):
//
//	GET  /provider                       provider tokens, nodes with their live state, earnings
//	POST /provider/tokens                create a token: the page again, with the token shown once
//	POST /provider/tokens/{id}/revoke    revoke one of the account's tokens
//	GET  /provider/nodes/{id}            one node: status, hardware, telemetry, windows, offers and
//	                                     their asks now, its ask schedule, sessions, its record
//	                                     per day, reputation, events
//	POST /provider/nodes/{id}/asks       set or clear the node's ask schedule (pricing.go)
//	GET  /provider/earnings              earnings per day and node, totals, payouts
//
// They show what the provider API (GET /v1/provider/nodes, /v1/provider/earnings) returns, from
// the same store calls. A node page shows another account's node to admins only; to anyone
// else it does not exist (404).
func (c *Console) registerProvider(mux *http.ServeMux) {
	mux.Handle("GET /provider", c.as(store.RoleProvider, c.providerHome))
	mux.Handle("POST /provider/tokens", c.as(store.RoleProvider, c.providerCreateToken))
	mux.Handle("POST /provider/tokens/{id}/revoke", c.as(store.RoleProvider, c.providerRevokeToken))
	mux.Handle("GET /provider/nodes/{id}", c.as(store.RoleProvider, c.providerNode))
	mux.Handle("POST /provider/nodes/{id}/asks", c.as(store.RoleProvider, c.providerSetAsks))
	mux.Handle("GET /provider/earnings", c.as(store.RoleProvider, c.providerEarnings))
}

const (
	provEarningDays  = 30  // the earnings chart and page
	provDefaultDays  = 7   // a node's record per day, unless ?days=
	provMaxDays      = 30  // the most ?days= may ask
	provChecksShown  = 20  // a node's latest checks
	provEventsShown  = 50  // a node's latest events
	provTokenNameMax = 100 // characters of a token's name
)

// provHome is the data of /provider.
type provHome struct {
	Tokens []*store.Key
	// NewToken is the token just created, shown once; NewTokenName its name, and Coordinator
	// the URL its agent connects to.
	NewToken, NewTokenName, Coordinator string
	Nodes                               []provNode
	Balance                             *store.Balance
	Earnings                            Chart // pending and available per day, 30 days
}

// provNode is a node as its record says, with its live state when it is connected.
type provNode struct {
	ID, Name, Region, Engine, Agent string
	Online                          bool
	Paused                          string // why it takes no new jobs; "" when it does
	Level                           string
	Score                           float64
	Running                         int
	FirstSeen, LastSeen             time.Time
	Offers                          []provOffer
}

// provOffer is one model a node offers, at its ask per million tokens.
type provOffer struct {
	Model, Quantization     string
	ContextLength           int
	MaxConcurrent, Running  int
	Continues, Warm         bool
	InputPrice, OutputPrice money.Price
	// Level is the model's own level on the node (store.Level*), while the node is connected;
	// "" offline.
	Level string
	// Now is what it asks now, while the node is connected; nil offline.
	Now *askNow
}

// pageAccount is the account whose pages the request shows: the logged-in user's.
func pageAccount(r *http.Request) string { return sessionOf(r).user.AccountID }

func (c *Console) providerHome(w http.ResponseWriter, r *http.Request) error {
	return c.renderProviderHome(w, r, "", "")
}

// renderProviderHome renders /provider, with a token just created when there is one.
func (c *Console) renderProviderHome(w http.ResponseWriter, r *http.Request, newToken, newTokenName string) error {
	ctx, account := r.Context(), pageAccount(r)
	tokens, err := c.cfg.Store.Keys(ctx, account, store.KeyProvider)
	if err != nil {
		return err
	}
	nodes, err := c.cfg.Store.NodesOf(ctx, account)
	if err != nil {
		return err
	}
	bal, err := c.cfg.Store.Balance(ctx, account)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	since := store.WindowStart(store.Daily, now).AddDate(0, 0, -(provEarningDays - 1))
	earnings, err := c.cfg.Store.Earnings(ctx, account, since)
	if err != nil {
		return err
	}
	data := provHome{Tokens: tokens, NewToken: newToken, NewTokenName: newTokenName, Coordinator: coordinatorURL(r, c.cfg.Secure),
		Balance: bal, Earnings: c.earningsChart(r, since, now, earnings, "")}
	data.Earnings.Title = c.i18n.T(c.lang(r), "provider.home.earnings") // the page's only heading for it: "…, last 30 days"
	for _, n := range nodes {
		data.Nodes = append(data.Nodes, c.liveNode(n))
	}
	if newToken != "" {
		w.Header().Set("Cache-Control", "no-store") // the token is in the page
	}
	c.render(w, r, http.StatusOK, "provider", data)
	return nil
}

// providerCreateToken makes a provider token and shows it once, in the page the POST returns:
// it is never stored, so it cannot be shown after a redirect.
func (c *Console) providerCreateToken(w http.ResponseWriter, r *http.Request) error {
	ctx, account := r.Context(), pageAccount(r)
	name := strings.TrimSpace(r.FormValue("name"))
	if name == "" || len([]rune(name)) > provTokenNameMax {
		c.redirect(w, r, "/provider", "provider.flash.token_name")
		return nil
	}
	secret, k, err := ops.CreateKey(ctx, c.cfg.Store, ops.NewKey{AccountID: account, Kind: store.KeyProvider, Name: name,
		At: c.cfg.Now()})
	if err != nil {
		return err
	}
	c.log.InfoContext(r.Context(), "console: provider token created", "account", account, "key", k.ID, "prefix", k.Prefix)
	return c.renderProviderHome(w, r, secret, name)
}

func (c *Console) providerRevokeToken(w http.ResponseWriter, r *http.Request) error {
	ctx, account, id := r.Context(), pageAccount(r), r.PathValue("id")
	tokens, err := c.cfg.Store.Keys(ctx, account, store.KeyProvider)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(tokens, func(k *store.Key) bool { return k.ID == id }) {
		return store.ErrNotFound // another account's, or none
	}
	if _, err := c.cfg.Store.RevokeKey(ctx, id, c.cfg.Now()); err != nil {
		return err
	}
	c.redirect(w, r, "/provider", "provider.flash.token_revoked")
	return nil
}

// coordinatorURL is the URL agents connect to: the one the browser used.
func coordinatorURL(r *http.Request, secure bool) string {
	scheme := "http"
	if r.TLS != nil || secure {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// liveNode is a node as its record says, with its live state when it is connected.
func (c *Console) liveNode(n *store.Node) provNode {
	v := provNode{ID: n.ID, Name: n.Name, Region: n.Region, Engine: n.Engine, Agent: n.Agent,
		Level: n.Level, Score: n.Score, FirstSeen: n.FirstSeen, LastSeen: n.LastSeen}
	if v.Level == "" {
		v.Level = store.LevelNew
	}
	var offers []protocol.Offer
	json.Unmarshal(n.Offers, &offers) // a record without offers shows none
	live := c.cfg.Fleet.Node(n.ID)
	if live == nil {
		for _, o := range offers {
			v.Offers = append(v.Offers, offerOf(o))
		}
		return v
	}
	v.Online, v.LastSeen, v.Paused, v.Level = true, c.cfg.Now(), live.Paused(), live.Level()
	if s := live.Score(); s > 0 {
		v.Score = s
	}
	for _, o := range live.Offers {
		po := offerOf(o.Offer)
		po.Running, po.Warm, po.Level, po.Now = o.Running(), o.Warm(), o.OwnLevel(), askNowOf(o.Price())
		v.Running += po.Running
		v.Offers = append(v.Offers, po)
	}
	return v
}

func offerOf(o protocol.Offer) provOffer {
	return provOffer{Model: o.Model, Quantization: o.Quantization, ContextLength: o.ContextLength, MaxConcurrent: o.MaxConcurrent,
		Continues: o.Continues, Warm: true, InputPrice: money.Price(o.InputPrice), OutputPrice: money.Price(o.OutputPrice)}
}

// earningsChart is earnings per UTC day from since to now, pending and available: of one node,
// or of every node when nodeID is "".
func (c *Console) earningsChart(r *http.Request, since, now time.Time, es []store.Earning, nodeID string) Chart {
	lang := c.lang(r)
	days := provDayCount(since, now)
	pending, available := make([]float64, days), make([]float64, days)
	for _, e := range es {
		if i := provDayIndex(since, e.Day); i >= 0 && i < days && (nodeID == "" || e.NodeID == nodeID) {
			pending[i] += e.Pending.Float()
			available[i] += e.Available.Float()
		}
	}
	labels := make([]string, days)
	for i := range labels {
		labels[i] = c.dayLabel(lang, since.AddDate(0, 0, i))
	}
	return Chart{Title: c.i18n.T(lang, "provider.chart.earnings"), Labels: labels, Unit: UnitUSD,
		Series: []Series{{Name: c.i18n.T(lang, "provider.chart.pending"), Values: pending},
			{Name: c.i18n.T(lang, "provider.chart.available"), Values: available}}}
}

// provDayCount is how many UTC days from since (a midnight) to now, today included.
func provDayCount(since, now time.Time) int { return int(now.Sub(since)/(24*time.Hour)) + 1 }

// provDayIndex is the day of t counted from since (a midnight UTC).
func provDayIndex(since, t time.Time) int {
	if t.Before(since) {
		return -1
	}
	return int(t.Sub(since) / (24 * time.Hour))
}

// provEarnings is the data of /provider/earnings.
type provEarnings struct {
	Since   time.Time
	Rows    []provEarningRow // newest first
	Pending money.Nanos      // over the rows
	Avail   money.Nanos
	Balance *store.Balance
	Chart   Chart
	Payouts []store.Payout // newest first
	ByAsk   []askRow       // the same earnings by the ask they were billed at, dearest first
}

// provEarningRow is a node's earnings on a day.
type provEarningRow struct {
	Day                time.Time
	NodeID, NodeName   string
	Pending, Available money.Nanos
}

func (c *Console) providerEarnings(w http.ResponseWriter, r *http.Request) error {
	ctx, account := r.Context(), pageAccount(r)
	now := c.cfg.Now()
	since := store.WindowStart(store.Daily, now).AddDate(0, 0, -(provEarningDays - 1))
	es, err := c.cfg.Store.Earnings(ctx, account, since)
	if err != nil {
		return err
	}
	bal, err := c.cfg.Store.Balance(ctx, account)
	if err != nil {
		return err
	}
	nodes, err := c.cfg.Store.NodesOf(ctx, account)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, n := range nodes {
		names[n.ID] = n.Name
	}
	data := provEarnings{Since: since, Balance: bal, Chart: c.earningsChart(r, since, now, es, "")}
	if data.Payouts, err = c.cfg.Store.Payouts(ctx, account, 50); err != nil {
		return err
	}
	byAsk, err := c.cfg.Store.EarningsByAsk(ctx, account, since)
	if err != nil {
		return err
	}
	data.ByAsk = askRowsOf(byAsk)
	for _, e := range es {
		data.Rows = append(data.Rows, provEarningRow{Day: e.Day, NodeID: e.NodeID, NodeName: names[e.NodeID], Pending: e.Pending, Available: e.Available})
		data.Pending += e.Pending
		data.Avail += e.Available
	}
	c.render(w, r, http.StatusOK, "provider_earnings", data)
	return nil
}

// provNodePage is the data of /provider/nodes/{id}.
type provNodePage struct {
	provNode
	Hardware          protocol.Hardware
	Fingerprint       string
	HardwareChangedAt time.Time
	Telemetry         []provGPU // the latest reading, per GPU; nil when none
	TelemetryAt       time.Time
	History           []Chart // the last 24 hours, per hour: temperature, power, utilization, memory
	Earnings          Chart   // per day over the record's days
	Windows, Timezone string  // Windows "" : always available
	Days              int     // how many days the record covers
	Since             time.Time
	Record            []provDay // per day, oldest first
	Totals            provDay
	Sessions          []provSession // newest first
	Reputation        provReputation
	Events            []*store.NodeEvent
	Asks              askForm // the node's ask schedule, to change
}

// provGPU is one GPU's reading; a field the tool could not read is not Has….
type provGPU struct {
	Index                      int
	Temperature, Power, Limit  int   // °C, W, W
	Utilization                int   // %
	MemoryUsed, MemoryTotal    int64 // MiB
	HasTemperature, HasPower   bool
	HasLimit, HasUtilization   bool
	HasMemoryUsed, HasMemTotal bool
}

// provSession is one connection of the node.
type provSession struct {
	ConnectedAt, EndedAt time.Time // EndedAt zero while online
	Online               time.Duration
	Busy                 time.Duration
}

// provReputation is a node's standing: its level and why, its score with a reason per factor
// (the coordinator's prober explains it: Config.Reputation), and its latest checks.
type provReputation struct {
	Level, LevelReason string
	LevelChangedAt     time.Time
	Score              float64
	Reasons            []reputation.Reason
	Checks             []store.NodeCheck
	ChecksPassed       int
	Overclaims         int // requests billed at the coordinator's count, below the node's claim
}

func (c *Console) providerNode(w http.ResponseWriter, r *http.Request) error {
	n, err := c.cfg.Store.Node(r.Context(), r.PathValue("id"))
	if err == nil && n.AccountID != pageAccount(r) && !sessionOf(r).user.Has(store.RoleAdmin) {
		err = store.ErrNotFound // another provider's node does not exist for this one
	}
	if err != nil {
		return err
	}
	return c.renderNode(w, r, n, http.StatusOK, nil)
}

// renderNode renders a node's page with status; asks is the schedule form as sent, when it
// was refused, nil to show the node's schedule.
func (c *Console) renderNode(w http.ResponseWriter, r *http.Request, n *store.Node, status int, asks *askForm) error {
	ctx, id := r.Context(), n.ID
	days := provDefaultDays
	if s := r.URL.Query().Get("days"); s != "" {
		if d, err := strconv.Atoi(s); err == nil && d >= 1 && d <= provMaxDays {
			days = d
		}
	}
	now := c.cfg.Now()
	since := store.WindowStart(store.Daily, now).AddDate(0, 0, -(days - 1))
	if first := store.WindowStart(store.Daily, n.FirstSeen); first.After(since) && first.Before(now) {
		since = first // no rows for the days before the node existed
	}
	data := provNodePage{provNode: c.liveNode(n), Fingerprint: n.Fingerprint, HardwareChangedAt: n.HardwareChangedAt,
		Windows: n.Windows, Timezone: n.Timezone, Days: days, Since: since}
	json.Unmarshal(n.Hardware, &data.Hardware) // a record without hardware shows none
	if live := c.cfg.Fleet.Node(id); live != nil {
		if t, at := live.Telemetry(); t != nil {
			data.Telemetry, data.TelemetryAt = gpusOf(t), at
		}
	}
	sessions, err := c.cfg.Store.NodeSessions(ctx, id, since)
	if err != nil {
		return err
	}
	counts, err := c.cfg.Store.NodeDays(ctx, id, since)
	if err != nil {
		return err
	}
	earnings, err := c.cfg.Store.Earnings(ctx, n.AccountID, since)
	if err != nil {
		return err
	}
	samples, err := c.cfg.Store.Telemetry(ctx, id, now.Add(-24*time.Hour))
	if err != nil {
		return err
	}
	if data.Events, err = c.cfg.Store.NodeEvents(ctx, id, provEventsShown); err != nil {
		return err
	}
	checks, err := c.cfg.Store.NodeChecks(ctx, id, provChecksShown)
	if err != nil {
		return err
	}
	sched, err := report.Schedule(n)
	if err != nil {
		c.log.WarnContext(r.Context(), "console: node's windows", "node", id, "err", err)
	}
	data.Record, data.Totals = nodeRecord(id, since, now, sessions, counts, earnings, sched)
	for _, s := range slices.Backward(sessions) {
		ps := provSession{ConnectedAt: s.ConnectedAt, Busy: s.Busy}
		end := s.LastSeen
		if s.Ended {
			ps.EndedAt = s.LastSeen
		} else if live := c.cfg.Fleet.Node(id); live != nil {
			end = now
		}
		ps.Online = end.Sub(s.ConnectedAt)
		data.Sessions = append(data.Sessions, ps)
	}
	data.History = c.telemetryCharts(r, now, samples)
	data.Earnings = c.earningsChart(r, since, now, earnings, id)
	data.Reputation = provReputation{Level: data.Level, LevelReason: n.LevelReason, LevelChangedAt: n.LevelChangedAt,
		Score: data.Score, Checks: checks, Overclaims: n.Overclaims}
	if c.cfg.Reputation != nil {
		if s, err := c.cfg.Reputation(ctx, id); err == nil {
			data.Reputation.Score, data.Reputation.Reasons = s.Value, s.Reasons
		} else {
			c.log.WarnContext(r.Context(), "console: explain a node's score", "node", id, "err", err)
		}
	}
	for _, ch := range checks {
		if ch.Passed {
			data.Reputation.ChecksPassed++
		}
	}
	stored, err := c.cfg.Store.NodeAskSchedule(ctx, id)
	if err != nil {
		return err
	}
	data.Asks = askFormOf(stored, c.cfg.Fleet.Node(id))
	if asks != nil {
		asks.Set = data.Asks.Set
		data.Asks = *asks
	}
	c.render(w, r, status, "provider_node", data)
	return nil
}

// gpusOf is a reading per GPU, rounded for people.
func gpusOf(t *protocol.Telemetry) []provGPU {
	out := []provGPU{}
	for _, g := range t.GPUs {
		v := provGPU{Index: g.Index}
		if g.TemperatureC != nil {
			v.Temperature, v.HasTemperature = roundInt(*g.TemperatureC), true
		}
		if g.PowerW != nil {
			v.Power, v.HasPower = roundInt(*g.PowerW), true
		}
		if g.PowerLimitW != nil {
			v.Limit, v.HasLimit = roundInt(*g.PowerLimitW), true
		}
		if g.UtilizationPct != nil {
			v.Utilization, v.HasUtilization = roundInt(*g.UtilizationPct), true
		}
		if g.MemoryUsedMiB != nil {
			v.MemoryUsed, v.HasMemoryUsed = *g.MemoryUsedMiB, true
		}
		if g.MemoryTotalMiB != nil {
			v.MemoryTotal, v.HasMemTotal = *g.MemoryTotalMiB, true
		}
		out = append(out, v)
	}
	return out
}

func roundInt(f float64) int {
	if f < 0 {
		return -int(-f + 0.5)
	}
	return int(f + 0.5)
}

// telemetryCharts draws the last 24 hours of a node's telemetry, per hour and GPU: the highest
// temperature, power and memory used, and the mean utilization. No samples: no charts.
func (c *Console) telemetryCharts(r *http.Request, now time.Time, samples []store.TelemetrySample) []Chart {
	if len(samples) == 0 {
		return nil
	}
	lang := c.lang(r)
	start, loc := now.UTC().Truncate(time.Hour).Add(-23*time.Hour), c.i18n.locale(lang)
	labels := make([]string, 24)
	for i := range labels {
		labels[i] = loc.localDigits(start.Add(time.Duration(i) * time.Hour).Format("15:04"))
	}
	type gpuHours struct {
		temp, power, mem, util []float64
		utilN                  []int
	}
	gpus := map[int]*gpuHours{}
	for _, s := range samples {
		var t protocol.Telemetry
		if json.Unmarshal(s.Data, &t) != nil {
			continue
		}
		h := int(s.At.Sub(start) / time.Hour)
		if h < 0 || h >= 24 {
			continue
		}
		for _, g := range t.GPUs {
			gh := gpus[g.Index]
			if gh == nil {
				gh = &gpuHours{make([]float64, 24), make([]float64, 24), make([]float64, 24), make([]float64, 24), make([]int, 24)}
				gpus[g.Index] = gh
			}
			if g.TemperatureC != nil {
				gh.temp[h] = max(gh.temp[h], *g.TemperatureC)
			}
			if g.PowerW != nil {
				gh.power[h] = max(gh.power[h], *g.PowerW)
			}
			if g.MemoryUsedMiB != nil {
				gh.mem[h] = max(gh.mem[h], float64(*g.MemoryUsedMiB))
			}
			if g.UtilizationPct != nil {
				gh.util[h] += *g.UtilizationPct
				gh.utilN[h]++
			}
		}
	}
	indexes := make([]int, 0, len(gpus))
	for i := range gpus {
		indexes = append(indexes, i)
	}
	slices.Sort(indexes)
	charts := []Chart{
		{Title: c.i18n.T(lang, "provider.node.chart_temperature"), Labels: labels, Unit: c.i18n.T(lang, "provider.unit.celsius"), Grouped: true},
		{Title: c.i18n.T(lang, "provider.node.chart_utilization"), Labels: labels, Unit: c.i18n.T(lang, "provider.unit.percent"), Grouped: true},
		{Title: c.i18n.T(lang, "provider.node.chart_power"), Labels: labels, Unit: c.i18n.T(lang, "provider.unit.watts"), Grouped: true},
		{Title: c.i18n.T(lang, "provider.node.chart_memory"), Labels: labels, Unit: c.i18n.T(lang, "provider.unit.mib"), Grouped: true},
	}
	for _, i := range indexes {
		gh := gpus[i]
		for h, n := range gh.utilN {
			if n > 0 {
				gh.util[h] /= float64(n)
			}
		}
		name := c.i18n.T(lang, "provider.node.gpu", i)
		for j, v := range [][]float64{gh.temp, gh.util, gh.power, gh.mem} {
			charts[j].Series = append(charts[j].Series, Series{Name: name, Values: v})
		}
	}
	return charts
}

// provDay is a node's record over one UTC day, or as totals over the whole period.
type provDay struct {
	Day                            time.Time
	Jobs, Failed                   int
	PromptTokens, CompletionTokens int64
	Pending, Available             money.Nanos
	Online, Busy, Window           time.Duration
	FillRate                       float64 // busy / online; 0 when never online
	// UptimeInWindows is the share of the declared windows' time the node was online; HasWindow
	// is false when there was no window time (then it means nothing).
	UptimeInWindows float64
	HasWindow       bool
}

// nodeRecord is a node's record per UTC day from since to now, newest first, and over the whole
// period: report.NodeDays, as the provider API computes it.
func nodeRecord(nodeID string, since, now time.Time, sessions []*store.NodeSession, counts []store.NodeDay,
	earnings []store.Earning, sched *schedule.Schedule) ([]provDay, provDay) {
	days, total := report.NodeDays(nodeID, since, now, sessions, counts, earnings, sched)
	out := make([]provDay, len(days))
	for i, d := range days {
		out[len(days)-1-i] = provDayOf(d) // newest first, as people read a log
	}
	return out, provDayOf(total)
}

func provDayOf(d report.Day) provDay {
	p := provDay{Day: d.Day, Jobs: d.Jobs, Failed: d.Failed, PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens,
		Pending: d.Pending, Available: d.Available, Online: d.Online, Busy: d.Busy, Window: d.Window, FillRate: d.FillRate()}
	p.UptimeInWindows, p.HasWindow = d.UptimeInWindows()
	return p
}
