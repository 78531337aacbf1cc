package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/report"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/store"
)

// A provider's view of its nodes (provider token):
//
//	GET /v1/provider/nodes          every node: online or not, paused and why, hardware, latest
//	                                telemetry, windows, offers
//	GET /v1/provider/nodes/{id}     one node, with its record per day over ?days=N (default 7):
//	                                jobs, tokens, earnings, online and busy time, fill rate,
//	                                uptime inside its windows; its sessions, telemetry history
//	                                (downsampled per minute, last 24 hours) and events
func (g *Gateway) registerProvider(mux *http.ServeMux) {
	mux.Handle("GET /v1/provider/nodes", g.handleAs(store.KeyProvider, g.providerNodes))
	mux.Handle("GET /v1/provider/nodes/{id}", g.handleAs(store.KeyProvider, g.providerNode))
}

// NodeInfo is a provider's node as GET /v1/provider/nodes shows it.
type NodeInfo struct {
	ID                string              `json:"id"`
	Name              string              `json:"name"`
	Region            string              `json:"region"`
	Engine            string              `json:"engine"`
	Agent             string              `json:"agent"`
	Online            bool                `json:"online"`
	Paused            *string             `json:"paused"` // why it takes no new jobs; null when it does or is offline
	Running           int                 `json:"running"`
	FirstSeen         string              `json:"first_seen"`
	LastSeen          string              `json:"last_seen"`
	Hardware          json.RawMessage     `json:"hardware"`
	Fingerprint       string              `json:"fingerprint"`
	HardwareChangedAt *string             `json:"hardware_changed_at"` // null if it never changed
	Windows           string              `json:"windows"`             // "" always available
	Timezone          string              `json:"timezone"`
	Offers            []OfferInfo         `json:"offers"`
	Telemetry         *protocol.Telemetry `json:"telemetry"` // the latest reading; null when none
	TelemetryAt       *string             `json:"telemetry_at"`
}

// OfferInfo is one model a node offers, at its ask in USD per million tokens.
type OfferInfo struct {
	Model         string `json:"model"`
	Quantization  string `json:"quantization,omitempty"`
	ContextLength int    `json:"context_length,omitempty"`
	MaxConcurrent int    `json:"max_concurrent"`
	Continues     bool   `json:"continues"`
	InputPrice    usd    `json:"input_price"`
	OutputPrice   usd    `json:"output_price"`
	// Level is the model's own level on the node (each model is verified on its own): new,
	// verified or quarantined. Buyers reach the model only once it and the node are verified.
	Level string `json:"level"`
}

// NodeReport is GET /v1/provider/nodes/{id}.
type NodeReport struct {
	NodeInfo
	Since    string            `json:"since"` // the first day counted, YYYY-MM-DD (UTC)
	Days     []NodeDayReport   `json:"days"`  // oldest first
	Totals   NodeDayReport     `json:"totals"`
	Sessions []NodeSessionInfo `json:"sessions"`          // oldest first
	History  []TelemetryPoint  `json:"telemetry_history"` // per minute, the last 24 hours
	Events   []NodeEventInfo   `json:"events"`            // newest first
	// Reputation is the node's level and score with the reasons (docs/reputation.md), and its
	// latest verification checks.
	Reputation *NodeReputation `json:"reputation"`
}

// NodeReputation is what a provider sees of a node's standing.
type NodeReputation struct {
	Level          string          `json:"level"` // new, verified, trusted, quarantined, suspended
	LevelReason    string          `json:"level_reason"`
	LevelChangedAt *string         `json:"level_changed_at"`
	Score          float64         `json:"score"` // 0..1
	Reasons        []ScoreReason   `json:"reasons"`
	Checks         []NodeCheckInfo `json:"checks"` // newest first
	// Overclaims counts the requests whose usage the node claimed beyond what the
	// coordinator counted in what it delivered (they were billed at the count).
	Overclaims int `json:"overclaims"`
}

// ScoreReason is one factor of a node's score: its value (1 best), its weight in the score,
// and what it means.
type ScoreReason struct {
	Factor string  `json:"factor"`
	Value  float64 `json:"value"`
	Weight float64 `json:"weight"`
	Text   string  `json:"text"`
}

