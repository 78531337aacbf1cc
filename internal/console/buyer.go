package console

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// The buyer's pages:
//
//	GET  /buyer                                 overview: credits, usage per day and per model
//	GET  /buyer/keys                            API keys (buyer_keys.go)
//	POST /buyer/keys                            create one, shown once
//	POST /buyer/keys/{id}/revoke                revoke one
//	GET  /buyer/requests                        the request log (buyer_requests.go)
//	GET  /buyer/requests/{id}                   one request, with its receipts
//	GET  /buyer/requests/{id}/receipts.json     its receipts, for 'shareai receipt verify'
//	GET  /buyer/batches                         the account's batches, with progress (buyer_batches.go)
//	GET  /buyer/batches/{id}                    one batch: its status, times, errors and files
//	POST /buyer/batches/{id}/cancel             cancel it, as POST /v1/batches/{id}/cancel
//	GET  /buyer/files/{id}/content              download a file: a batch's input, output or errors
//	GET  /buyer/splits                          the model roulette's arms compared (buyer_splits.go)
//	GET  /buyer/playground                      try a model (buyer_playground.go)
//	POST /buyer/playground/chat                 stream an answer
//	GET  /models                                the models served now (market.go), any user
//
// Every page shows the logged-in user's account only; an id of another account's key,
// request, batch or file answers 404, as an unknown id does. The batch pages are there when
// the console has batches (Config.Batches).
func (c *Console) registerBuyer(mux *http.ServeMux) {
	mux.Handle("GET /buyer", c.as(store.RoleBuyer, c.buyerOverview))
	mux.Handle("GET /buyer/keys", c.as(store.RoleBuyer, c.buyerKeys))
	mux.Handle("POST /buyer/keys", c.as(store.RoleBuyer, c.createKey))
	mux.Handle("POST /buyer/keys/{id}/revoke", c.as(store.RoleBuyer, c.revokeKey))
	mux.Handle("GET /buyer/requests", c.as(store.RoleBuyer, c.buyerRequests))
	mux.Handle("GET /buyer/requests/{id}", c.as(store.RoleBuyer, c.buyerRequest))
	mux.Handle("GET /buyer/requests/{id}/receipts.json", c.as(store.RoleBuyer, c.buyerReceipts))
	if c.cfg.Batches != nil {
		mux.Handle("GET /buyer/batches", c.as(store.RoleBuyer, c.buyerBatches))
		mux.Handle("GET /buyer/batches/{id}", c.as(store.RoleBuyer, c.buyerBatch))
		mux.Handle("POST /buyer/batches/{id}/cancel", c.as(store.RoleBuyer, c.cancelBatch))
		mux.Handle("GET /buyer/files/{id}/content", c.as(store.RoleBuyer, c.buyerFileContent))
	}
	mux.Handle("GET /buyer/splits", c.as(store.RoleBuyer, c.buyerSplits))
	mux.Handle("GET /buyer/playground", c.as(store.RoleBuyer, c.playground))
	mux.Handle("POST /buyer/playground/chat", c.as(store.RoleBuyer, c.playgroundChat))
	mux.Handle("GET /models", c.as("", c.models))
}

// usageDays is how far back the overview looks.
const usageDays = 30

// overview is GET /buyer's data.
type overview struct {
	Available money.Nanos // credits less holds: what new requests may use
	Credits   money.Nanos
	Held      money.Nanos
	Deposited money.Nanos
	Spent     money.Nanos

	Days int
	// UsageErr is set when the usage could not be read: the page shows the money without it.
	UsageErr bool
	Totals   usageTotals
	Models   []modelUsage // by cost, most first
	Charts   []Chart      // per day, then per model
}

type usageTotals struct {
	Requests                       int
	PromptTokens, CompletionTokens int64
	Cost                           money.Nanos
}

type modelUsage struct {
	Model string
	usageTotals
}

func (t *usageTotals) add(d store.UsageDay) {
	t.Requests += d.Requests
	t.PromptTokens += d.PromptTokens
	t.CompletionTokens += d.CompletionTokens
	t.Cost += d.Cost
}

