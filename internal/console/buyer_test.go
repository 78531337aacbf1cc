package console_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/tier"
)

// buyerUser is a logged-in browser, for tests: a user of an account with a session made in the
// store (the log-in form has its own tests), and its cookie and CSRF token.
type buyerUser struct {
	t       *testing.T
	base    string
	user    *store.User
	cookie  string
	csrf    string
	account string
}

// buyerLogIn makes a user of the account with the roles and a web session for it.
func buyerLogIn(t *testing.T, env *testenv.Env, accountID string, roles ...string) *buyerUser {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	u := &store.User{ID: store.NewID("usr"), Email: strings.ToLower(store.NewID("u")) + "@example.com",
		PasswordHash: "$argon2id$v=19$m=65536,t=1,p=4$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		AccountID:    accountID, Roles: roles, CreatedAt: now}
	if err := env.Store.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	sum := sha256.Sum256(secret)
	ws := &store.WebSession{Hash: sum[:], UserID: u.ID, CSRF: rand.Text(), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := env.Store.CreateWebSession(ctx, ws); err != nil {
		t.Fatal(err)
	}
	return &buyerUser{t: t, base: env.URL, user: u, cookie: base64.RawURLEncoding.EncodeToString(secret), csrf: ws.CSRF, account: accountID}
}

// The console's cookies: the session's secret (auth.go) and the language chosen (i18n.go).
const (
	buyerSessionCookie = "shareai_session"
	buyerLangCookie    = "lang"
)

// buyerNoRedirects is a client that shows redirects as they are.
var buyerNoRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (u *buyerUser) do(method, path string, form url.Values, header ...string) *http.Response {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u.base+path, body)
	if err != nil {
		u.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if u.cookie != "" {
		req.AddCookie(&http.Cookie{Name: buyerSessionCookie, Value: u.cookie})
	}
	resp, err := buyerNoRedirects.Do(req)
	if err != nil {
		u.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// get fetches a page and returns its status and body.
func (u *buyerUser) get(path string, header ...string) (int, string) {
	u.t.Helper()
	resp := u.do(http.MethodGet, path, nil, header...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post sends a form with the session's CSRF token (unless the form has its own "csrf").
func (u *buyerUser) post(path string, form url.Values) (int, string) {
	u.t.Helper()
	resp := u.postResp(path, form)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (u *buyerUser) postResp(path string, form url.Values) *http.Response {
	u.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", u.csrf)
	}
	return u.do(http.MethodPost, path, form)
}

// buyerAcct is the account of the network's API key: the buyer with credits.
func buyerAcct(t *testing.T, env *testenv.Env) string {
	t.Helper()
	k, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	return k.AccountID
}

// buyerOther makes another account, with a buyer key of its own.
func buyerOther(t *testing.T, env *testenv.Env, name string) (*store.Account, *store.Key) {
	t.Helper()
	ctx := context.Background()
	a := &store.Account{ID: store.NewID("acct"), Name: name, CreatedAt: time.Now()}
	if err := env.Store.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	_, k := store.NewKey(a.ID, store.KeyBuyer, "theirs", time.Now())
	if err := env.Store.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return a, k
}

var buyerNewKeyRE = regexp.MustCompile(`id="new-key"[^>]*>(sk-[a-z2-7]+)<`)

// A buyer creates a key, shown once and stored hashed, with its models, routing and cap; the
// key works with the OpenAI SDK until the buyer revokes it; another account's key cannot be
// revoked, and a form with no CSRF token or bad fields creates nothing.
func TestBuyer_Keys(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.KeyCacheTTL = time.Nanosecond })
	ctx := context.Background()
	acct := buyerAcct(t, env)
	u := buyerLogIn(t, env, acct, store.RoleBuyer)
	countKeys := func() int {
		ks, err := env.Store.Keys(ctx, acct, store.KeyBuyer)
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}
	before := countKeys()

	status, page := u.get("/buyer/keys")
	if status != http.StatusOK || !strings.Contains(page, `id="keys"`) || !strings.Contains(page, `id="key-name"`) || !strings.Contains(page, `id="create-key"`) {
		t.Fatalf("GET /buyer/keys: %d, want 200 with #keys, #key-name and #create-key:\n%s", status, page)
	}
	if strings.Contains(page, `id="new-key"`) {
		t.Errorf("GET /buyer/keys shows a new key before any was created")
	}

	resp := u.postResp("/buyer/keys", url.Values{"name": {"laptop"}, "models": {"sim/llama-3.1-8b, sim/qwen-2.5-7b"},
		"routing": {`{"sort": "latency"}`}, "limit": {"5"}, "period": {"daily"}, "rpm": {"30"}, "tpm": {" 90000 "}, "concurrent": {""},
		"service_tier": {"flex"}, "split": {` {"sim/qwen-2.5-7b": 0.25} `}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page = string(b)
	m := buyerNewKeyRE.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("POST /buyer/keys: %d; want 200 with the key in #new-key:\n%s", resp.StatusCode, page)
	}
	secret := m[1]
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page with the new key has Cache-Control %q; want no-store", cc)
	}
	for _, ck := range resp.Cookies() {
		if strings.Contains(ck.Value, secret) {
			t.Errorf("the new key is in the cookie %s", ck.Name)
		}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		t.Errorf("POST /buyer/keys redirects to %q; want the page rendered with the key", loc)
	}

	// Stored hashed, with its models, routing and cap.
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(secret))
	if err != nil {
		t.Fatalf("the new key is not stored under its hash: %v", err)
	}
	if k.AccountID != acct || k.Name != "laptop" || k.Kind != store.KeyBuyer || !strings.HasPrefix(secret, k.Prefix) ||
		strings.Join(k.Models, ",") != "sim/llama-3.1-8b,sim/qwen-2.5-7b" || string(k.Routing) != `{"sort":"latency"}` {
		t.Errorf("stored key %+v; want laptop of %s with its models and routing", k, acct)
	}
	if want := (store.RateLimits{RequestsPerMinute: 30, TokensPerMinute: 90000}); k.Limits != want {
		t.Errorf("stored rate limits %+v, want %+v", k.Limits, want)
	}
	if k.ServiceTier != "bronze" {
		t.Errorf("stored service tier %q, want bronze (flex)", k.ServiceTier)
	}
	if string(k.Split) != `{"sim/qwen-2.5-7b":0.25}` {
		t.Errorf("stored split %q, want the form's, compact", k.Split)
	}
	spends, err := env.Store.Spending(ctx, time.Now(), store.KeyScope(k.ID))
	if err != nil || len(spends) != 1 || spends[0].Period != store.Daily || spends[0].Limit != 5*money.USD {
		t.Errorf("key caps %+v, %v; want $5 daily", spends, err)
	}
	if got := countKeys(); got != before+1 {
		t.Errorf("%d keys after one was created; want %d", got, before+1)
	}

	// Shown once: the list shows its prefix, never the secret.
	_, page = u.get("/buyer/keys")
	if strings.Contains(page, secret) || !strings.Contains(page, k.Prefix) || !strings.Contains(page, `data-key-id="`+k.ID+`"`) {
		t.Errorf("GET /buyer/keys after creation: want the key's row with its prefix and no secret:\n%s", page)
	}
	if !strings.Contains(page, "30 requests/min") || !strings.Contains(page, "tokens/min") || strings.Contains(page, "at once</div>") {
		t.Errorf("GET /buyer/keys after creation: want the key's rate limits, 30 requests and 90000 tokens a minute:\n%s", page)
	}
	if row := regexp.MustCompile(`(?s)<tr data-key-id="` + k.ID + `".*?</tr>`).FindString(page); !strings.Contains(row, `<div class="tier">Tier: Flex (bronze)</div>`) ||
		!strings.Contains(row, `<div class="split">Split: <code dir="ltr">{&#34;sim/qwen-2.5-7b&#34;:0.25}</code></div>`) {
		t.Errorf("GET /buyer/keys after creation: want the key's tier, flex, in its row:\n%s", row)
	}

	// The key works with the OpenAI SDK.
	client := openai.NewClient(option.WithBaseURL(env.BaseURL()+"/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from a console key")},
	})
	if err != nil || len(chat.Choices) == 0 || chat.Choices[0].Message.Content == "" {
		t.Fatalf("chat with the console's new key: %v", err)
	}

	// Forms that create nothing.
	for _, tt := range []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"no name", url.Values{"name": {" "}}, http.StatusBadRequest, `id="key-error"`},
		{"reserved name", url.Values{"name": {"Console"}}, http.StatusBadRequest, `id="key-error"`},
		{"bad routing", url.Values{"name": {"x"}, "routing": {`{"regions": ["uk"]}`}}, http.StatusBadRequest, "provider.regions[0]"},
		{"unknown routing field", url.Values{"name": {"x"}, "routing": {`{"sortt": "price"}`}}, http.StatusBadRequest, "provider.sortt"},
		{"bad limit", url.Values{"name": {"x"}, "limit": {"-3"}}, http.StatusBadRequest, `id="key-error"`},
		{"bad period", url.Values{"name": {"x"}, "limit": {"3"}, "period": {"yearly"}}, http.StatusBadRequest, `id="key-error"`},
		{"zero rate limit", url.Values{"name": {"x"}, "rpm": {"0"}}, http.StatusBadRequest, `id="key-error"`},
		{"rate limit not a number", url.Values{"name": {"x"}, "concurrent": {"lots"}}, http.StatusBadRequest, "lots"},
		{"unknown service tier", url.Values{"name": {"x"}, "service_tier": {"turbo"}}, http.StatusBadRequest, "turbo"},
		{"bad split", url.Values{"name": {"x"}, "split": {`{"sim/qwen-2.5-7b": 3}`}}, http.StatusBadRequest, "greater than 0 and at most 1"},
		{"split outside the models", url.Values{"name": {"x"}, "models": {"sim/llama-3.1-8b"}, "split": {`{"sim/qwen-2.5-7b": 0.5}`}}, http.StatusBadRequest, "not among the key"},
		{"no CSRF token", url.Values{"name": {"x"}, "csrf": {""}}, http.StatusForbidden, ""},
		{"wrong CSRF token", url.Values{"name": {"x"}, "csrf": {"nope"}}, http.StatusForbidden, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := countKeys()
			status, page := u.post("/buyer/keys", tt.form)
			if status != tt.status || !strings.Contains(page, tt.want) {
				t.Errorf("POST /buyer/keys: %d; want %d with %q:\n%s", status, tt.status, tt.want, page)
			}
			if strings.Contains(page, `id="new-key"`) || countKeys() != n {
				t.Errorf("a key was created")
			}
		})
	}

	// Another account's key: 404, and it stays valid.
	_, theirs := buyerOther(t, env, "other-buyer")
	status, _ = u.post("/buyer/keys/"+theirs.ID+"/revoke", nil)
	if status != http.StatusNotFound {
		t.Errorf("revoking another account's key: %d; want 404", status)
	}
	if ks, _ := env.Store.Keys(ctx, theirs.AccountID, store.KeyBuyer); len(ks) != 1 || ks[0].Revoked() {
		t.Errorf("another account's key was revoked: %+v", ks)
	}
	if status, _ = u.post("/buyer/keys/key_doesnotexist/revoke", nil); status != http.StatusNotFound {
		t.Errorf("revoking an unknown key: %d; want 404", status)
	}
	// Without the token, nothing happens.
	if status, _ = u.post("/buyer/keys/"+k.ID+"/revoke", url.Values{"csrf": {"nope"}}); status != http.StatusForbidden {
		t.Errorf("revoking without the CSRF token: %d; want 403", status)
	}

	// Revoking one's own key: back to the list, and the key stops working.
	resp = u.postResp("/buyer/keys/"+k.ID+"/revoke", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/buyer/keys" {
		t.Fatalf("revoke: %d to %q; want 303 to /buyer/keys", resp.StatusCode, resp.Header.Get("Location"))
	}
	if k, err = env.Store.KeyByHash(ctx, store.HashSecret(secret)); err != nil || !k.Revoked() {
		t.Fatalf("the key is not revoked: %+v, %v", k, err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("still there?")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked key answered %v; want 401", err)
	}
}

