package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// The reporting endpoints' bodies as a client reads them; amounts as json.Number, to compare
// their exact decimal text.
type generationBody struct {
	Data struct {
		ID               string      `json:"id"`
		RequestID        string      `json:"request_id"`
		Model            string      `json:"model"`
		Endpoint         string      `json:"endpoint"`
		NodeID           *string     `json:"node_id"`
		Region           *string     `json:"region"`
		TokensPrompt     int         `json:"tokens_prompt"`
		TokensCompletion int         `json:"tokens_completion"`
		TotalCost        json.Number `json:"total_cost"`
		CostUSD          string      `json:"cost_usd"`
		CreatedAt        string      `json:"created_at"`
		LatencyMS        int64       `json:"latency_ms"`
		TTFTMS           *int64      `json:"ttft_ms"`
		Streamed         bool        `json:"streamed"`
		Cancelled        bool        `json:"cancelled"`
		Outcome          string      `json:"outcome"`
		FinishReason     *string     `json:"finish_reason"`
		ServiceTier      string      `json:"service_tier"`
		QueueMS          int64       `json:"queue_ms"`
	} `json:"data"`
}

type creditsBody struct {
	Data struct {
		TotalCredits    json.Number `json:"total_credits"`
		TotalUsage      json.Number `json:"total_usage"`
		Balance         json.Number `json:"balance"`
		Held            json.Number `json:"held"`
		Available       json.Number `json:"available"`
		TotalCreditsUSD string      `json:"total_credits_usd"`
		TotalUsageUSD   string      `json:"total_usage_usd"`
		BalanceUSD      string      `json:"balance_usd"`
	} `json:"data"`
}

type keyBody struct {
	Data struct {
		Label  string `json:"label"`
		Prefix string `json:"prefix"`
		Limits []struct {
			Scope          string      `json:"scope"`
			Period         string      `json:"period"`
			Limit          json.Number `json:"limit"`
			Usage          json.Number `json:"usage"`
			Held           json.Number `json:"held"`
			LimitRemaining json.Number `json:"limit_remaining"`
			ResetsAt       string      `json:"resets_at"`
		} `json:"limits"`
		Usage struct {
			Daily   json.Number `json:"daily"`
			Weekly  json.Number `json:"weekly"`
			Monthly json.Number `json:"monthly"`
		} `json:"usage"`
	} `json:"data"`
}

type earningsBody struct {
	Data struct {
		Since    string `json:"since"`
		Days     int    `json:"days"`
		Earnings []struct {
			Date      string      `json:"date"`
			NodeID    string      `json:"node_id"`
			NodeName  string      `json:"node_name"`
			Pending   json.Number `json:"pending"`
			Available json.Number `json:"available"`
		} `json:"earnings"`
		Totals struct {
			Pending      json.Number `json:"pending"`
			Available    json.Number `json:"available"`
			PaidOut      json.Number `json:"paid_out"`
			AvailableUSD string      `json:"available_usd"`
		} `json:"totals"`
	} `json:"data"`
}

// get calls a GET endpoint of the buyer API with the client's key and decodes its body into v.
// It returns the raw body.
func get(t *testing.T, client openai.Client, path string, v any) ([]byte, error) {
	t.Helper()
	var raw []byte
	if err := client.Get(context.Background(), path, nil, &raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, raw)
	}
	return raw, nil
}

func mustGet(t *testing.T, client openai.Client, path string, v any) []byte {
	t.Helper()
	raw, err := get(t, client, path, v)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return raw
}

// dataKeys lists the keys of a {"data": {...}} body.
func dataKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	var m struct{ Data map[string]json.RawMessage }
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m.Data))
}

// billed waits until a request's record is written and returns it.
func billed(t *testing.T, env *testenv.Env, requestID string) *store.Usage {
	t.Helper()
	var rec *store.Usage
	env.WaitFor("request "+requestID+" to be billed", func() bool {
		rec, _ = env.Store.UsageByRequest(context.Background(), requestID)
		return rec != nil
	})
	return rec
}

