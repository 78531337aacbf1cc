package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// webUser is a person logged in to the console of a test network, with the cookies of its
// browser and its session's CSRF token.
type webUser struct {
	t      *testing.T
	env    *testenv.Env
	client *http.Client
	csrf   string
	user   *store.User
}

const webPassword = "correct horse battery"

var csrfFieldRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// newWebUser signs a person up through the console's form, with the roles (buyer, provider; admin
// is then given in the store, as an operator does), and returns them logged in.
func newWebUser(t *testing.T, env *testenv.Env, email, account string, roles ...string) *webUser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u := &webUser{t: t, env: env, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body := u.get("/signup")
	m := csrfFieldRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the sign-up form:\n%s", body)
	}
	form := url.Values{"csrf": {m[1]}, "email": {email}, "password": {webPassword}, "account": {account}}
	admin := false
	for _, r := range roles {
		if r == store.RoleAdmin {
			admin = true
			r = store.RoleBuyer
		}
		form.Add("role", r)
	}
	resp, err := u.client.PostForm(env.URL+"/signup", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign up %s: status %d, want 303", email, resp.StatusCode)
	}
	ctx := context.Background()
	if u.user, err = env.Store.UserByEmail(ctx, email); err != nil {
		t.Fatal(err)
	}
	if admin {
		if err := env.Store.SetUserRoles(ctx, u.user.ID, []string{store.RoleAdmin}); err != nil {
			t.Fatal(err)
		}
		u.user.Roles = []string{store.RoleAdmin}
	}
	// The session's CSRF token, which every form of its pages carries.
	for _, ck := range jar.Cookies(parseURL(env.URL)) {
		if ck.Name != "shareai_session" {
			continue
		}
		secret, err := base64.RawURLEncoding.DecodeString(ck.Value)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(secret)
		ws, err := env.Store.WebSession(ctx, sum[:], time.Now())
		if err != nil {
			t.Fatal(err)
		}
		u.csrf = ws.CSRF
	}
	if u.csrf == "" {
		t.Fatal("signing up started no session")
	}
	return u
}