// The buyer's pages need a log-in with the buyer role.
func TestBuyer_Access(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	prov := buyerLogIn(t, env, buyerAcct(t, env), store.RoleProvider)
	anon := &buyerUser{t: t, base: env.URL}
	for _, path := range []string{"/buyer", "/buyer/keys", "/buyer/requests", "/buyer/playground", "/buyer/requests/req_x", "/buyer/requests/req_x/receipts.json",
		"/buyer/batches", "/buyer/batches/batch_x", "/buyer/files/file-x/content"} {
		if status, _ := prov.get(path); status != http.StatusForbidden {
			t.Errorf("a provider's GET %s: %d; want 403", path, status)
		}
		resp := anon.do(http.MethodGet, path, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s logged out: %d to %q; want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if status, _ := prov.post("/buyer/playground/chat", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"hi"}}); status != http.StatusForbidden {
		t.Errorf("a provider's chat in the playground: %d; want 403", status)
	}
	if status, _ := prov.post("/buyer/batches/batch_x/cancel", nil); status != http.StatusForbidden {
		t.Errorf("a provider's cancel of a batch: %d; want 403", status)
	}
}

// A request made with the SDK shows in the request log, and its page shows its node, cost and
// receipts, which download as JSON that verifies against the coordinator's key.
func TestBuyer_Requests(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	acct := buyerAcct(t, env)
	u := buyerLogIn(t, env, acct, store.RoleBuyer)
	var raw *http.Response
	client := env.Client()
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("log me")},
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	id := raw.Header.Get("X-Request-Id")
	var rec *store.Usage
	env.WaitFor("the request's usage", func() bool {
		rec, err = env.Store.UsageByRequest(ctx, id)
		return err == nil
	})
	if rec.NodeID == "" || rec.Cost <= 0 {
		t.Fatalf("usage %+v; want a node and a cost", rec)
	}

	status, page := u.get("/buyer/requests")
	if status != http.StatusOK || !strings.Contains(page, `id="requests"`) ||
		!strings.Contains(page, `<tr data-request-id="`+id+`"`) || !strings.Contains(page, `href="/buyer/requests/`+id+`"`) {
		t.Fatalf("GET /buyer/requests: %d; want #requests with a row for %s linking to it:\n%s", status, id, page)
	}

	cost := console.USD(rec.Cost)
	status, page = u.get("/buyer/requests/" + id)
	if status != http.StatusOK || !strings.Contains(page, rec.NodeID) || !strings.Contains(page, cost) ||
		!strings.Contains(page, `id="receipts"`) || !strings.Contains(page, `href="/buyer/requests/`+id+`/receipts.json"`) {
		t.Fatalf("GET /buyer/requests/%s: %d; want node %s, cost %s and the receipts:\n%s", id, status, rec.NodeID, cost, page)
	}

	resp := u.do(http.MethodGet, "/buyer/requests/"+id+"/receipts.json", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("receipts.json: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	var file struct {
		Receipts []receipt.Signed `json:"receipts"`
	}
	if err := json.Unmarshal(b, &file); err != nil || len(file.Receipts) != 1 {
		t.Fatalf("receipts.json %s: %v; want one receipt", b, err)
	}
	key := buyerCoordKey(t, env)
	r, err := file.Receipts[0].Verify(key)
	if err != nil {
		t.Fatalf("the downloaded receipt does not verify: %v", err)
	}
	if file.Receipts[0].RequestID != id || r.NodeID != rec.NodeID || r.PromptTokens != rec.PromptTokens || r.CompletionTokens != rec.CompletionTokens {
		t.Errorf("receipt %+v for %s; want %s's node %s and tokens %d + %d", r, file.Receipts[0].RequestID, id, rec.NodeID, rec.PromptTokens, rec.CompletionTokens)
	}
	if !strings.Contains(page, r.OutputSHA256) {
		t.Errorf("the request's page does not show the receipt's output hash %s", r.OutputSHA256)
	}

	// Each request shows the tier that served it and its time in the queue.
	queued := &store.Usage{RequestID: "req_queued_flex", AccountID: acct, KeyID: rec.KeyID, Model: rec.Model, Endpoint: "chat",
		Outcome: store.OutcomeOK, CreatedAt: time.Now(), ServiceTier: "bronze", QueueTime: 1234 * time.Millisecond}
	if err := env.Store.InsertUsage(ctx, []*store.Usage{queued}); err != nil {
		t.Fatal(err)
	}
	_, page = u.get("/buyer/requests")
	for id, want := range map[string]string{queued.RequestID: "Flex (bronze)", rec.RequestID: "Default (silver)"} {
		if row := regexp.MustCompile(`(?s)<tr data-request-id="` + id + `".*?</tr>`).FindString(page); !strings.Contains(row, `<small class="tier">`+want+`</small>`) {
			t.Errorf("GET /buyer/requests: %s's row %q; want its tier, %s", id, row, want)
		}
	}
	_, page = u.get("/buyer/requests/" + queued.RequestID)
	if served, wait := elementText(t, page, "request-tier"), elementText(t, page, "request-queue"); served != "Flex (bronze)" || wait != "1,234 ms" {
		t.Errorf("GET /buyer/requests/%s: tier %q, queued %q; want Flex (bronze), 1,234 ms", queued.RequestID, served, wait)
	}

	// Another account's user sees neither the request nor its receipts.
	other, _ := buyerOther(t, env, "nosy")
	nosy := buyerLogIn(t, env, other.ID, store.RoleBuyer)
	for _, path := range []string{"/buyer/requests/" + id, "/buyer/requests/" + id + "/receipts.json", "/buyer/requests/req_unknown", "/buyer/requests/chatcmpl-x"} {
		if status, body := nosy.get(path); status != http.StatusNotFound || strings.Contains(body, rec.NodeID) {
			t.Errorf("another account's GET %s: %d; want 404", path, status)
		}
	}
	if _, page := nosy.get("/buyer/requests"); strings.Contains(page, id) {
		t.Errorf("another account's request log lists %s", id)
	}
}