// usageCost reads usage.cost, as the answer reported it, in its exact decimal text.
func usageCost(t *testing.T, u openai.CompletionUsage) string {
	t.Helper()
	var v struct {
		Cost json.Number `json:"cost"`
	}
	if err := json.Unmarshal([]byte(u.RawJSON()), &v); err != nil || v.Cost == "" {
		t.Fatalf("usage %s has no cost: %v", u.RawJSON(), err)
	}
	return v.Cost.String()
}

func generationPath(id string) string { return "generation?id=" + url.QueryEscape(id) }

func TestGeneration(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	ctx := context.Background()

	// A chat completion, found by its request id and by its completion id.
	var resp *http.Response
	got, err := client.Chat.Completions.New(ctx, chatParams("What did this cost?", 3), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	reqID := resp.Header.Get(gateway.HeaderRequestID)
	rec := billed(t, env, reqID)
	cost := usageCost(t, got.Usage)
	if want := expectedCost(int(got.Usage.PromptTokens), int(got.Usage.CompletionTokens)); cost != want.String() || rec.Cost != want {
		t.Fatalf("usage.cost %s, record %s; want %s", cost, rec.Cost, want)
	}
	for _, id := range []string{reqID, got.ID} {
		var g generationBody
		raw := mustGet(t, client, generationPath(id), &g)
		d := g.Data
		if d.ID != got.ID || d.RequestID != reqID || d.Model != model || d.Endpoint != "chat" {
			t.Errorf("?id=%s: id, request_id, model, endpoint = %q, %q, %q, %q; want %q, %q, %q, chat", id, d.ID, d.RequestID, d.Model, d.Endpoint, got.ID, reqID, model)
		}
		if d.NodeID == nil || *d.NodeID != resp.Header.Get(gateway.HeaderNode) || d.Region != nil {
			t.Errorf("?id=%s: node_id %v, region %v; want %s and null (the test nodes have no region)", id, d.NodeID, d.Region, resp.Header.Get(gateway.HeaderNode))
		}
		if d.TokensPrompt != int(got.Usage.PromptTokens) || d.TokensCompletion != int(got.Usage.CompletionTokens) {
			t.Errorf("?id=%s: tokens %d + %d; want the answer's usage %d + %d", id, d.TokensPrompt, d.TokensCompletion, got.Usage.PromptTokens, got.Usage.CompletionTokens)
		}
		if d.TotalCost.String() != cost || d.CostUSD != cost {
			t.Errorf("?id=%s: total_cost %s, cost_usd %q; want usage.cost %s", id, d.TotalCost, d.CostUSD, cost)
		}
		if f, _ := d.TotalCost.Float64(); f != rec.Cost.Float() {
			t.Errorf("?id=%s: total_cost as a float %v; want %v", id, f, rec.Cost.Float())
		}
		created, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
		if err != nil || !created.Equal(rec.CreatedAt) || !strings.HasSuffix(d.CreatedAt, "Z") {
			t.Errorf("?id=%s: created_at %q; want %s in UTC", id, d.CreatedAt, rec.CreatedAt)
		}
		if d.LatencyMS != rec.Duration.Milliseconds() || d.TTFTMS != nil && *d.TTFTMS != rec.TTFT.Milliseconds() {
			t.Errorf("?id=%s: latency %d ms, ttft %v; want %d ms, %d ms", id, d.LatencyMS, d.TTFTMS, rec.Duration.Milliseconds(), rec.TTFT.Milliseconds())
		}
		if d.Streamed || d.Cancelled || d.Outcome != "ok" || d.FinishReason == nil || *d.FinishReason != "stop" {
			t.Errorf("?id=%s: streamed %v, cancelled %v, outcome %q, finish_reason %v; want false, false, ok, stop", id, d.Streamed, d.Cancelled, d.Outcome, d.FinishReason)
		}
		if d.ServiceTier != "default" || d.QueueMS != rec.QueueTime.Milliseconds() {
			t.Errorf("?id=%s: service_tier %q, queue_ms %d; want default (the request named none) and %d", id, d.ServiceTier, d.QueueMS, rec.QueueTime.Milliseconds())
		}
		want := []string{"cancelled", "cost_usd", "created_at", "endpoint", "finish_reason", "id", "latency_ms", "model", "node_id", "outcome",
			"queue_ms", "region", "request_id", "service_tier", "streamed", "tokens_completion", "tokens_prompt", "total_cost", "ttft_ms"}
		if keys := dataKeys(t, raw); !slices.Equal(keys, want) {
			t.Errorf("?id=%s: fields %v; want %v", id, keys, want)
		}
	}

	// A streamed text completion, found by its cmpl- id.
	sresp := env.Post("/completions", `{"model":"`+model+`","prompt":"Once upon a time","stream":true,"max_tokens":16}`)
	io.Copy(io.Discard, sresp.Body)
	sresp.Body.Close()
	sreqID := sresp.Header.Get(gateway.HeaderRequestID)
	srec := billed(t, env, sreqID)
	cmplID := "cmpl-" + strings.TrimPrefix(sreqID, "req_")
	var g generationBody
	mustGet(t, client, generationPath(cmplID), &g)
	if d := g.Data; d.ID != cmplID || d.Endpoint != "completion" || !d.Streamed || d.TTFTMS == nil || *d.TTFTMS != srec.TTFT.Milliseconds() || d.CostUSD != srec.Cost.String() {
		t.Errorf("streamed completion: %+v; want id %s, streamed, ttft %v, cost %s", d, cmplID, srec.TTFT, srec.Cost)
	}

	// Ids that name nothing of this account: 404 not_found. An id of the wrong kind (a chat's
	// suffix as a cmpl- id) names nothing either.
	for _, id := range []string{
		"req_doesnotexist", "chatcmpl-doesnotexist", "cmpl-" + strings.TrimPrefix(reqID, "req_"),
		"chatcmpl-" + strings.TrimPrefix(sreqID, "req_"), "gen-123", "req_", "chatcmpl-", strings.TrimPrefix(reqID, "req_"),
		"req_" + strings.Repeat("a", 200),
	} {
		_, err := get(t, client, generationPath(id), &g)
		e := assertAPIError(t, err, http.StatusNotFound, "not_found")
		if e.Param != "id" || e.Type != "invalid_request_error" {
			t.Errorf("?id=%s: param %q, type %q; want id, invalid_request_error", id, e.Param, e.Type)
		}
	}
	_, err = get(t, client, "generation", &g)
	if e := assertAPIError(t, err, http.StatusBadRequest, "invalid_value"); e.Param != "id" {
		t.Errorf("no id: param %q, want id", e.Param)
	}
	_, err = get(t, env.Client(option.WithAPIKey("sk-wrong")), generationPath(reqID), &g)
	assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")
}

// GET /v1/generation names the tier that served a request by OpenAI's service_tier name, and
// how long it waited in the queue; a record from before tiers was served at default.
func TestGeneration_ServiceTier(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id, stored string
		queued     time.Duration
		want       string
	}{
		{"req_gold", "gold", 0, "priority"},
		{"req_silver", "silver", 20 * time.Millisecond, "default"},
		{"req_bronze", "bronze", 1500*time.Millisecond + 900*time.Microsecond, "flex"},
		{"req_before_tiers", "", 0, "default"},
	} {
		u := &store.Usage{RequestID: tt.id, AccountID: k.AccountID, KeyID: k.ID, Model: model, Endpoint: "chat",
			Outcome: store.OutcomeOK, CreatedAt: time.Now(), ServiceTier: tt.stored, QueueTime: tt.queued}
		if err := env.Store.InsertUsage(ctx, []*store.Usage{u}); err != nil {
			t.Fatal(err)
		}
		var g generationBody
		mustGet(t, env.Client(), generationPath(tt.id), &g)
		if g.Data.ServiceTier != tt.want || g.Data.QueueMS != tt.queued.Milliseconds() {
			t.Errorf("%s (tier %q, queued %v): service_tier %q, queue_ms %d; want %q, %d", tt.id, tt.stored, tt.queued,
				g.Data.ServiceTier, g.Data.QueueMS, tt.want, tt.queued.Milliseconds())
		}
	}
}

