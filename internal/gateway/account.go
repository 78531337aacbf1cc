package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// The reporting endpoints, in OpenRouter's shapes ({"data": {...}}):
//
//	GET /v1/generation?id=ID     one of the caller's requests: tokens, cost, latency, outcome,
//	                             service tier and time queued
//	                             (and GET /v1/generation/receipts?id=ID its receipts: receipt.go)
//	GET /v1/credits              the caller's account: deposited, spent, balance, held
//	GET /v1/key                  the calling key: its spend limits and its usage per period
//	GET /v1/provider/earnings    a provider's earnings per node and day (provider token)
//
// Amounts are USD, written as exact decimal JSON numbers (0.000000123, never 1.23e-07), with
// "_usd" string twins where a client might want the decimal text.
//
// An id-taking endpoint answers an id of another account exactly as an unknown id, 404
// not_found, so that it tells nobody which ids exist.
func (g *Gateway) registerAccount(mux *http.ServeMux) {
	mux.Handle("GET /v1/generation", g.handle(g.generation))
	mux.Handle("GET /v1/credits", g.handle(g.credits))
	mux.Handle("GET /v1/key", g.handle(g.keyInfo))
	mux.Handle("GET /v1/provider/earnings", g.handleAs(store.KeyProvider, g.providerEarnings))
	g.registerReceipts(mux)
}

// usd is an amount of money shown in USD as an exact JSON number.
type usd = api.USD

// data wraps a response body as OpenRouter does.
type data[T any] struct {
	Data T `json:"data"`
}

// Generation is GET /v1/generation's record of one request.
type Generation struct {
	ID               string  `json:"id"`         // the completion's id, chatcmpl-… or cmpl-…
	RequestID        string  `json:"request_id"` // the X-Request-Id, req_…
	Model            string  `json:"model"`
	Endpoint         string  `json:"endpoint"`      // "chat" or "completion"
	NodeID           *string `json:"node_id"`       // null when no node took the request
	Region           *string `json:"region"`        // the serving node's region
	TokensPrompt     int     `json:"tokens_prompt"` // billed
	TokensCompletion int     `json:"tokens_completion"`
	TotalCost        usd     `json:"total_cost"`
	CostUSD          string  `json:"cost_usd"`
	CreatedAt        string  `json:"created_at"` // RFC 3339, UTC
	LatencyMS        int64   `json:"latency_ms"`
	TTFTMS           *int64  `json:"ttft_ms"` // null when no token came
	Streamed         bool    `json:"streamed"`
	Cancelled        bool    `json:"cancelled"`
	Outcome          string  `json:"outcome"` // ok, cancelled, error or rejected
	FinishReason     *string `json:"finish_reason"`
	ServiceTier      string  `json:"service_tier"` // the tier that served it: priority, default or flex
	QueueMS          int64   `json:"queue_ms"`     // waited in the admission queue for a slot
}

// maxIDLen bounds the ids looked up; ours are far shorter.
const maxIDLen = 128

// requestIDOf reads the id a buyer holds: the request id (req_…), or the id of the completion
// (chatcmpl-… for chat, cmpl-… for text), which shares the request id's suffix. endpoint is the
// kind of request the id names, "" for a request id.
func requestIDOf(id string) (requestID, endpoint string, ok bool) {
	if len(id) > maxIDLen {
		return "", "", false
	}
	var suffix string
	switch {
	case strings.HasPrefix(id, "req_"):
		suffix = strings.TrimPrefix(id, "req_")
	case strings.HasPrefix(id, "chatcmpl-"):
		suffix, endpoint = strings.TrimPrefix(id, "chatcmpl-"), protocol.KindChat
	case strings.HasPrefix(id, "cmpl-"):
		suffix, endpoint = strings.TrimPrefix(id, "cmpl-"), protocol.KindCompletion
	}
	if suffix == "" {
		return "", "", false
	}
	return "req_" + suffix, endpoint, true
}

// completionID is the id the request's answer carried.
func completionID(u *store.Usage) string {
	suffix := strings.TrimPrefix(u.RequestID, "req_")
	switch u.Endpoint {
	case protocol.KindChat:
		return "chatcmpl-" + suffix
	case protocol.KindCompletion:
		return "cmpl-" + suffix
	}
	return u.RequestID
}

func (g *Gateway) generation(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		return api.BadRequest("id", api.CodeInvalidValue, "Missing id: GET /v1/generation?id=ID, with the id of a completion (chatcmpl-…, cmpl-…) or the X-Request-Id of a request (req_…).")
	}
	u, err := g.usageOf(r, c, id)
	if err != nil {
		return err
	}
	gen := Generation{
		ID: completionID(u), RequestID: u.RequestID, Model: u.Model, Endpoint: u.Endpoint,
		NodeID: nullable(u.NodeID), Region: nullable(u.Region),
		TokensPrompt: u.PromptTokens, TokensCompletion: u.CompletionTokens,
		TotalCost: usd(u.Cost), CostUSD: u.Cost.String(),
		CreatedAt: u.CreatedAt.UTC().Format(time.RFC3339Nano), LatencyMS: u.Duration.Milliseconds(),
		Streamed: u.Stream, Cancelled: u.Outcome == store.OutcomeCancelled, Outcome: u.Outcome,
		FinishReason: nullable(u.FinishReason),
		ServiceTier:  servedTier(u).OpenAI(), QueueMS: u.QueueTime.Milliseconds(),
	}
	if u.TTFT > 0 {
		ms := u.TTFT.Milliseconds()
		gen.TTFTMS = &ms
	}
	return writeJSON(w, data[Generation]{gen})
}