// buyerCoordKey is the key the coordinator countersigns receipts with.
func buyerCoordKey(t *testing.T, env *testenv.Env) ed25519.PublicKey {
	t.Helper()
	resp, err := http.Get(env.BaseURL() + "/receipts/key")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k struct{ Key string }
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(k.Key)
	if err != nil || len(b) != ed25519.PublicKeySize {
		t.Fatalf("coordinator key %q: %v", k.Key, err)
	}
	return b
}

// buyerSSE reads a stream of server-sent events: the data of each event, in order.
func buyerSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	var data []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				out = append(out, strings.Join(data, "\n"))
				data = nil
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	return out
}

// The playground streams an answer from the network through the console, paid by the account
// itself through the request core: no key is made for it, so none can reach the browser.
func TestBuyer_Playground(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Regions = []string{"de", "us"} })
	ctx := context.Background()
	acct := buyerAcct(t, env)
	u := buyerLogIn(t, env, acct, store.RoleBuyer)

	status, page := u.get("/buyer/playground")
	for _, want := range []string{`<select id="model"`, `<option value="sim/llama-3.1-8b">`, `<textarea id="prompt"`, `id="send"`,
		`id="answer"`, `id="answer-cost"`, `src="/static/playground.js"`, `name="csrf" value="` + u.csrf + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET /buyer/playground lacks %s", want)
		}
	}
	if status != http.StatusOK {
		t.Fatalf("GET /buyer/playground: %d", status)
	}
	keysBefore, _ := env.Store.Keys(ctx, acct, store.KeyBuyer)
	servedBefore := requestsServed(t, env)

	resp := u.postResp("/buyer/playground/chat", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"Tell me about idle GPUs."},
		"sort": {"latency"}, "regions": {"eu"}, "max_price_prompt": {"1"}, "max_price_completion": {"2.5"}})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /buyer/playground/chat: %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var body strings.Builder
	events := buyerSSE(t, io.TeeReader(resp.Body, &body))
	resp.Body.Close()
	var answer strings.Builder
	var usage struct {
		Cost        json.Number `json:"cost"`
		TotalTokens int         `json:"total_tokens"`
	}
	done := false
	for _, ev := range events {
		if ev == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
			Error *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev), &chunk); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if chunk.Error != nil {
			t.Fatalf("error event: %s", *chunk.Error)
		}
		for _, ch := range chunk.Choices {
			answer.WriteString(ch.Delta.Content)
		}
		if chunk.Usage != nil {
			d := json.NewDecoder(strings.NewReader(string(*chunk.Usage)))
			d.UseNumber()
			if err := d.Decode(&usage); err != nil {
				t.Fatal(err)
			}
		}
	}
	cost, err := money.ParseUSD(usage.Cost.String())
	if !done || answer.Len() < 20 || err != nil || cost <= 0 || usage.TotalTokens <= 0 {
		t.Fatalf("stream: done %v, answer %q, usage %+v; want a whole answer and its cost", done, answer.String(), usage)
	}

	// No key: the account paid the chat itself.
	keys, err := env.Store.Keys(ctx, acct, store.KeyBuyer)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(keysBefore) {
		t.Fatalf("%d keys after a chat; want %d: the playground makes none", len(keys), len(keysBefore))
	}
	var headers strings.Builder
	resp.Header.Write(&headers)
	resp.Trailer.Write(&headers)
	for _, s := range []string{body.String(), headers.String(), page} {
		if strings.Contains(s, "sk-") || strings.Contains(s, "Bearer") {
			t.Errorf("a response holds an API key")
		}
	}

	// The request is the account's, served by a node in the EU.
	var rec *store.Usage
	env.WaitFor("the chat's usage", func() bool {
		us, err := env.Store.Usages(ctx, acct, 1)
		if err == nil && len(us) == 1 && us[0].KeyID == "" {
			rec = us[0]
		}
		return rec != nil
	})
	if rec.Region != "de" || rec.Cost != cost || !rec.Stream {
		t.Errorf("the chat's usage %+v; want region de (asked eu), cost %s, streamed", rec, cost)
	}
	if served := requestsServed(t, env); served != servedBefore+1 {
		t.Errorf("the coordinator counts %v requests served, %v before the chat; want the chat counted with the API's", served, servedBefore)
	}
	if _, page := u.get("/buyer/requests"); !strings.Contains(page, `data-request-id="`+rec.RequestID+`"`) {
		t.Errorf("the request log lacks the playground's request %s", rec.RequestID)
	}

	// Refused: an error in JSON, as the API's, for the page's script; still no key.
	for _, tt := range []struct {
		name   string
		form   url.Values
		status int
		param  string
	}{
		{"no model", url.Values{"prompt": {"hi"}}, http.StatusBadRequest, "model"},
		{"no prompt", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"  "}}, http.StatusBadRequest, "messages"},
		{"bad region", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"hi"}, "regions": {"uk"}}, http.StatusBadRequest, "provider.regions[0]"},
		{"bad sort", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"hi"}, "sort": {"cheapest"}}, http.StatusBadRequest, "provider.sort"},
		{"bad price", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"hi"}, "max_price_prompt": {"lots"}}, http.StatusBadRequest, "provider.max_price.prompt"},
		{"no CSRF token", url.Values{"model": {"sim/llama-3.1-8b"}, "prompt": {"hi"}, "csrf": {""}}, http.StatusForbidden, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := env.Store.Keys(ctx, acct, store.KeyBuyer)
			status, body := u.post("/buyer/playground/chat", tt.form)
			if status != tt.status {
				t.Errorf("status %d; want %d: %s", status, tt.status, body)
			}
			if tt.param != "" {
				var e struct {
					Error struct{ Message, Param string }
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Param != tt.param || e.Error.Message == "" {
					t.Errorf("body %s; want an OpenAI error about %s", body, tt.param)
				}
			}
			if after, _ := env.Store.Keys(ctx, acct, store.KeyBuyer); len(after) != len(before) {
				t.Errorf("a key was made for a refused chat")
			}
		})
	}

	// An error of the API (an unknown model) comes as the API's.
	status, body2 := u.post("/buyer/playground/chat", url.Values{"model": {"sim/none"}, "prompt": {"hi"}})
	if status != http.StatusNotFound || !strings.Contains(body2, "model_not_found") {
		t.Errorf("chat with an unknown model: %d %s; want 404 model_not_found", status, body2)
	}
	if keys, _ = env.Store.Keys(ctx, acct, store.KeyBuyer); len(keys) != len(keysBefore) {
		t.Errorf("%d keys after the chats; want %d", len(keys), len(keysBefore))
	}
}