// A request's tier, named in the request or by its key's default, is what its record and
// GET /v1/generation say served it.
func TestGeneration_ServiceTierServed(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	secret, flexKey := store.NewKey(k.AccountID, store.KeyBuyer, "flex by default", time.Now())
	flexKey.ServiceTier = "bronze"
	if err := env.Store.CreateKey(ctx, flexKey); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		client openai.Client
		tier   openai.ChatCompletionNewParamsServiceTier
		want   string
	}{
		{"named in the request", env.Client(), openai.ChatCompletionNewParamsServiceTierPriority, "priority"},
		{"none: the key's default", env.Client(), "", "default"},
		{"none: a flex key's default", env.Client(option.WithAPIKey(secret)), "", "flex"},
		{"the request's own over its key's", env.Client(option.WithAPIKey(secret)), openai.ChatCompletionNewParamsServiceTierPriority, "priority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			params := chatParams("Which tier am I?", 3)
			params.ServiceTier = tt.tier
			var resp *http.Response
			if _, err := tt.client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp)); err != nil {
				t.Fatal(err)
			}
			id := resp.Header.Get(gateway.HeaderRequestID)
			billed(t, env, id)
			var g generationBody
			mustGet(t, tt.client, generationPath(id), &g)
			if g.Data.ServiceTier != tt.want {
				t.Errorf("service_tier %q; want %q", g.Data.ServiceTier, tt.want)
			}
		})
	}
}