// usageOf returns the usage record of the caller's request that id names (see requestIDOf),
// or 404 not_found: for an unknown id, and for another account's.
func (g *Gateway) usageOf(r *http.Request, c *call, id string) (*store.Usage, error) {
	notFound := &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "id", Code: api.CodeNotFound,
		Message: fmt.Sprintf("No generation with id '%s' was found for this account. A request is found once it has been billed.", id)}
	requestID, endpoint, ok := requestIDOf(id)
	if !ok {
		return nil, notFound
	}
	u, err := g.cfg.Store.UsageByRequest(r.Context(), requestID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, notFound
	case err != nil:
		return nil, fmt.Errorf("generation %s: %w", requestID, err)
	case u.AccountID != c.key.AccountID, endpoint != "" && u.Endpoint != endpoint:
		return nil, notFound // another account's request answers as an unknown one
	}
	return u, nil
}

// servedTier is the tier that served a request. Records name it as tier.Tier's String; one from
// before tiers names none and was silver, as is a name no version wrote.
func servedTier(u *store.Usage) tier.Tier {
	t, _ := tier.Parse(u.ServiceTier)
	return t
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Credits is GET /v1/credits: the account's money as a buyer.
type Credits struct {
	TotalCredits    usd    `json:"total_credits"` // deposited, ever
	TotalUsage      usd    `json:"total_usage"`   // spent, ever
	Balance         usd    `json:"balance"`       // total_credits - total_usage
	Held            usd    `json:"held"`          // reserved by requests in flight
	Available       usd    `json:"available"`     // balance - held: what new requests may use
	TotalCreditsUSD string `json:"total_credits_usd"`
	TotalUsageUSD   string `json:"total_usage_usd"`
	BalanceUSD      string `json:"balance_usd"`
	HeldUSD         string `json:"held_usd"`
	AvailableUSD    string `json:"available_usd"`
}

func (g *Gateway) credits(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := g.cfg.Store.Balance(r.Context(), c.key.AccountID)
	if err != nil {
		return err
	}
	avail := b.Credits - b.Held
	return writeJSON(w, data[Credits]{Credits{
		TotalCredits: usd(b.Deposited), TotalUsage: usd(b.Spent), Balance: usd(b.Credits), Held: usd(b.Held), Available: usd(avail),
		TotalCreditsUSD: b.Deposited.String(), TotalUsageUSD: b.Spent.String(), BalanceUSD: b.Credits.String(),
		HeldUSD: b.Held.String(), AvailableUSD: avail.String(),
	}})
}

// KeyInfo is GET /v1/key: the calling key, its spend limits and its usage.
type KeyInfo struct {
	Label  string     `json:"label"`
	Prefix string     `json:"prefix"`
	Limits []KeyLimit `json:"limits"` // the key's caps and its account's; [] when none
	Usage  KeyUsage   `json:"usage"`
}

// KeyLimit is a spend cap in its current window. Usage counts what was spent since the
// window's start, before the cap was set or changed too.
type KeyLimit struct {
	Scope          string `json:"scope"`  // "key" or "account"
	Period         string `json:"period"` // daily, weekly or monthly
	Limit          usd    `json:"limit"`
	Usage          usd    `json:"usage"` // spent in the window
	Held           usd    `json:"held"`  // reserved by requests in flight
	LimitRemaining usd    `json:"limit_remaining"`
	ResetsAt       string `json:"resets_at"` // RFC 3339, UTC
}

// KeyUsage is what the key spent in the current UTC day, week (from Monday) and month.
type KeyUsage struct {
	Daily   usd `json:"daily"`
	Weekly  usd `json:"weekly"`
	Monthly usd `json:"monthly"`
}

func (g *Gateway) keyInfo(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx, k, now := r.Context(), c.key, g.cfg.Now()
	spends, err := g.cfg.Store.Spending(ctx, now, store.KeyScope(k.ID), store.AccountScope(k.AccountID))
	if err != nil {
		return err
	}
	info := KeyInfo{Label: k.Name, Prefix: k.Prefix, Limits: []KeyLimit{}}
	for _, sp := range spends {
		scope := "account"
		if sp.Scope == store.KeyScope(k.ID) {
			scope = "key"
		}
		info.Limits = append(info.Limits, KeyLimit{
			Scope: scope, Period: sp.Period, Limit: usd(sp.Limit), Usage: usd(sp.Spent), Held: usd(sp.Held),
			LimitRemaining: usd(max(sp.Limit-sp.Spent-sp.Held, 0)), ResetsAt: sp.ResetsAt.UTC().Format(time.RFC3339),
		})
	}
	for _, p := range []struct {
		period string
		into   *usd
	}{{store.Daily, &info.Usage.Daily}, {store.Weekly, &info.Usage.Weekly}, {store.Monthly, &info.Usage.Monthly}} {
		spent, err := g.cfg.Store.KeyUsage(ctx, k.AccountID, k.ID, store.WindowStart(p.period, now))
		if err != nil {
			return err
		}
		*p.into = usd(spent)
	}
	return writeJSON(w, data[KeyInfo]{info})
}

// Earnings is GET /v1/provider/earnings: a provider's earnings per node and UTC day over the
// last days, newest first, the same earnings by the ask they were billed at, dearest first,
// and the account's totals.
type Earnings struct {
	Since    string        `json:"since"` // the first day counted, YYYY-MM-DD (UTC)
	Days     int           `json:"days"`
	Earnings []NodeEarning `json:"earnings"`
	ByAsk    []AskEarning  `json:"by_ask"`
	Totals   EarningTotals `json:"totals"`
}

// AskEarning is what the provider earned at one ask over the days: Window is the ask
// schedule's window ("" the flat ask), Surge the surge multiplier (1: none); Parts counts the
// requests' parts billed at it.
type AskEarning struct {
	Window string  `json:"window"`
	Surge  float64 `json:"surge"`
	Parts  int     `json:"parts"`
	Earned usd     `json:"earned"`
}

// NodeEarning is what one node earned on one day: Pending is not yet released; Available was
// released, paid out since or not.
type NodeEarning struct {
	Date      string `json:"date"` // YYYY-MM-DD (UTC)
	NodeID    string `json:"node_id"`
	NodeName  string `json:"node_name"`
	Pending   usd    `json:"pending"`
	Available usd    `json:"available"`
}

// EarningTotals are the provider account's money now, all days counted: Pending waits for its
// release, Available can be paid out, PaidOut was.
type EarningTotals struct {
	Pending      usd    `json:"pending"`
	Available    usd    `json:"available"`
	PaidOut      usd    `json:"paid_out"`
	PendingUSD   string `json:"pending_usd"`
	AvailableUSD string `json:"available_usd"`
	PaidOutUSD   string `json:"paid_out_usd"`
}

func (g *Gateway) providerEarnings(w http.ResponseWriter, r *http.Request, c *call) error {
	days, err := daysParam(r, 30)
	if err != nil {
		return err
	}
	ctx, acct := r.Context(), c.key.AccountID
	since := store.WindowStart(store.Daily, g.cfg.Now()).AddDate(0, 0, -(days - 1))
	es, err := g.cfg.Store.Earnings(ctx, acct, since)
	if err != nil {
		return err
	}
	b, err := g.cfg.Store.Balance(ctx, acct)
	if err != nil {
		return err
	}
	out := Earnings{Since: since.Format(time.DateOnly), Days: days, Earnings: []NodeEarning{}, Totals: EarningTotals{
		Pending: usd(b.Pending), Available: usd(b.Available), PaidOut: usd(b.PaidOut),
		PendingUSD: b.Pending.String(), AvailableUSD: b.Available.String(), PaidOutUSD: b.PaidOut.String(),
	}}
	names := map[string]string{}
	for _, e := range es {
		name, ok := names[e.NodeID]
		if !ok {
			name, err = g.nodeName(ctx, e.NodeID)
			if err != nil {
				return err
			}
			names[e.NodeID] = name
		}
		out.Earnings = append(out.Earnings, NodeEarning{Date: e.Day.UTC().Format(time.DateOnly), NodeID: e.NodeID, NodeName: name,
			Pending: usd(e.Pending), Available: usd(e.Available)})
	}
	byAsk, err := g.cfg.Store.EarningsByAsk(ctx, acct, since)
	if err != nil {
		return err
	}
	out.ByAsk = make([]AskEarning, 0, len(byAsk))
	for _, e := range byAsk {
		out.ByAsk = append(out.ByAsk, AskEarning{Window: e.Window, Surge: float64(e.Surge) / 10000, Parts: e.Parts, Earned: usd(e.Earned)})
	}
	return writeJSON(w, data[Earnings]{out})
}

// nodeName is a node's name, "" when the node is not on record.
func (g *Gateway) nodeName(ctx context.Context, id string) (string, error) {
	n, err := g.cfg.Store.Node(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return n.Name, nil
}

// maxDays bounds a report's ?days=.
const maxDays = 366

// daysParam reads a report's ?days=, from 1 to maxDays; def when absent.
func daysParam(r *http.Request, def int) (int, error) {
	s := r.URL.Query().Get("days")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxDays {
		return 0, api.BadRequest("days", api.CodeInvalidValue, "days must be a whole number from 1 to %d; got '%s'.", maxDays, s)
	}
	return n, nil
}
