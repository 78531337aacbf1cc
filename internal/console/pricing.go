package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// A node's ask schedule, set on its page (docs/architecture.md, "Dynamic pricing"):
//
//	POST /provider/nodes/{id}/asks   set the node's ask schedule (timezone, windows), or clear it
//
// It is stored (store.SetNodeAskSchedule) and replaces the provider file's schedules of the
// node's offers, at once when this replica holds the node, and whenever it connects.

// askForm is the schedule form of a node's page: its time zone and one window per line,
// "name | when | input | output", USD per 1M tokens; Error says what is wrong with what was
// sent, which the form then shows again.
type askForm struct {
	Set      bool // a schedule is set for the node here (not the file's)
	Timezone string
	Windows  string
	Error    string
}

// askNow is what an offer asks now: the price in effect (surge included, per 1M tokens), the
// window it comes from ("" flat), the surge multiplier (1: none) and until when (zero: no change
// ahead).
type askNow struct {
	Input, Output money.Price
	Window        string
	Surge         float64
	Until         time.Time
}

func askNowOf(p fleet.Price) *askNow {
	return &askNow{Input: p.Input, Output: p.Output, Window: p.Window, Surge: float64(p.Surge) / 10000, Until: p.Until}
}

// askFormOf is the form showing a stored schedule, or else the one the node's offers price by.
func askFormOf(stored string, live *fleet.Node) askForm {
	var s *protocol.AskSchedule
	if stored != "" {
		s, _ = fleet.DecodeAskSchedule(stored)
	} else if live != nil && len(live.Offers) > 0 {
		s = live.Offers[0].AskSchedule()
	}
	f := askForm{Set: stored != ""}
	if s == nil {
		return f
	}
	f.Timezone = s.Timezone
	var b strings.Builder
	for _, w := range s.Windows {
		fmt.Fprintf(&b, "%s | %s | %s | %s\n", w.Name, w.When, money.Price(w.InputPrice), money.Price(w.OutputPrice))
	}
	f.Windows = b.String()
	return f
}

// parseAskForm reads the form into a schedule, checked as a node's is; nil for no windows.
func parseAskForm(timezone, windows string) (*protocol.AskSchedule, error) {
	s := &protocol.AskSchedule{Timezone: strings.TrimSpace(timezone)}
	for i, line := range strings.Split(windows, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		parts := strings.Split(line, "|")
		if len(parts) != 4 {
			return nil, fmt.Errorf("line %d: want name | when | input | output, such as peak | mon-fri 09:00-18:00 | 0.08 | 0.16", i+1)
		}
		for j := range parts {
			parts[j] = strings.TrimSpace(parts[j])
		}
		in, err := money.ParsePrice(parts[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: input: %w", i+1, err)
		}
		out, err := money.ParsePrice(parts[3])
		if err != nil {
			return nil, fmt.Errorf("line %d: output: %w", i+1, err)
		}
		s.Windows = append(s.Windows, protocol.AskWindow{Name: parts[0], When: parts[1], InputPrice: int64(in), OutputPrice: int64(out)})
	}
	if len(s.Windows) == 0 {
		return nil, nil
	}
	if _, err := pricing.Compile(s); err != nil {
		return nil, err
	}
	return s, nil
}

// providerSetAsks sets (or, with "clear", clears) a node's ask schedule, and prices the node
// by it at once when this replica holds it. A schedule that cannot be read shows the node's
// page again with the form as sent and what is wrong (400).
func (c *Console) providerSetAsks(w http.ResponseWriter, r *http.Request) error {
	ctx, id := r.Context(), r.PathValue("id")
	n, err := c.cfg.Store.Node(ctx, id)
	if err == nil && n.AccountID != pageAccount(r) {
		err = store.ErrNotFound // another provider's node does not exist for this one
	}
	if err != nil {
		return err
	}
	var s *protocol.AskSchedule
	if r.FormValue("clear") == "" {
		timezone, windows := r.FormValue("timezone"), r.FormValue("windows")
		if s, err = parseAskForm(timezone, windows); err != nil {
			return c.renderNode(w, r, n, http.StatusBadRequest, &askForm{Timezone: timezone, Windows: windows, Error: err.Error()})
		}
	}
	raw := ""
	if s != nil {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		raw = string(b)
	}
	if err := c.cfg.Store.SetNodeAskSchedule(ctx, id, raw, c.cfg.Now()); err != nil {
		return err
	}
	if _, err := c.cfg.Fleet.SetAskSchedule(id, s); err != nil {
		return fmt.Errorf("price node %s by its ask schedule: %w", id, err) // checked above: not the provider's error
	}
	c.log.InfoContext(ctx, "console: node's ask schedule set", "node", id, "windows", len(scheduleWindows(s)))
	c.redirect(w, r, "/provider/nodes/"+id, "provider.flash.asks_set")
	return nil
}

func scheduleWindows(s *protocol.AskSchedule) []protocol.AskWindow {
	if s == nil {
		return nil
	}
	return s.Windows
}

// askRow is one line of the earnings by ask.
type askRow struct {
	Window string
	Surge  float64
	Parts  int
	Earned money.Nanos
}

func askRowsOf(es []store.AskEarning) []askRow {
	rows := make([]askRow, 0, len(es))
	for _, e := range es {
		rows = append(rows, askRow{Window: e.Window, Surge: float64(e.Surge) / 10000, Parts: e.Parts, Earned: e.Earned})
	}
	return rows
}