func TestCreditsAndKey(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}

	var c creditsBody
	mustGet(t, client, "credits", &c)
	if d := c.Data; d.TotalCredits != "1000" || d.TotalUsage != "0" || d.Balance != "1000" || d.Held != "0" || d.Available != "1000" || d.TotalCreditsUSD != "1000" {
		t.Errorf("credits before any request: %+v; want 1000 deposited, nothing used", d)
	}

	// Caps on the key (daily $5) and on the account (monthly $10).
	for _, cp := range []store.Cap{
		{Scope: store.KeyScope(k.ID), Period: store.Daily, Limit: 5 * money.USD},
		{Scope: store.AccountScope(k.AccountID), Period: store.Monthly, Limit: 10 * money.USD},
	} {
		if err := env.Store.SetCap(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	var spent money.Nanos
	for i := range 2 {
		var resp *http.Response
		got, err := client.Chat.Completions.New(ctx, chatParams("Spend a little.", int64(i)), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		rec := billed(t, env, resp.Header.Get(gateway.HeaderRequestID))
		if usageCost(t, got.Usage) != rec.Cost.String() {
			t.Fatalf("usage.cost %s, record %s", usageCost(t, got.Usage), rec.Cost)
		}
		spent += rec.Cost
	}
	now := time.Now()

	b, err := env.Store.Balance(ctx, k.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, client, "credits", &c)
	if d := c.Data; d.TotalCredits.String() != b.Deposited.String() || d.TotalUsage.String() != spent.String() || d.TotalUsage.String() != b.Spent.String() ||
		d.Balance.String() != (1000*money.USD-spent).String() || d.Balance.String() != b.Credits.String() || d.Held != "0" ||
		d.TotalUsageUSD != spent.String() || d.BalanceUSD != b.Credits.String() {
		t.Errorf("credits %+v; want deposited %s, used %s, balance %s (store %+v)", d, b.Deposited, spent, 1000*money.USD-spent, b)
	}

	var kb keyBody
	raw := mustGet(t, client, "key", &kb)
	if want := []string{"label", "limits", "prefix", "usage"}; !slices.Equal(dataKeys(t, raw), want) {
		t.Errorf("key fields %v; want %v", dataKeys(t, raw), want)
	}
	d := kb.Data
	if d.Label != k.Name || d.Prefix != k.Prefix {
		t.Errorf("label, prefix = %q, %q; want %q, %q", d.Label, d.Prefix, k.Name, k.Prefix)
	}
	if d.Usage.Daily.String() != spent.String() || d.Usage.Weekly.String() != spent.String() || d.Usage.Monthly.String() != spent.String() {
		t.Errorf("usage %+v; want %s in each period", d.Usage, spent)
	}
	type limit struct{ scope, period, limit, usage, held, remaining, resets string }
	var limits []limit
	for _, l := range d.Limits {
		limits = append(limits, limit{l.Scope, l.Period, l.Limit.String(), l.Usage.String(), l.Held.String(), l.LimitRemaining.String(), l.ResetsAt})
	}
	wantLimits := []limit{
		{"key", "daily", "5", spent.String(), "0", (5*money.USD - spent).String(), store.WindowEnd(store.Daily, now).Format(time.RFC3339)},
		{"account", "monthly", "10", spent.String(), "0", (10*money.USD - spent).String(), store.WindowEnd(store.Monthly, now).Format(time.RFC3339)},
	}
	if !slices.Equal(limits, wantLimits) {
		t.Errorf("limits\n got %v\nwant %v", limits, wantLimits)
	}

	// A second key of the account: no usage of its own, no key limit, the account's limit
	// with the account's spending.
	secret, k2 := store.NewKey(k.AccountID, store.KeyBuyer, "second", time.Now())
	if err := env.Store.CreateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	kb = keyBody{}
	mustGet(t, env.Client(option.WithAPIKey(secret)), "key", &kb)
	if d := kb.Data; d.Label != "second" || d.Usage.Daily != "0" || d.Usage.Monthly != "0" || len(d.Limits) != 1 ||
		d.Limits[0].Scope != "account" || d.Limits[0].Usage.String() != spent.String() {
		t.Errorf("second key: %+v; want no usage and only the account's limit", d)
	}
	// A key with no limits lists none, as [] rather than null.
	if err := env.Store.SetCap(ctx, store.Cap{Scope: store.AccountScope(k.AccountID), Period: store.Monthly}); err != nil {
		t.Fatal(err)
	}
	raw = mustGet(t, env.Client(option.WithAPIKey(secret)), "key", &kb)
	if !strings.Contains(string(raw), `"limits":[]`) {
		t.Errorf("key without limits: %s; want limits []", raw)
	}
}

func TestProviderEarnings(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2))
	client := env.Client()
	ctx := context.Background()
	pk, err := env.Store.KeyByHash(ctx, store.HashSecret(env.ProviderToken))
	if err != nil {
		t.Fatal(err)
	}
	provider := env.Client(option.WithAPIKey(env.ProviderToken))
	path := "provider/earnings?days=30"

	var e earningsBody
	mustGet(t, provider, path, &e)
	today := time.Now().UTC().Format(time.DateOnly)
	if d := e.Data; d.Days != 30 || d.Since != time.Now().UTC().AddDate(0, 0, -29).Format(time.DateOnly) || len(d.Earnings) != 0 || d.Totals.Pending != "0" {
		t.Errorf("earnings before any request: %+v; want 30 days from 29 days ago, none", d)
	}

	// What each node earned: the requests' cost less the 5% fee, at the test prices.
	earned := map[string]money.Nanos{}
	var total money.Nanos
	for i := range 6 {
		var resp *http.Response
		got, err := client.Chat.Completions.New(ctx, chatParams("Earn something.", int64(i)), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		rec := billed(t, env, resp.Header.Get(gateway.HeaderRequestID))
		net := money.Price(50_000_000).Cost(int(got.Usage.PromptTokens)) + money.Price(100_000_000).Cost(int(got.Usage.CompletionTokens))
		if rec.Cost != net+money.Fee(net, 500) {
			t.Fatalf("request cost %s; want %s plus the fee", rec.Cost, net)
		}
		earned[rec.NodeID] += net
		total += net
	}
	names := map[string]string{}
	for _, a := range env.Agents {
		n, err := env.Store.Node(ctx, a.NodeID())
		if err != nil {
			t.Fatal(err)
		}
		names[n.ID] = n.Name
	}
	check := func(when string, pending, available money.Nanos, paidOut money.Nanos) {
		t.Helper()
		e = earningsBody{}
		mustGet(t, provider, path, &e)
		got := map[string]money.Nanos{}
		for _, row := range e.Data.Earnings {
			if row.Date != today || row.NodeName != names[row.NodeID] || row.NodeName == "" {
				t.Errorf("%s: row %+v; want today (%s) and the node's name %q", when, row, today, names[row.NodeID])
			}
			p, _ := money.ParseUSD(row.Pending.String())
			a, _ := money.ParseUSD(row.Available.String())
			if pending == 0 && p != 0 || available == 0 && a != 0 {
				t.Errorf("%s: row %+v; want pending %v and available %v", when, row, pending != 0, available != 0)
			}
			got[row.NodeID] += p + a
		}
		if !maps.Equal(got, earned) {
			t.Errorf("%s: per node %v; want %v", when, got, earned)
		}
		tt := e.Data.Totals
		if tt.Pending.String() != pending.String() || tt.Available.String() != available.String() || tt.PaidOut.String() != paidOut.String() || tt.AvailableUSD != available.String() {
			t.Errorf("%s: totals %+v; want pending %s, available %s, paid out %s", when, tt, pending, available, paidOut)
		}
		b, err := env.Store.Balance(ctx, pk.AccountID)
		if err != nil || b.Pending != pending || b.Available != available || b.PaidOut != paidOut {
			t.Errorf("%s: store balance %+v, %v", when, b, err)
		}
	}
	check("pending", total, 0, 0)
	if _, err := env.Store.ReleaseEarnings(ctx, time.Now().Add(73*time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("released", 0, total, 0)
	half := total / 2
	if err := env.Store.Payout(ctx, pk.AccountID, half, "test-payout", time.Now()); err != nil {
		t.Fatal(err)
	}
	check("half paid out", 0, total-half, half)

	e = earningsBody{}
	mustGet(t, provider, "provider/earnings", &e)
	if e.Data.Days != 30 || len(e.Data.Earnings) == 0 {
		t.Errorf("default days: %+v; want 30 with today's rows", e.Data)
	}
	mustGet(t, provider, "provider/earnings?days=1", &e)
	if e.Data.Days != 1 || e.Data.Since != today || len(e.Data.Earnings) == 0 {
		t.Errorf("days=1: %+v; want today only", e.Data)
	}
	for _, days := range []string{"0", "-1", "367", "x", "1.5"} {
		_, err := get(t, provider, "provider/earnings?days="+days, &e)
		if a := assertAPIError(t, err, http.StatusBadRequest, "invalid_value"); a.Param != "days" {
			t.Errorf("days=%s: param %q, want days", days, a.Param)
		}
	}

	// Each API takes its own kind of key only.
	_, err = get(t, client, path, &e)
	if a := assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key"); !strings.Contains(a.Message, "provider token") {
		t.Errorf("buyer key on the provider API: %q; want it to ask for a provider token", a.Message)
	}
	var c creditsBody
	_, err = get(t, provider, "credits", &c)
	assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")
	_, err = get(t, env.Client(option.WithAPIKey("spt-wrong-token")), path, &e)
	assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")
	_, err = get(t, env.Client(option.WithAPIKey("")), path, &e)
	assertAPIError(t, err, http.StatusUnauthorized, "missing_api_key")
	if _, err := env.Store.RevokeKey(ctx, pk.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	env.Coordinator().Gateway.Forget(pk.Hash)
	_, err = get(t, provider, path, &e)
	if a := assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key"); !strings.Contains(a.Message, "revoked") {
		t.Errorf("revoked token: %q; want it to say so", a.Message)
	}
}

// Broken object-level authorization: a second buyer asks for the first buyer's objects by id,
// on every endpoint that takes one, and learns nothing: 404, as for an id that does not exist.
func TestAccount_BOLA(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	alice := env.Client()

	var resp *http.Response
	chat, err := alice.Chat.Completions.New(ctx, chatParams("My secret prompt.", 1), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	chatReq := resp.Header.Get(gateway.HeaderRequestID)
	cresp := env.Post("/completions", `{"model":"`+model+`","prompt":"Another secret","max_tokens":8}`)
	io.Copy(io.Discard, cresp.Body)
	cresp.Body.Close()
	cmplReq := cresp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, chatReq)
	billed(t, env, cmplReq)

	// Mallory: an account of her own, a key, credits.
	m := &store.Account{ID: store.NewID("acct"), Name: "mallory", CreatedAt: time.Now()}
	if err := env.Store.CreateAccount(ctx, m); err != nil {
		t.Fatal(err)
	}
	secret, mk := store.NewKey(m.ID, store.KeyBuyer, "mallory's key", time.Now())
	if err := env.Store.CreateKey(ctx, mk); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Deposit(ctx, m.ID, 5*money.USD, "mallory-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	mallory := env.Client(option.WithAPIKey(secret))

	// Her key works: her own request is hers to read.
	var mresp *http.Response
	if _, err := mallory.Chat.Completions.New(ctx, chatParams("Mine.", 2), option.WithResponseInto(&mresp)); err != nil {
		t.Fatal(err)
	}
	mreq := mresp.Header.Get(gateway.HeaderRequestID)
	billed(t, env, mreq)
	var g generationBody
	mustGet(t, mallory, generationPath(mreq), &g)

	suffix := func(id string) string { return strings.TrimPrefix(id, "req_") }
	// Every id-taking endpoint, with each form of each of Alice's ids.
	aliceIDs := []string{chatReq, chat.ID, cmplReq, "cmpl-" + suffix(cmplReq)}
	endpoints := []struct {
		name string
		path func(id string) string
	}{
		{"generation", generationPath},
		{"generation/receipts", receiptsPath},
	}
	for _, ep := range endpoints {
		for _, id := range aliceIDs {
			t.Run(ep.name+"/"+id, func(t *testing.T) {
				_, err := get(t, mallory, ep.path(id), &g)
				theirs := assertAPIError(t, err, http.StatusNotFound, "not_found")
				// The same answer as for an id that never existed, of the same form.
				unknown := strings.Replace(id, suffix(id)[:8], "zzzzzzzz", 1)
				_, err = get(t, mallory, ep.path(unknown), &g)
				none := assertAPIError(t, err, http.StatusNotFound, "not_found")
				if strings.ReplaceAll(theirs.Message, id, "ID") != strings.ReplaceAll(none.Message, unknown, "ID") || theirs.Param != none.Param || theirs.Type != none.Type {
					t.Errorf("another account's id answers %q, an unknown id %q; want the same", theirs.Message, none.Message)
				}
				if strings.Contains(theirs.RawJSON(), "My secret") || strings.Contains(theirs.RawJSON(), model) {
					t.Errorf("the 404 leaks the request: %s", theirs.RawJSON())
				}
			})
		}
	}
	// Nor can Alice read Mallory's.
	_, err = get(t, alice, generationPath(mreq), &g)
	assertAPIError(t, err, http.StatusNotFound, "not_found")

	// The endpoints without an id answer about the caller's own account.
	var c creditsBody
	mustGet(t, mallory, "credits", &c)
	mrec, _ := env.Store.UsageByRequest(ctx, mreq)
	if c.Data.TotalCredits != "5" || c.Data.TotalUsage.String() != mrec.Cost.String() {
		t.Errorf("mallory's credits %+v; want her own 5 and her one request's %s", c.Data, mrec.Cost)
	}
	var kb keyBody
	mustGet(t, mallory, "key", &kb)
	if kb.Data.Label != "mallory's key" || kb.Data.Usage.Monthly.String() != mrec.Cost.String() {
		t.Errorf("mallory's key %+v; want her own", kb.Data)
	}
}