// /models lists the models served now, to any logged-in user.
func TestBuyer_Models(t *testing.T) {
	prices, err := tier.ParseMultipliers("gold=2,bronze=0.5")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Regions = []string{"de", "us"}
		c.Coordinator.Core.TierPrices = prices
	})
	prov := buyerLogIn(t, env, buyerAcct(t, env), store.RoleProvider)
	status, page := prov.get("/models")
	if status != http.StatusOK || !strings.Contains(page, `<table id="models">`) {
		t.Fatalf("GET /models: %d; want 200 with #models:\n%s", status, page)
	}
	for name, want := range map[string]string{"gold": "Priority (gold) <small>×2</small>", "silver": "Default (silver) <small>×1</small>", "bronze": "Flex (bronze) <small>×0.5</small>"} {
		if !strings.Contains(page, `<th scope="col" class="num" data-tier="`+name+`">`+want+`</th>`) {
			t.Errorf("GET /models: no head %q for the %s prices", want, name)
		}
	}
	models := env.Coordinator().Fleet.Models()
	if len(models) < 2 {
		t.Fatalf("%d models served; want the simulated ones", len(models))
	}
	for _, m := range models {
		row := regexp.MustCompile(`(?s)<tr data-model="` + regexp.QuoteMeta(m.ID) + `">.*?</tr>`).FindString(page)
		if row == "" {
			t.Errorf("/models lacks %s", m.ID)
			continue
		}
		for _, want := range []string{"de, us", "$0.0525", "$0.105"} { // the asks and the 5% fee
			if !strings.Contains(row, want) {
				t.Errorf("%s's row lacks %q: %s", m.ID, want, row)
			}
		}
		// What a request pays at each tier: its multiplier of the asks, $0.05 and $0.10 per 1M
		// tokens, plus the 5% fee.
		row = regexp.MustCompile(`(?s)<table id="tier-prices">.*?<tr data-model="` + regexp.QuoteMeta(m.ID) + `">.*?</tr>`).FindString(page)
		for name, want := range map[string]string{
			"gold":   "$0.105 / 1M<br>$0.21 / 1M",
			"silver": "$0.0525 / 1M<br>$0.105 / 1M",
			"bronze": "$0.02625 / 1M<br>$0.0525 / 1M",
		} {
			if got := regexp.MustCompile(`<td class="num" data-tier="` + name + `">(.*?)</td>`).FindStringSubmatch(row); got == nil || got[1] != want {
				t.Errorf("%s's %s prices %q; want %q", m.ID, name, got, want)
			}
		}
	}
	if !strings.Contains(page, "platform fee included") || strings.Contains(page, "pays the ask") {
		t.Errorf("GET /models: want it to say what a request pays, fee included, not that it pays the ask")
	}
	// In Persian, with its digits.
	_, page = prov.get("/models", "Cookie", buyerLangCookie+"=fa")
	if !strings.Contains(page, `dir="rtl"`) || !strings.Contains(page, "مدل‌ها") || !strings.Contains(page, "۰٫۰۵") {
		t.Errorf("GET /models in Persian: want rtl, Persian text and digits:\n%s", page)
	}
}

