package console

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
)

// The operator's pages (role admin):
//
//	GET  /admin                        the fleet: nodes by state, level and region; every node
//	GET  /admin/accounts               every account with its money
//	POST /admin/accounts/{id}/credit   credit a buyer's balance (money received outside ShareAI)
//	POST /admin/nodes/{id}/level       set a node's level: new, verified, trusted, quarantined
//	POST /admin/nodes/{id}/suspend     suspend a cheat and claw back its pending earnings
//	GET  /admin/audit                  the audit log
//
// Setting a level and suspending run the operations 'shareai admin node level' and 'admin node
// suspend' run (internal/ops), with the live fleet, so that a connected node has its new level
// at once; crediting does what 'shareai admin credit' does. Each decision is recorded in the
// audit log as "admin:<email>".
func (c *Console) registerAdmin(mux *http.ServeMux) {
	mux.Handle("GET /admin", c.as(store.RoleAdmin, c.adminFleet))
	mux.Handle("GET /admin/accounts", c.as(store.RoleAdmin, c.adminAccounts))
	mux.Handle("POST /admin/accounts/{id}/credit", c.as(store.RoleAdmin, c.adminCredit))
	mux.Handle("POST /admin/nodes/{id}/level", c.as(store.RoleAdmin, c.adminNodeLevel))
	mux.Handle("POST /admin/nodes/{id}/suspend", c.as(store.RoleAdmin, c.adminNodeSuspend))
	mux.Handle("GET /admin/audit", c.as(store.RoleAdmin, c.adminAudit))
}

// allLevels are the levels in the order the fleet page counts them.
var allLevels = []string{store.LevelNew, store.LevelVerified, store.LevelTrusted, store.LevelQuarantined, store.LevelSuspended}

const (
	auditShown     = 200 // entries on the audit page
	adminReasonMax = 500 // characters of a reason or reference
)

// adminFleetPage is the data of /admin.
type adminFleetPage struct {
	Registered int          // nodes ever registered
	Online     int          // connected now
	Serving    int          // connected, taking jobs, verified or trusted: buyers' requests go to them
	Paused     int          // connected, taking no new jobs (their provider's pause, windows, guard)
	HeldBack   int          // connected and taking jobs, but new, quarantined or suspended: no live traffic
	ByLevel    []adminCount // connected nodes per level, in the order of allLevels
	ByRegion   []adminCount // connected nodes per region, most first
	Charts     []Chart
	Nodes      []adminNode
	Levels     []string // the levels an admin may set
}

// adminCount is how many nodes have a level or are in a region.
type adminCount struct {
	Key   string
	Count int
}

// adminNode is a row of the fleet's list.
type adminNode struct {
	provNode
	Account string // the provider account's name
}

