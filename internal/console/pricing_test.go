package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// runAgent runs an agent of the token keeping its key in dir, until the returned stop.
func runAgent(t *testing.T, env *testenv.Env, token, dir string) (*agent.Agent, func()) {
	t.Helper()
	a, err := agent.New(agent.Config{Coordinator: env.URL, Token: token, DataDir: dir, Name: "grace-rig",
		Engine: sim.New(sim.Config{}), InputPrice: 50_000_000, OutputPrice: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	select {
	case <-a.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not register")
	}
	return a, sync1(stop)
}

// sync1 makes stop safe to call twice (by the test, then by its cleanup).
func sync1(stop func()) func() {
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			stop()
		}
	}
}

// A provider sets a node's ask schedule on its page: a bad one is refused with what is wrong
// and the form kept; a good one prices the node at once (the page, the coordinator's offers
// and what a request pays), stays when the node reconnects, shows in the earnings by ask, and
// clearing it brings the flat ask back. Another provider cannot set it.
func TestProvider_AskSchedule(t *testing.T) {
	clk := &testenv.Clock{}
	noon := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	env := testenv.New(t, testenv.Providers(1), testenv.WithClock(clk, noon))
	grace := newWebUser(t, env, "grace@example.com", "grace-gpus", store.RoleProvider)
	_, body, _ := grace.post("/provider/tokens", url.Values{"name": {"rig"}})
	token := newTokenRe.FindStringSubmatch(body)[1]
	dir := t.TempDir()
	a, stop := runAgent(t, env, token, dir)
	id := a.NodeID()
	f := env.Coordinator().Fleet
	price := func() fleet.Price { return f.Node(id).Offers[0].Price() }

	page := grace.mustGet("/provider/nodes/" + id)
	if s := elementText(t, page, "asks"); !strings.Contains(s, "No schedule is saved here") {
		t.Errorf("#asks %q: want no schedule saved", s)
	}
	if s := elementText(t, page, "offers"); !strings.Contains(s, "flat ask") {
		t.Errorf("#offers %q: want the flat ask in effect", s)
	}

	status, body, _ := grace.post("/provider/nodes/"+id+"/asks", url.Values{"timezone": {"UTC"}, "windows": {"lunch | daily 11:00-13:00 | 0.30 | 0.60\npeak | mon-fry 09:00-18:00 | 0.5 | 1"}})
	if status != http.StatusBadRequest || !strings.Contains(elementText(t, body, "asks-error"), `unknown day "fry"`) || !strings.Contains(body, "mon-fry") {
		t.Errorf("a bad schedule: status %d; want 400 saying what is wrong, the form kept", status)
	}
	if p := price(); p.Window != "" {
		t.Errorf("after a refused schedule the node asks %+v; want the flat ask still", p)
	}

	status, _, loc := grace.post("/provider/nodes/"+id+"/asks", url.Values{"timezone": {"UTC"}, "windows": {"lunch | daily 11:00-13:00 | 0.30 | 0.60"}})
	if status != http.StatusSeeOther || loc != "/provider/nodes/"+id {
		t.Fatalf("set the schedule: %d to %q; want 303 to the node's page", status, loc)
	}
	if p := price(); p.Window != "lunch" || p.Input != 300_000_000 || !p.Until.Equal(noon.Add(time.Hour)) {
		t.Errorf("the coordinator prices the node at %+v; want lunch's ask until 13:00", p)
	}
	page = grace.mustGet("/provider/nodes/" + id)
	if s := elementText(t, page, "asks"); !strings.Contains(s, "saved here") || !strings.Contains(page, "lunch | daily 11:00-13:00 | 0.3 | 0.6") {
		t.Errorf("#asks %q: want the schedule saved here, in the form", s)
	}
	if s := elementText(t, page, "offers"); !strings.Contains(s, "window lunch") || !strings.Contains(s, "$0.30") {
		t.Errorf("#offers %q: want lunch's ask in effect", s)
	}

	// The node reconnects: it prices by the console's schedule, not by its own (none).
	stop()
	testenv.WaitFor(t, "the node gone", func() bool { return f.Node(id) == nil })
	runAgent(t, env, token, dir)
	if p := price(); p.Window != "lunch" {
		t.Errorf("reconnected, the node asks %+v; want the console's schedule kept", p)
	}
	askNode(t, env, id)
	testenv.WaitFor(t, "the request's earnings", func() bool {
		es, err := env.Store.EarningsByAsk(context.Background(), grace.user.AccountID, noon.AddDate(0, 0, -30))
		return err == nil && len(es) == 1 && es[0].Window == "lunch"
	})
	body = grace.mustGet("/provider/earnings")
	if s := elementText(t, body, "earnings-by-ask"); !strings.Contains(s, "lunch") || !strings.Contains(s, "×1") {
		t.Errorf("#earnings-by-ask %q: want the lunch ask's earnings", s)
	}

	other := newWebUser(t, env, "ada@example.com", "ada-gpus", store.RoleProvider)
	if status, _, _ := other.post("/provider/nodes/"+id+"/asks", url.Values{"clear": {"1"}}); status != http.StatusNotFound {
		t.Errorf("another provider clears the schedule: %d; want 404", status)
	}
	if status, _, _ := grace.post("/provider/nodes/"+id+"/asks", url.Values{"clear": {"1"}}); status != http.StatusSeeOther {
		t.Errorf("clear: %d; want 303", status)
	}
	if p := price(); p.Window != "" || p.Input != 50_000_000 {
		t.Errorf("cleared, the node asks %+v; want its flat ask", p)
	}
	if s, err := env.Store.NodeAskSchedule(context.Background(), id); s != "" || err != nil {
		t.Errorf("stored schedule %q, %v after clearing; want none", s, err)
	}
}