// The overview shows the credits and the usage per day and per model.
func TestBuyer_Overview(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	acct := buyerAcct(t, env)
	u := buyerLogIn(t, env, acct, store.RoleBuyer)
	client := env.Client()
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/qwen-2.5-7b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count me")},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the usage", func() bool {
		us, err := env.Store.Usages(ctx, acct, 1)
		return err == nil && len(us) == 1
	})
	b, err := env.Store.Balance(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	avail := console.USD(b.Credits - b.Held)
	status, page := u.get("/buyer")
	credits := regexp.MustCompile(`<dd id="credits">([^<]*)</dd>`).FindStringSubmatch(page)
	if status != http.StatusOK || credits == nil || credits[1] != avail {
		t.Fatalf("GET /buyer: %d, #credits %q; want %s:\n%s", status, credits, avail, page)
	}
	if !strings.Contains(page, `<tr data-model="sim/qwen-2.5-7b">`) || strings.Count(page, "<svg") < 6 || !strings.Contains(page, `id="total-requests">1<`) {
		t.Errorf("GET /buyer: want the usage per model, six charts and one request:\n%s", page)
	}
	// In Persian too.
	if status, page := u.get("/buyer", "Cookie", buyerLangCookie+"=fa"); status != http.StatusOK || !strings.Contains(page, "اعتبار") {
		t.Errorf("GET /buyer in Persian: %d", status)
	}
}