// NodeCheckInfo is one verification of the node.
type NodeCheckInfo struct {
	At     string `json:"at"`
	Kind   string `json:"kind"` // onboarding or probe
	Model  string `json:"model"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

const checksShown = 20

// reputationOf is the node's standing, for its provider.
func (g *Gateway) reputationOf(ctx context.Context, n *store.Node) (*NodeReputation, error) {
	r := &NodeReputation{Level: n.Level, LevelReason: n.LevelReason, Score: n.Score, Reasons: []ScoreReason{}, Checks: []NodeCheckInfo{},
		Overclaims: n.Overclaims}
	if live := g.cfg.Fleet.Node(n.ID); live != nil {
		r.Level = live.Level()
	}
	if !n.LevelChangedAt.IsZero() {
		at := rfc3339(n.LevelChangedAt)
		r.LevelChangedAt = &at
	}
	if g.cfg.Reputation != nil {
		s, err := g.cfg.Reputation(ctx, n.ID)
		if err != nil {
			return nil, err
		}
		r.Score = s.Value
		for _, why := range s.Reasons {
			r.Reasons = append(r.Reasons, ScoreReason{Factor: why.Factor, Value: why.Value, Weight: why.Weight, Text: why.Text})
		}
	}
	checks, err := g.cfg.Store.NodeChecks(ctx, n.ID, checksShown)
	if err != nil {
		return nil, err
	}
	for _, c := range checks {
		r.Checks = append(r.Checks, NodeCheckInfo{At: rfc3339(c.At), Kind: c.Kind, Model: c.Model, Passed: c.Passed, Detail: c.Detail})
	}
	return r, nil
}

// NodeDayReport is a node's record over one UTC day (or, as totals, the whole period).
type NodeDayReport struct {
	Date             string  `json:"date,omitempty"`
	Jobs             int     `json:"jobs"`
	Failed           int     `json:"failed"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	EarnedPending    usd     `json:"earned_pending"`
	EarnedAvailable  usd     `json:"earned_available"`
	OnlineSeconds    int64   `json:"online_seconds"`
	BusySeconds      int64   `json:"busy_seconds"`
	FillRate         float64 `json:"fill_rate"`      // busy / online; 0 when never online
	WindowSeconds    int64   `json:"window_seconds"` // time inside the declared windows
	// UptimeInWindows is the share of the declared windows' time the node was online.
	UptimeInWindows float64 `json:"uptime_in_windows"`
}

// NodeSessionInfo is one connection of the node.
type NodeSessionInfo struct {
	ConnectedAt string `json:"connected_at"`
	EndedAt     string `json:"ended_at,omitempty"` // empty while online
	BusySeconds int64  `json:"busy_seconds"`
}

// TelemetryPoint is a minute of telemetry.
type TelemetryPoint struct {
	At string `json:"at"`
	*protocol.Telemetry
}