// get returns a page's status and body.
func (u *webUser) get(path string) (int, string) {
	u.t.Helper()
	resp, err := u.client.Get(u.env.URL + path)
	if err != nil {
		u.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post submits a form with the session's CSRF token; it returns the status, the body and where
// a redirect goes.
func (u *webUser) post(path string, form url.Values) (int, string, string) {
	u.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", u.csrf)
	resp, err := u.client.PostForm(u.env.URL+path, form)
	if err != nil {
		u.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

// mustGet returns a page that must answer 200, with no message key left untranslated.
func (u *webUser) mustGet(path string) string {
	u.t.Helper()
	status, body := u.get(path)
	if status != http.StatusOK {
		u.t.Fatalf("GET %s: status %d, want 200\n%s", path, status, body)
	}
	if k := rawKeyRe.FindString(body); k != "" {
		u.t.Errorf("GET %s shows the message key %q: it is missing from the catalogue", path, k)
	}
	return body
}

// rawKeyRe matches a message key shown as it is, which T does for a key it does not know.
var rawKeyRe = regexp.MustCompile(`>[^<]*\b(provider|admin)\.[a-z_]+\.[a-z_.]+`)

// elementText returns the text inside the element with the id, tags removed.
func elementText(t *testing.T, body, id string) string {
	t.Helper()
	start := regexp.MustCompile(`<(\w+)[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindStringSubmatchIndex(body)
	if start == nil {
		t.Fatalf("no element #%s in the page", id)
	}
	tag := body[start[2]:start[3]]
	tags := regexp.MustCompile(`<(/?)` + tag + `\b[^>]*>`)
	depth, end := 1, len(body)
	for _, m := range tags.FindAllStringSubmatchIndex(body[start[1]:], -1) {
		if m[3] > m[2] { // a closing tag
			depth--
		} else {
			depth++
		}
		if depth == 0 {
			end = start[1] + m[0]
			break
		}
	}
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body[start[1]:end], " ")
	return strings.Join(strings.Fields(html.UnescapeString(text)), " ")
}

// startProviderAgent runs an agent with the token on the network, with a GPU that reports readings; it
// returns once the node registered.
func startProviderAgent(t *testing.T, env *testenv.Env, token, name string) *agent.Agent {
	t.Helper()
	temp, power, limit, util := 61.4, 212.0, 450.0, 37.0
	used, total := int64(9000), int64(24564)
	a, err := agent.New(agent.Config{Coordinator: env.URL, Token: token, DataDir: t.TempDir(), Name: name, Region: "eu-west",
		Engine: sim.New(sim.Config{}), InputPrice: 50_000_000, OutputPrice: 100_000_000,
		Hardware: protocol.Hardware{GPUs: []protocol.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA GeForce RTX 4090", VRAMMiB: 24564, Driver: "550.54.15"}},
			Fingerprint: "fp-test-4090"},
		Telemetry: func(context.Context) (*protocol.Telemetry, error) {
			return &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0, TemperatureC: &temp, PowerW: &power, PowerLimitW: &limit,
				UtilizationPct: &util, MemoryUsedMiB: &used, MemoryTotalMiB: &total}}}, nil
		},
		CheckEvery: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-a.Ready():
	case <-done:
		t.Fatal("the agent stopped before registering")
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not register")
	}
	return a
}

// askNode sends a chat request served by the node, with the network's buyer key.
func askNode(t *testing.T, env *testenv.Env, nodeID string) {
	t.Helper()
	client := env.Client()
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("earn something")},
	}, option.WithJSONSet("provider", map[string]any{"only": []string{nodeID}}))
	if err != nil {
		t.Fatalf("a request to node %s: %v", nodeID, err)
	}
}

var newTokenRe = regexp.MustCompile(`id="new-token"[^>]*>(spt-[a-z2-7]+)<`)

// A provider creates a token, shown once; an agent registers with it; the node appears with
// its status, its page shows its hardware, live telemetry and reputation; after a request its
// earnings show as pending.
func TestProvider_TokenNodeTelemetryEarnings(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Fleet.HeartbeatInterval = 200 * time.Millisecond })
	grace := newWebUser(t, env, "grace@example.com", "grace-gpus", store.RoleProvider)

	body := grace.mustGet("/provider")
	if !strings.Contains(body, `id="token-name"`) || !strings.Contains(body, `id="create-token"`) || !strings.Contains(body, `id="nodes"`) {
		t.Fatalf("/provider lacks the token form or the nodes table:\n%s", body)
	}
	status, body, _ := grace.post("/provider/tokens", url.Values{"name": {"rig"}})
	m := newTokenRe.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("create token: status %d, no #new-token in\n%s", status, body)
	}
	token := m[1]
	if !strings.Contains(body, "shareai provider init --coordinator "+env.URL+" --token "+token) {
		t.Errorf("the page does not show the command to run the agent with the token")
	}
	if body := grace.mustGet("/provider"); strings.Contains(body, token) || !strings.Contains(body, token[:12]) {
		t.Errorf("the token must be shown once (then only its prefix %s)", token[:12])
	}

	a := startProviderAgent(t, env, token, "grace-rig")
	node := env.Coordinator().Fleet.Node(a.NodeID())
	testenv.WaitFor(t, "the node's telemetry", func() bool { tel, _ := node.Telemetry(); return tel != nil })

	body = grace.mustGet("/provider")
	row := regexp.MustCompile(`(?s)<tr data-node-id="` + a.NodeID() + `">.*?</tr>`).FindString(body)
	if row == "" {
		t.Fatalf("the node %s is not in #nodes:\n%s", a.NodeID(), body)
	}
	for _, want := range []string{"grace-rig", "Online", "Verified", "eu-west", "sim/llama-3.1-8b"} {
		if !strings.Contains(row, want) {
			t.Errorf("the node's row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(body, "local-1") {
		t.Errorf("another provider's node is listed")
	}

	page := grace.mustGet("/provider/nodes/" + a.NodeID())
	if s := elementText(t, page, "node-status"); !strings.Contains(s, "Online") || !strings.Contains(s, "Verified") {
		t.Errorf("#node-status %q: want online and verified", s)
	}
	if s := elementText(t, page, "offers"); !strings.Contains(s, "Verified") {
		t.Errorf("#offers %q: want each model's own level, verified", s)
	}
	tel := elementText(t, page, "telemetry")
	for _, want := range []string{"61 °C", "212 W", "450 W", "37%", "9,000 MiB", "24,564 MiB"} {
		if !strings.Contains(tel, want) {
			t.Errorf("#telemetry lacks %q: %s", want, tel)
		}
	}
	for _, want := range []string{"NVIDIA GeForce RTX 4090", "550.54.15", "fp-test-4090"} {
		if !strings.Contains(page, want) {
			t.Errorf("the node page lacks its hardware %q", want)
		}
	}
	if rep := elementText(t, page, "reputation"); !strings.Contains(rep, "Verified") {
		t.Errorf("#reputation %q: want the level", rep)
	}

	// A job on the node: its pending earnings show.
	askNode(t, env, a.NodeID())
	var b *store.Balance
	testenv.WaitFor(t, "the job's earnings", func() bool { // settlements are written in batches
		var err error
		b, err = env.Store.Balance(context.Background(), grace.user.AccountID)
		return err == nil && b.Pending > 0
	})
	body = grace.mustGet("/provider")
	if got, want := elementText(t, body, "earnings-pending"), console.USD(b.Pending); got != want {
		t.Errorf("#earnings-pending %q, want %q", got, want)
	}
	body = grace.mustGet("/provider/earnings")
	if !strings.Contains(body, `data-node-id="`+a.NodeID()+`"`) || !strings.Contains(body, "shareai admin payout") {
		t.Errorf("/provider/earnings lacks the node's earnings or how payouts are made:\n%s", body)
	}
	// The node's record counts the job (the fleet stores it within its record interval).
	testenv.WaitFor(t, "the job in the node's record", func() bool {
		days, err := env.Store.NodeDays(context.Background(), a.NodeID(), time.Now().Add(-time.Hour))
		return err == nil && len(days) == 1 && days[0].Jobs == 1
	})
	page = grace.mustGet("/provider/nodes/" + a.NodeID())
	if rec := elementText(t, page, "record"); !strings.Contains(rec, console.USD(b.Pending)) {
		t.Errorf("the node's record lacks its earnings %s: %s", console.USD(b.Pending), rec)
	}

	// In Persian, right to left, with Persian digits.
	grace.client.Jar.SetCookies(parseURL(env.URL), []*http.Cookie{{Name: "lang", Value: "fa", Path: "/"}})
	page = grace.mustGet("/provider/nodes/" + a.NodeID())
	if !strings.Contains(page, `dir="rtl"`) || !strings.Contains(elementText(t, page, "telemetry"), "۶۱") {
		t.Errorf("the Persian node page is not right to left with Persian digits")
	}
	grace.mustGet("/provider")
	grace.mustGet("/provider/earnings")
}

func parseURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// A provider sees only its own nodes and tokens; a buyer no provider page; a visitor logs in
// first.
func TestProvider_Access(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	other := env.Agents[0].NodeID() // the network's own provider's node
	grace := newWebUser(t, env, "grace@example.com", "grace-gpus", store.RoleProvider)
	ada := newWebUser(t, env, "ada@example.com", "ada-labs", store.RoleBuyer)

	if status, _ := grace.get("/provider/nodes/" + other); status != http.StatusNotFound {
		t.Errorf("another provider's node: status %d, want 404", status)
	}
	if status, _ := grace.get("/provider/nodes/node_none"); status != http.StatusNotFound {
		t.Errorf("no such node: status %d, want 404", status)
	}
	keys, err := env.Store.Keys(ctx, "", store.KeyProvider)
	if err != nil || len(keys) == 0 {
		t.Fatal(keys, err)
	}
	if status, _, _ := grace.post("/provider/tokens/"+keys[0].ID+"/revoke", nil); status != http.StatusNotFound {
		t.Errorf("revoking another provider's token: status %d, want 404", status)
	}
	if k, _ := env.Store.KeyByHash(ctx, store.HashSecret(env.ProviderToken)); k.Revoked() {
		t.Errorf("another provider's token was revoked")
	}

	for _, path := range []string{"/provider", "/provider/nodes/" + other, "/provider/earnings"} {
		if status, _ := ada.get(path); status != http.StatusForbidden {
			t.Errorf("a buyer GET %s: status %d, want 403", path, status)
		}
	}
	if status, _, _ := ada.post("/provider/tokens", url.Values{"name": {"x"}}); status != http.StatusForbidden {
		t.Errorf("a buyer creating a provider token: status %d, want 403", status)
	}
	if keys, _ := env.Store.Keys(ctx, ada.user.AccountID, store.KeyProvider); len(keys) != 0 {
		t.Errorf("a buyer created a provider token")
	}

	visitor := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := visitor.Get(env.URL + "/provider")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("a visitor: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A token without a name is refused; one is revoked by its owner, and then refused.
	if status, _, loc := grace.post("/provider/tokens", url.Values{"name": {"  "}}); status != http.StatusSeeOther || loc != "/provider" {
		t.Errorf("a token without a name: %d to %q, want 303 back", status, loc)
	}
	_, body, _ := grace.post("/provider/tokens", url.Values{"name": {"rig"}})
	token := newTokenRe.FindStringSubmatch(body)[1]
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(token))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, loc := grace.post("/provider/tokens/"+k.ID+"/revoke", nil); status != http.StatusSeeOther || loc != "/provider" {
		t.Errorf("revoking one's token: %d to %q, want 303 to /provider", status, loc)
	}
	if k, _ := env.Store.KeyByHash(ctx, store.HashSecret(token)); !k.Revoked() {
		t.Errorf("the token is not revoked")
	}
}

// A node page renders for a node that never sent telemetry, declared windows and is offline.
func TestProvider_NodePageOffline(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	grace := newWebUser(t, env, "grace@example.com", "grace-gpus", store.RoleProvider)
	now := time.Now()
	n := &store.Node{ID: "node_offline", AccountID: grace.user.AccountID, PublicKey: make([]byte, 32), Name: "attic", Region: "eu",
		Engine: "ollama", Hardware: []byte(`{"gpus":[{"index":0,"name":"RTX 3090","vram_mib":24576}]}`),
		Offers:    []byte(`[{"model":"llama3.1:8b","max_concurrent":2,"input_price":100000000,"output_price":200000000}]`),
		FirstSeen: now.Add(-48 * time.Hour), LastSeen: now.Add(-time.Hour), Windows: "mon-fri 18:00-23:00", Timezone: "Asia/Tehran"}
	if err := env.Store.UpsertNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.AddNodeChecks(ctx, []store.NodeCheck{{NodeID: n.ID, At: now.Add(-2 * time.Hour), Kind: store.CheckOnboarding,
		Model: "llama3.1:8b", Passed: false, Detail: "answers differ from the reference"}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetNodeLevel(ctx, n.ID, store.LevelQuarantined, "failed its onboarding checks", now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.AddNodeEvent(ctx, &store.NodeEvent{NodeID: n.ID, At: now.Add(-3 * time.Hour), Kind: store.EventHardwareChanged,
		Detail: "GPU changed"}); err != nil {
		t.Fatal(err)
	}
	page := grace.mustGet("/provider/nodes/" + n.ID)
	if s := elementText(t, page, "node-status"); !strings.Contains(s, "Offline") || !strings.Contains(s, "Quarantined") {
		t.Errorf("#node-status %q: want offline and quarantined", s)
	}
	rep := elementText(t, page, "reputation")
	for _, want := range []string{"failed its onboarding checks", "answers differ from the reference", "0 of the latest 1 passed", "Usage over-claims"} {
		if !strings.Contains(rep, want) {
			t.Errorf("#reputation lacks %q: %s", want, rep)
		}
	}
	if s := elementText(t, page, "overclaims"); s != "none" {
		t.Errorf("#overclaims %q, want none", s)
	}
	for _, want := range []string{"RTX 3090", "mon-fri 18:00-23:00", "Asia/Tehran", "llama3.1:8b", "$0.10 / 1M", "Hardware changed"} {
		if !strings.Contains(page, want) {
			t.Errorf("the node page lacks %q", want)
		}
	}
}