// buyerFailingUsage is a store whose usage per day cannot be read.
type buyerFailingUsage struct{ store.Store }

func (buyerFailingUsage) UsageByDay(context.Context, string, time.Time) ([]store.UsageDay, error) {
	return nil, errors.New("no usage today")
}

// When the usage cannot be read, the overview still shows the credits, and says so.
func TestBuyer_OverviewWithoutUsage(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	acct := buyerAcct(t, env)
	c, err := console.New(console.Config{Store: buyerFailingUsage{env.Store}, Fleet: env.Coordinator().Fleet})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	u := buyerLogIn(t, env, acct, store.RoleBuyer)
	u.base = srv.URL
	status, page := u.get("/buyer")
	b, err := env.Store.Balance(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	credits := `id="credits">` + console.USD(b.Credits-b.Held) + `<`
	if status != http.StatusOK || !strings.Contains(page, credits) || !strings.Contains(page, "Your usage cannot be shown") || strings.Contains(page, "<svg") {
		t.Errorf("GET /buyer without usage: %d; want %s and a notice:\n%s", status, credits, page)
	}
}

// requestsServed is the coordinator's count of chat requests served whole
// (shareai_requests_total{endpoint="chat",outcome="ok"}), summed over models.
func requestsServed(t *testing.T, env *testenv.Env) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	env.Coordinator().MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	n := 0.0
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "shareai_requests_total{") && strings.Contains(line, `endpoint="chat"`) && strings.Contains(line, `outcome="ok"`) {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += f
		}
	}
	return n
}