func (c *Console) buyerOverview(w http.ResponseWriter, r *http.Request) error {
	ctx, acct := r.Context(), sessionOf(r).user.AccountID
	b, err := c.cfg.Store.Balance(ctx, acct)
	if err != nil {
		return err
	}
	ov := overview{Available: b.Credits - b.Held, Credits: b.Credits, Held: b.Held, Deposited: b.Deposited, Spent: b.Spent, Days: usageDays}
	today := store.WindowStart(store.Daily, c.cfg.Now())
	since := today.AddDate(0, 0, -(usageDays - 1))
	days, err := c.cfg.Store.UsageByDay(ctx, acct, since)
	if err != nil {
		// The money is what matters most: show it, and say the usage is missing.
		c.log.ErrorContext(r.Context(), "console: usage by day", "account", acct, "err", err)
		ov.UsageErr = true
	} else {
		c.summarize(&ov, c.lang(r), days, since)
	}
	c.render(w, r, http.StatusOK, "buyer", ov)
	return nil
}

// summarize fills the overview's totals and charts from the account's usage per day and model.
func (c *Console) summarize(ov *overview, lang string, days []store.UsageDay, since time.Time) {
	T := func(key string) string { return c.i18n.T(lang, key) }
	labels := make([]string, usageDays)
	for i := range labels {
		labels[i] = c.dayLabel(lang, since.AddDate(0, 0, i))
	}
	requests := make([]float64, usageDays)
	prompt := make([]float64, usageDays)
	completion := make([]float64, usageDays)
	cost := make([]float64, usageDays)
	byModel := map[string]*modelUsage{}
	for _, d := range days {
		ov.Totals.add(d)
		m := byModel[d.Model]
		if m == nil {
			m = &modelUsage{Model: d.Model}
			byModel[d.Model] = m
		}
		m.add(d)
		i := int(d.Day.UTC().Sub(since) / (24 * time.Hour))
		if i < 0 || i >= usageDays {
			continue
		}
		requests[i] += float64(d.Requests)
		prompt[i] += float64(d.PromptTokens)
		completion[i] += float64(d.CompletionTokens)
		cost[i] += d.Cost.Float()
	}
	for _, m := range byModel {
		ov.Models = append(ov.Models, *m)
	}
	slices.SortFunc(ov.Models, func(a, b modelUsage) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Model, b.Model))
	})
	ov.Charts = []Chart{
		{Title: T("buyer.overview.chart.requests_day"), Labels: labels, Series: []Series{{Name: T("buyer.overview.requests"), Values: requests}}},
		{Title: T("buyer.overview.chart.tokens_day"), Labels: labels, Series: []Series{
			{Name: T("buyer.overview.prompt_tokens"), Values: prompt}, {Name: T("buyer.overview.completion_tokens"), Values: completion}}},
		{Title: T("buyer.overview.chart.cost_day"), Labels: labels, Unit: UnitUSD, Series: []Series{{Name: T("buyer.overview.cost"), Values: cost}}},
	}
	if len(ov.Models) == 0 {
		return
	}
	var names []string
	var mReq, mTokens, mCost []float64
	for _, m := range ov.Models {
		names = append(names, m.Model)
		mReq = append(mReq, float64(m.Requests))
		mTokens = append(mTokens, float64(m.PromptTokens+m.CompletionTokens))
		mCost = append(mCost, m.Cost.Float())
	}
	ov.Charts = append(ov.Charts,
		Chart{Title: T("buyer.overview.chart.requests_model"), Labels: names, Series: []Series{{Name: T("buyer.overview.requests"), Values: mReq}}},
		Chart{Title: T("buyer.overview.chart.tokens_model"), Labels: names, Series: []Series{{Name: T("buyer.overview.tokens"), Values: mTokens}}},
		Chart{Title: T("buyer.overview.chart.cost_model"), Labels: names, Unit: UnitUSD, Series: []Series{{Name: T("buyer.overview.cost"), Values: mCost}}},
	)
}
