package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// ledgerBalanced fails the test unless the ledger's accounts sum to zero.
func ledgerBalanced(t *testing.T, env *testenv.Env) {
	t.Helper()
	if sum, err := env.Store.LedgerSum(context.Background()); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
}

// auditHas returns the newest audit entry about target with the action, or nil.
func auditHas(t *testing.T, env *testenv.Env, target, action string) *store.AuditEntry {
	t.Helper()
	es, err := env.Store.AuditLog(context.Background(), target, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Action == action {
			return &e
		}
	}
	return nil
}

// An admin credits an account: its balance grows by the amount, the ledger still sums to
// zero, and the audit log says who did it; amounts that are not positive dollars are refused.
func TestAdmin_Credit(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	ops := newWebUser(t, env, "ops@example.com", "ops", store.RoleAdmin)
	buyer, err := env.Store.Account(ctx, "local-buyer")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := env.Store.Balance(ctx, buyer.ID)

	body := ops.mustGet("/admin/accounts")
	for _, want := range []string{`<tr data-account="local-buyer"`, `id="credit-amount-local-buyer"`, `id="credit-local-buyer"`,
		`<tr data-account="ops"`, `for="credit-amount-local-buyer"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/admin/accounts lacks %s", want)
		}
	}
	if got := elementText(t, body, "accounts"); !strings.Contains(got, console.USD(before.Credits)) {
		t.Errorf("#accounts lacks the buyer's balance %s: %s", console.USD(before.Credits), got)
	}

	if !strings.Contains(body, `name="once"`) {
		t.Error("the credit form carries no once token")
	}
	form := url.Values{"amount": {"12.5"}, "reference": {"wire 42"}, "once": {"0123456789abcdef01234567"}}
	status, _, loc := ops.post("/admin/accounts/"+buyer.ID+"/credit", form)
	if status != http.StatusSeeOther || loc != "/admin/accounts" {
		t.Fatalf("credit: %d to %q, want 303 to /admin/accounts", status, loc)
	}
	ops.post("/admin/accounts/"+buyer.ID+"/credit", form) // a double click: credited once
	after, _ := env.Store.Balance(ctx, buyer.ID)
	if got, want := after.Credits-before.Credits, 12*money.USD+money.USD/2; got != want {
		t.Errorf("credited %s, want %s", got, want)
	}
	ledgerBalanced(t, env)
	e := auditHas(t, env, buyer.ID, "credit")
	if e == nil || e.Actor != "admin:ops@example.com" || !strings.Contains(e.Detail, "12.5") || !strings.Contains(e.Detail, "wire 42") {
		t.Fatalf("audit entry %+v: want a credit of 12.5 by admin:ops@example.com with its reference", e)
	}
	if body := ops.mustGet("/admin/audit"); !strings.Contains(body, "admin:ops@example.com") || !strings.Contains(body, "wire 42") {
		t.Errorf("/admin/audit does not show the credit")
	}
	if body := ops.mustGet("/admin/accounts"); !strings.Contains(elementText(t, body, "accounts"), console.USD(after.Credits)) {
		t.Errorf("/admin/accounts does not show the new balance %s", console.USD(after.Credits))
	}

	for _, amount := range []string{"", "0", "-3", "abc", "1e3", "0.0000000001"} {
		if status, _, loc := ops.post("/admin/accounts/"+buyer.ID+"/credit", url.Values{"amount": {amount}}); status != http.StatusSeeOther || loc != "/admin/accounts" {
			t.Errorf("credit %q: %d to %q, want 303 back", amount, status, loc)
		}
	}
	if again, _ := env.Store.Balance(ctx, buyer.ID); again.Credits != after.Credits {
		t.Errorf("a refused credit moved money: %s, want %s", again.Credits, after.Credits)
	}
	if status, _, _ := ops.post("/admin/accounts/acct_none/credit", url.Values{"amount": {"1"}}); status != http.StatusNotFound {
		t.Errorf("crediting no account: status %d, want 404", status)
	}
}

// An admin suspends a node: it is suspended at once, its pending earnings go back to the
// buyer, the ledger sums to zero, and both steps are in the audit log. A level change needs a
// reason and a level an admin may set.
func TestAdmin_NodeLevelAndSuspend(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2))
	ctx := context.Background()
	ops := newWebUser(t, env, "ops@example.com", "ops", store.RoleAdmin)
	provider, err := env.Store.Account(ctx, "local-provider")
	if err != nil {
		t.Fatal(err)
	}
	buyer, _ := env.Store.Account(ctx, "local-buyer")
	cheat, other := env.Agents[0].NodeID(), env.Agents[1].NodeID()
	askNode(t, env, cheat)
	var earned money.Nanos
	testenv.WaitFor(t, "the job's earnings", func() bool {
		b, err := env.Store.Balance(ctx, provider.ID)
		earned = b.Pending
		return err == nil && b.Pending > 0
	})
	paid, _ := env.Store.Balance(ctx, buyer.ID)

	body := ops.mustGet("/admin")
	fleet := elementText(t, body, "fleet")
	if !strings.Contains(body, `<tr data-node-id="`+cheat+`"`) || !strings.Contains(body, "local-provider") {
		t.Errorf("/admin does not list the node %s with its account", cheat)
	}
	if !strings.Contains(body, `<tr data-level="verified"><th scope="row">Verified</th><td>2</td>`) {
		t.Errorf("#fleet does not count 2 verified nodes: %s", fleet)
	}

	// Refused: no reason, a level that is not an admin's to set here.
	ops.post("/admin/nodes/"+other+"/level", url.Values{"level": {store.LevelQuarantined}, "reason": {" "}})
	ops.post("/admin/nodes/"+other+"/level", url.Values{"level": {store.LevelSuspended}, "reason": {"x"}})
	ops.post("/admin/nodes/"+cheat+"/suspend", url.Values{"reason": {""}})
	for _, id := range []string{cheat, other} {
		if n, _ := env.Store.Node(ctx, id); n.Level != store.LevelVerified {
			t.Errorf("node %s is %s after refused changes, want verified", id, n.Level)
		}
	}
	if status, _, _ := ops.post("/admin/nodes/node_none/suspend", url.Values{"reason": {"x"}}); status != http.StatusNotFound {
		t.Errorf("suspending no node: status %d, want 404", status)
	}

	status, _, loc := ops.post("/admin/nodes/"+other+"/level", url.Values{"level": {store.LevelQuarantined}, "reason": {"odd answers"}})
	if status != http.StatusSeeOther || loc != "/admin" {
		t.Errorf("quarantine: %d to %q, want 303 to /admin", status, loc)
	}
	if n, _ := env.Store.Node(ctx, other); n.Level != store.LevelQuarantined || n.LevelReason != "odd answers" {
		t.Errorf("node %s: %s (%s), want quarantined (odd answers)", other, n.Level, n.LevelReason)
	}
	if l := env.Coordinator().Fleet.Node(other).Level(); l != store.LevelQuarantined {
		t.Errorf("the connected node's level is %s, want quarantined at once", l)
	}
	if e := auditHas(t, env, other, "node.level"); e == nil || e.Actor != "admin:ops@example.com" || !strings.Contains(e.Detail, "verified → quarantined: odd answers") {
		t.Errorf("audit entry %+v: want the quarantine by admin:ops@example.com", e)
	}

	status, _, loc = ops.post("/admin/nodes/"+cheat+"/suspend", url.Values{"reason": {"forged receipts"}})
	if status != http.StatusSeeOther || loc != "/admin" {
		t.Fatalf("suspend: %d to %q, want 303 to /admin", status, loc)
	}
	if n, _ := env.Store.Node(ctx, cheat); n.Level != store.LevelSuspended {
		t.Errorf("node %s is %s, want suspended", cheat, n.Level)
	}
	if l := env.Coordinator().Fleet.Node(cheat).Level(); l != store.LevelSuspended {
		t.Errorf("the connected node's level is %s, want suspended at once", l)
	}
	if b, _ := env.Store.Balance(ctx, provider.ID); b.Pending != 0 {
		t.Errorf("the provider still has %s pending after the suspension, want 0 (%s clawed back)", b.Pending, earned)
	}
	if b, _ := env.Store.Balance(ctx, buyer.ID); b.Credits <= paid.Credits {
		t.Errorf("the buyer's balance %s did not grow from %s: nothing was returned", b.Credits, paid.Credits)
	}
	ledgerBalanced(t, env)
	if e := auditHas(t, env, cheat, "node.suspend"); e == nil || !strings.Contains(e.Detail, "forged receipts") {
		t.Errorf("audit entry %+v: want the suspension with its reason", e)
	}
	if e := auditHas(t, env, cheat, "clawback"); e == nil || !strings.Contains(e.Detail, "returned to buyers") {
		t.Errorf("audit entry %+v: want the clawback", e)
	}
	body = ops.mustGet("/admin/audit?target=" + cheat)
	if !strings.Contains(body, "forged receipts") || strings.Contains(body, "odd answers") {
		t.Errorf("/admin/audit?target= does not show only the node's entries")
	}
	// An admin may open any node's page.
	if page := ops.mustGet("/provider/nodes/" + cheat); !strings.Contains(elementText(t, page, "reputation"), "forged receipts") {
		t.Errorf("the node's page does not say why it is suspended")
	}
}

// Only admins open the admin pages or use their forms.
func TestAdmin_Access(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	ada := newWebUser(t, env, "ada@example.com", "ada-labs", store.RoleBuyer)
	grace := newWebUser(t, env, "grace@example.com", "grace-gpus", store.RoleProvider)
	node := env.Agents[0].NodeID()
	for _, u := range []*webUser{ada, grace} {
		for _, path := range []string{"/admin", "/admin/accounts", "/admin/audit"} {
			if status, _ := u.get(path); status != http.StatusForbidden {
				t.Errorf("%s GET %s: status %d, want 403", u.user.Email, path, status)
			}
		}
		if status, _, _ := u.post("/admin/accounts/"+u.user.AccountID+"/credit", url.Values{"amount": {"100"}}); status != http.StatusForbidden {
			t.Errorf("%s credited their own account: status %d, want 403", u.user.Email, status)
		}
		if status, _, _ := u.post("/admin/nodes/"+node+"/suspend", url.Values{"reason": {"x"}}); status != http.StatusForbidden {
			t.Errorf("%s suspended a node: status %d, want 403", u.user.Email, status)
		}
		if b, _ := env.Store.Balance(ctx, u.user.AccountID); b.Credits != 0 {
			t.Errorf("%s has %s: a refused credit moved money", u.user.Email, b.Credits)
		}
	}
	if n, _ := env.Store.Node(ctx, node); n.Level != store.LevelVerified {
		t.Errorf("the node is %s, want verified", n.Level)
	}
	// A form without the session's CSRF token is refused, even for an admin.
	ops := newWebUser(t, env, "ops@example.com", "ops", store.RoleAdmin)
	ops.csrf = "forged"
	if status, _, _ := ops.post("/admin/accounts/"+ada.user.AccountID+"/credit", url.Values{"amount": {"100"}}); status != http.StatusForbidden {
		t.Errorf("a credit without the CSRF token: status %d, want 403", status)
	}
	ledgerBalanced(t, env)
}