// The model roulette's page compares the arms of each split the account used: requests,
// weights, latencies, error rate, ratings and their mean; another account's splits are not
// shown.
func TestBuyer_Splits(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	acct := buyerAcct(t, env)
	u := buyerLogIn(t, env, acct, store.RoleBuyer)
	if status, page := u.get("/buyer/splits"); status != http.StatusOK || !strings.Contains(page, "No request has used a split yet.") ||
		!strings.Contains(page, `href="/buyer/splits" aria-current="page"`) {
		t.Fatalf("GET /buyer/splits before any split: %d; want 200 saying none, linked in the nav:\n%s", status, page)
	}
	client := env.Client()
	var ids []string
	for i := range 4 {
		var raw *http.Response
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "sim/llama-3.1-8b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("split me")}, Seed: openai.Int(int64(i)),
		}, option.WithJSONSet("split", map[string]any{"sim/qwen-2.5-7b": 0.5}), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, raw.Header.Get("X-Request-Id"))
	}
	for _, id := range ids {
		env.WaitFor("the request's usage", func() bool { _, err := env.Store.UsageByRequest(ctx, id); return err == nil })
	}
	rec, _ := env.Store.UsageByRequest(ctx, ids[0])
	if err := env.Store.SetFeedback(ctx, &store.Feedback{RequestID: ids[0], AccountID: acct, Score: 0.75, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	status, page := u.get("/buyer/splits")
	table := regexp.MustCompile(`(?s)<table class="split" data-split="sim/llama-3.1-8b=0.5,sim/qwen-2.5-7b=0.5">.*?</table>`).FindString(page)
	if status != http.StatusOK || table == "" {
		t.Fatalf("GET /buyer/splits: %d; want the split's table:\n%s", status, page)
	}
	for _, model := range []string{"sim/llama-3.1-8b", "sim/qwen-2.5-7b"} {
		row := regexp.MustCompile(`(?s)<tr data-model="` + model + `">.*?</tr>`).FindString(table)
		cells := regexp.MustCompile(`<td class="num">(.*?)</td>`).FindAllStringSubmatch(row, -1)
		if len(cells) != 9 || cells[0][1] != "0.5" || cells[1][1] != "2" || !strings.HasSuffix(cells[4][1], " ms") || cells[6][1] != "0%" {
			t.Errorf("%s's row %q; want weight 0.5, 2 requests, latencies in ms, no errors", model, row)
			continue
		}
		if rated := model == rec.Model; rated != (cells[7][1] == "1" && cells[8][1] == "0.75") {
			t.Errorf("%s's ratings: %q and %q; want 1 at 0.75 for %s, which served the rated request, none otherwise", model, cells[7][1], cells[8][1], rec.Model)
		}
	}
	other, _ := buyerOther(t, env, "other-buyer")
	if _, page := buyerLogIn(t, env, other.ID, store.RoleBuyer).get("/buyer/splits"); strings.Contains(page, `class="split"`) {
		t.Errorf("another account sees the splits:\n%s", page)
	}
}