func (c *Console) adminFleet(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	accounts, err := c.cfg.Store.Accounts(ctx)
	if err != nil {
		return err
	}
	data := adminFleetPage{Levels: ops.SettableLevels}
	for _, a := range accounts {
		nodes, err := c.cfg.Store.NodesOf(ctx, a.ID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			data.Nodes = append(data.Nodes, adminNode{provNode: c.liveNode(n), Account: a.Name})
		}
	}
	slices.SortFunc(data.Nodes, func(a, b adminNode) int {
		return cmp.Or(-compareBool(a.Online, b.Online), cmp.Compare(a.Account, b.Account), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	data.Registered = len(data.Nodes)
	levels, regions := map[string]int{}, map[string]int{}
	for _, n := range c.cfg.Fleet.Nodes() {
		if n.Selftest {
			continue // connected only to be checked: not part of the fleet
		}
		data.Online++
		switch l := n.Level(); {
		case n.Paused() != "":
			data.Paused++
		case l == store.LevelVerified || l == store.LevelTrusted:
			data.Serving++
		default:
			data.HeldBack++
		}
		levels[n.Level()]++
		regions[n.Region]++
	}
	for _, l := range allLevels {
		data.ByLevel = append(data.ByLevel, adminCount{l, levels[l]})
	}
	for reg, n := range regions {
		data.ByRegion = append(data.ByRegion, adminCount{reg, n})
	}
	slices.SortFunc(data.ByRegion, func(a, b adminCount) int { return cmp.Or(b.Count-a.Count, cmp.Compare(a.Key, b.Key)) })
	data.Charts = c.fleetCharts(r, data)
	c.render(w, r, http.StatusOK, "admin", data)
	return nil
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// fleetCharts draws the connected nodes by state, level and region.
func (c *Console) fleetCharts(r *http.Request, d adminFleetPage) []Chart {
	lang := c.lang(r)
	nodes := c.i18n.T(lang, "admin.fleet.nodes")
	state := Chart{Title: c.i18n.T(lang, "admin.fleet.chart_state"),
		Labels: []string{c.i18n.T(lang, "admin.fleet.serving"), c.i18n.T(lang, "admin.fleet.paused"),
			c.i18n.T(lang, "admin.fleet.held_back"), c.i18n.T(lang, "admin.fleet.offline")},
		Series: []Series{{Name: nodes, Values: []float64{float64(d.Serving), float64(d.Paused), float64(d.HeldBack),
			float64(d.Registered - d.Online)}}}}
	level := Chart{Title: c.i18n.T(lang, "admin.fleet.chart_level"), Series: []Series{{Name: nodes}}}
	for _, l := range d.ByLevel {
		level.Labels = append(level.Labels, c.i18n.T(lang, "provider.level."+l.Key))
		level.Series[0].Values = append(level.Series[0].Values, float64(l.Count))
	}
	region := Chart{Title: c.i18n.T(lang, "admin.fleet.chart_region"), Series: []Series{{Name: nodes}}}
	for _, reg := range d.ByRegion {
		label := reg.Key
		if label == "" {
			label = c.i18n.T(lang, "admin.fleet.no_region")
		}
		region.Labels = append(region.Labels, label)
		region.Series[0].Values = append(region.Series[0].Values, float64(reg.Count))
	}
	return []Chart{state, level, region}
}

// adminAccountRow is an account with its money.
type adminAccountRow struct {
	*store.Account
	*store.Balance
	Once string // names this rendering's credit form: submitted twice, it credits once
}

func (c *Console) adminAccounts(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	accounts, err := c.cfg.Store.Accounts(ctx)
	if err != nil {
		return err
	}
	rows := make([]adminAccountRow, 0, len(accounts))
	for _, a := range accounts {
		b, err := c.cfg.Store.Balance(ctx, a.ID)
		if err != nil {
			return err
		}
		var once [12]byte
		rand.Read(once[:])
		rows = append(rows, adminAccountRow{a, b, hex.EncodeToString(once[:])})
	}
	c.render(w, r, http.StatusOK, "admin_accounts", rows)
	return nil
}

// adminActor names the logged-in admin in the audit log.
func adminActor(r *http.Request) string { return "admin:" + sessionOf(r).user.Email }

// adminFormText is a form field, trimmed; ok is false when it is empty or too long.
func adminFormText(r *http.Request, name string) (string, bool) {
	s := strings.TrimSpace(r.FormValue(name))
	return s, s != "" && len([]rune(s)) <= adminReasonMax
}

func (c *Console) adminCredit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	a, err := c.cfg.Store.Account(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	amount, err := money.ParseUSD(strings.TrimSpace(r.FormValue("amount")))
	if err != nil || amount <= 0 {
		c.redirect(w, r, "/admin/accounts", "admin.flash.bad_amount")
		return nil
	}
	reference := strings.TrimSpace(r.FormValue("reference"))
	if len([]rune(reference)) > adminReasonMax {
		c.redirect(w, r, "/admin/accounts", "admin.flash.bad_reference")
		return nil
	}
	now := c.cfg.Now()
	once := r.FormValue("once")
	if len(once) != 24 {
		c.redirect(w, r, "/admin/accounts", "admin.flash.bad_amount")
		return nil
	}
	ref := fmt.Sprintf("console:%s:%s", a.ID, once)
	err = c.cfg.Store.Deposit(ctx, a.ID, amount, ref, now)
	if errors.Is(err, store.ErrConflict) { // the same form submitted twice
		c.redirect(w, r, "/admin/accounts", "admin.flash.credit_twice")
		return nil
	}
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("$%s to %s (ref %s)", amount, a.Name, ref)
	if reference != "" {
		detail += ": " + reference
	}
	if err := c.cfg.Store.AddAudit(ctx, &store.AuditEntry{At: now, Actor: adminActor(r), Action: "credit", Target: a.ID, Detail: detail}); err != nil {
		return fmt.Errorf("credited %s, but recording it in the audit log: %w", ref, err)
	}
	c.log.InfoContext(r.Context(), "console: account credited", "account", a.ID, "amount", amount.String(), "ref", ref)
	c.redirect(w, r, "/admin/accounts", "admin.flash.credited")
	return nil
}

func (c *Console) adminNodeLevel(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.cfg.Store.Node(r.Context(), r.PathValue("id")); err != nil {
		return err // an unknown node is a 404 before a wrong form
	}
	level := r.FormValue("level")
	reason, ok := adminFormText(r, "reason")
	switch {
	case !slices.Contains(ops.SettableLevels, level):
		c.redirect(w, r, "/admin", "admin.flash.bad_level")
		return nil
	case !ok:
		c.redirect(w, r, "/admin", "admin.flash.need_reason")
		return nil
	}
	res, err := ops.SetNodeLevel(r.Context(), c.cfg.Store, c.liveLevels(), level, c.decision(r, reason))
	if err != nil {
		return err
	}
	c.log.InfoContext(r.Context(), "console: node level set", "node", res.Node.ID, "from", res.From, "to", res.To,
		"live", res.Live, "actor", adminActor(r))
	c.redirect(w, r, "/admin", "admin.flash.level_set")
	return nil
}

// adminNodeSuspend suspends a node that cheated: it gets no more work, and its earnings still
// pending release go back to the buyers who paid them, with the platform's fee on them.
func (c *Console) adminNodeSuspend(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.cfg.Store.Node(r.Context(), r.PathValue("id")); err != nil {
		return err // an unknown node is a 404 before a wrong form
	}
	reason, ok := adminFormText(r, "reason")
	if !ok {
		c.redirect(w, r, "/admin", "admin.flash.need_reason")
		return nil
	}
	res, err := ops.SuspendNode(r.Context(), c.cfg.Store, c.liveLevels(), c.decision(r, reason))
	if err != nil {
		return err
	}
	c.log.InfoContext(r.Context(), "console: node suspended", "node", res.Node.ID, "from", res.From, "live", res.Live,
		"clawed_back", res.ClawedBack.String(), "ref", res.Ref, "actor", adminActor(r))
	c.redirect(w, r, "/admin", "admin.flash.suspended")
	return nil
}

// decision is the logged-in admin's decision about the node of the request's path.
func (c *Console) decision(r *http.Request, reason string) ops.Decision {
	return ops.Decision{NodeID: r.PathValue("id"), Reason: reason, Actor: adminActor(r), At: c.cfg.Now()}
}

// liveLevels is the coordinator's fleet, to which the operations give a node's new level at
// once (without it, the prober would take it from the store at its next scoring); nil when the
// console runs without one.
func (c *Console) liveLevels() ops.Fleet {
	if c.cfg.Fleet == nil {
		return nil
	}
	return fleetLevels{c.cfg.Fleet}
}

// fleetLevels is ops.Fleet on the live fleet.
type fleetLevels struct{ f *fleet.Fleet }

func (l fleetLevels) ApplyLevel(nodeID, level string) bool {
	n := l.f.Node(nodeID)
	if n != nil {
		l.f.SetLevel(n, level)
	}
	return n != nil
}

// adminAuditPage is the data of /admin/audit.
type adminAuditPage struct {
	Target  string // only the entries about this target; "" all
	Entries []adminAuditRow
}

// adminAuditRow is an entry, with the catalogue key of its action when it is one we know.
type adminAuditRow struct {
	store.AuditEntry
	ActionKey string
}

// auditActions are the actions the audit page names in the user's language.
var auditActions = map[string]string{
	"credit": "admin.action.credit", "node.level": "admin.action.node_level",
	"node.suspend": "admin.action.node_suspend", "clawback": "admin.action.clawback",
}

func (c *Console) adminAudit(w http.ResponseWriter, r *http.Request) error {
	target := strings.TrimSpace(r.URL.Query().Get("target"))
	es, err := c.cfg.Store.AuditLog(r.Context(), target, auditShown)
	if err != nil {
		return err
	}
	data := adminAuditPage{Target: target}
	for _, e := range es {
		data.Entries = append(data.Entries, adminAuditRow{e, auditActions[e.Action]})
	}
	c.render(w, r, http.StatusOK, "admin_audit", data)
	return nil
}