// NodeEventInfo is something that happened to the node.
type NodeEventInfo struct {
	At     string `json:"at"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

const (
	defaultReportDays = 7
	maxEventsShown    = 50
	historyShown      = 24 * time.Hour
)

func (g *Gateway) providerNodes(w http.ResponseWriter, r *http.Request, c *call) error {
	nodes, err := g.cfg.Store.NodesOf(r.Context(), c.key.AccountID)
	if err != nil {
		return err
	}
	out := make([]NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = g.nodeInfo(r.Context(), n)
	}
	return writeJSON(w, data[[]NodeInfo]{out})
}

func (g *Gateway) providerNode(w http.ResponseWriter, r *http.Request, c *call) error {
	days, err := daysParam(r, defaultReportDays)
	if err != nil {
		return err
	}
	ctx, id := r.Context(), r.PathValue("id")
	n, err := g.cfg.Store.Node(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && n.AccountID != c.key.AccountID) {
		return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Code: api.CodeNotFound,
			Message: "No node of yours has the id '" + id + "'. GET /v1/provider/nodes lists them."}
	}
	if err != nil {
		return err
	}
	now := g.cfg.Now()
	since := store.WindowStart(store.Daily, now).AddDate(0, 0, -(days - 1))
	sessions, err := g.cfg.Store.NodeSessions(ctx, id, since)
	if err != nil {
		return err
	}
	counts, err := g.cfg.Store.NodeDays(ctx, id, since)
	if err != nil {
		return err
	}
	earnings, err := g.cfg.Store.Earnings(ctx, c.key.AccountID, since)
	if err != nil {
		return err
	}
	samples, err := g.cfg.Store.Telemetry(ctx, id, now.Add(-historyShown))
	if err != nil {
		return err
	}
	events, err := g.cfg.Store.NodeEvents(ctx, id, maxEventsShown)
	if err != nil {
		return err
	}
	sched, err := report.Schedule(n)
	if err != nil {
		g.log.Warn("node's windows", logNode, id, "err", err)
	}
	rep := NodeReport{NodeInfo: g.nodeInfo(ctx, n), Since: since.Format(time.DateOnly),
		Sessions: []NodeSessionInfo{}, History: []TelemetryPoint{}, Events: []NodeEventInfo{}}
	rep.Days, rep.Totals = nodeDays(id, since, now, sessions, counts, earnings, sched)
	if rep.Reputation, err = g.reputationOf(ctx, n); err != nil {
		return err
	}
	for _, s := range sessions {
		si := NodeSessionInfo{ConnectedAt: rfc3339(s.ConnectedAt), BusySeconds: int64(s.Busy / time.Second)}
		if s.Ended {
			si.EndedAt = rfc3339(s.LastSeen)
		}
		rep.Sessions = append(rep.Sessions, si)
	}
	for _, s := range samples {
		var t protocol.Telemetry
		if json.Unmarshal(s.Data, &t) == nil {
			rep.History = append(rep.History, TelemetryPoint{At: rfc3339(s.At), Telemetry: &t})
		}
	}
	for _, e := range events {
		rep.Events = append(rep.Events, NodeEventInfo{At: rfc3339(e.At), Kind: e.Kind, Detail: e.Detail})
	}
	return writeJSON(w, data[NodeReport]{rep})
}

// nodeInfo is a node as its record says, with its live state when it is connected.
func (g *Gateway) nodeInfo(ctx context.Context, n *store.Node) NodeInfo {
	info := NodeInfo{ID: n.ID, Name: n.Name, Region: n.Region, Engine: n.Engine, Agent: n.Agent,
		FirstSeen: rfc3339(n.FirstSeen), LastSeen: rfc3339(n.LastSeen), Hardware: n.Hardware,
		Fingerprint: n.Fingerprint, Windows: n.Windows, Timezone: n.Timezone, Offers: []OfferInfo{}}
	if len(info.Hardware) == 0 {
		info.Hardware = json.RawMessage("{}")
	}
	if !n.HardwareChangedAt.IsZero() {
		at := rfc3339(n.HardwareChangedAt)
		info.HardwareChangedAt = &at
	}
	var offers []protocol.Offer
	json.Unmarshal(n.Offers, &offers)
	if live := g.cfg.Fleet.Node(n.ID); live != nil {
		info.Online, info.LastSeen = true, rfc3339(g.cfg.Now())
		if p := live.Paused(); p != "" {
			info.Paused = &p
		}
		offers = offers[:0]
		for _, o := range live.Offers {
			offers = append(offers, o.Offer)
			info.Running += o.Running()
		}
		if t, at := live.Telemetry(); t != nil {
			s := rfc3339(at)
			info.Telemetry, info.TelemetryAt = t, &s
		}
	}
	levels := map[string]string{} // the models' own levels: live, or as last stored
	if live := g.cfg.Fleet.Node(n.ID); live != nil {
		for _, o := range live.Offers {
			levels[o.Model] = o.OwnLevel()
		}
	} else if ls, err := g.cfg.Store.OfferLevels(ctx, n.ID); err == nil {
		for _, l := range ls {
			levels[l.Model] = l.Level
		}
	} else {
		g.log.Warn("models' levels", logNode, n.ID, "err", err)
	}
	for _, o := range offers {
		info.Offers = append(info.Offers, OfferInfo{Model: o.Model, Quantization: o.Quantization, ContextLength: o.ContextLength,
			MaxConcurrent: o.MaxConcurrent, Continues: o.Continues,
			InputPrice: usd(o.InputPrice), OutputPrice: usd(o.OutputPrice), Level: cmp.Or(levels[o.Model], store.LevelNew)})
	}
	return info
}

// nodeDays is a node's record per UTC day from since to now (report.NodeDays), and over the
// whole period, as the API shows them.
func nodeDays(nodeID string, since, now time.Time, sessions []*store.NodeSession, counts []store.NodeDay,
	earnings []store.Earning, sched *schedule.Schedule) ([]NodeDayReport, NodeDayReport) {
	days, total := report.NodeDays(nodeID, since, now, sessions, counts, earnings, sched)
	out := make([]NodeDayReport, len(days))
	for i, d := range days {
		out[i] = dayReport(d)
		out[i].Date = d.Day.Format(time.DateOnly)
	}
	return out, dayReport(total)
}

// dayReport is a day of report.NodeDays as the API shows it: seconds, and rates to 4 places.
func dayReport(d report.Day) NodeDayReport {
	r := NodeDayReport{Jobs: d.Jobs, Failed: d.Failed, PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens,
		EarnedPending: usd(d.Pending), EarnedAvailable: usd(d.Available),
		OnlineSeconds: int64(d.Online / time.Second), BusySeconds: int64(d.Busy / time.Second), WindowSeconds: int64(d.Window / time.Second),
		FillRate: round4(d.FillRate())}
	if up, ok := d.UptimeInWindows(); ok {
		r.UptimeInWindows = round4(up)
	}
	return r
}

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
