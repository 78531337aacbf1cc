package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// consoleKeyName named the short-lived keys the playground made for each chat, before it ran
// chats through the request core for the account itself. Accounts may still hold them, all
// revoked: a user cannot create a key of that name, and the keys page leaves the revoked ones
// out.
const consoleKeyName = "console"

// Bounds of the key form's fields.
const (
	maxKeyName    = 64
	maxKeyModels  = 32
	maxModelName  = 200
	maxRoutingLen = 4096
)

// keysPage is /buyer/keys's data.
type keysPage struct {
	Keys []keyRow
	// NewKey is the secret of the key just created: rendered once, from the POST that made it,
	// and never stored, redirected with or put in a cookie.
	NewKey   string
	NewKeyID string
	Form     keyForm // the form as sent, when it is shown again with an error
	Error    string  // a catalogue key, with ErrorArg its detail
	ErrorArg string
	Periods  []string
	Tiers    []string // the service tiers a key may default to, by OpenAI's names
}

// keyRow is one key of the table.
type keyRow struct {
	ID        string
	Name      string
	Prefix    string
	CreatedAt time.Time
	RevokedAt time.Time
	Revoked   bool
	Models    []string
	Routing   string        // the JSON of the key's provider object; "" when none
	Split     string        // the JSON of the key's default split; "" when none
	Caps      []store.Spend // the key's spend caps in their current windows
	Month     money.Nanos   // spent this UTC month
	Limits    store.RateLimits
	Tier      string // the key's default service tier, tier.Tier's String; "" for silver
}

// keyForm is the creation form's fields.
type keyForm struct {
	Name, Models, Routing, Limit, Period string
	Split                                string // the JSON of a request's split; empty: none
	RPM, TPM, Concurrent                 string // rate limits; empty: the coordinator's
	ServiceTier                          string // by OpenAI's name; empty: default
}

func (c *Console) buyerKeys(w http.ResponseWriter, r *http.Request) error {
	return c.renderKeys(w, r, http.StatusOK, keysPage{})
}

// renderKeys renders the keys page with the account's keys added to p.
func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, status int, p keysPage) error {
	ctx, acct, now := r.Context(), sessionOf(r).user.AccountID, c.cfg.Now()
	keys, err := c.cfg.Store.Keys(ctx, acct, store.KeyBuyer)
	if err != nil {
		return err
	}
	var scopes []string
	for _, k := range keys {
		if !k.Revoked() {
			scopes = append(scopes, store.KeyScope(k.ID))
		}
	}
	caps := map[string][]store.Spend{}
	if len(scopes) > 0 {
		spends, err := c.cfg.Store.Spending(ctx, now, scopes...)
		if err != nil {
			return err
		}
		for _, sp := range spends {
			caps[sp.Scope] = append(caps[sp.Scope], sp)
		}
	}
	month := store.WindowStart(store.Monthly, now)
	for _, k := range keys {
		if k.Name == consoleKeyName && k.Revoked() {
			continue // the playground's, one a chat
		}
		row := keyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt,
			Revoked: k.Revoked(), Models: k.Models, Routing: string(k.Routing), Split: string(k.Split), Caps: caps[store.KeyScope(k.ID)], Limits: k.Limits,
			Tier: listedTier(k)}
		if !k.Revoked() {
			if row.Month, err = c.cfg.Store.KeyUsage(ctx, acct, k.ID, month); err != nil {
				return err
			}
		}
		p.Keys = append(p.Keys, row)
	}
	if p.Form.Period == "" {
		p.Form.Period = store.Monthly
	}
	p.Periods = []string{store.Daily, store.Weekly, store.Monthly}
	if p.Form.ServiceTier == "" {
		p.Form.ServiceTier = tier.Silver.OpenAI()
	}
	for _, t := range tier.All {
		p.Tiers = append(p.Tiers, t.OpenAI())
	}
	// The page may hold a secret: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, r, status, "buyer_keys", p)
	return nil
}

// listedTier is a key's default service tier as the list shows it, beside its routing
// defaults: "" for silver, the tier of any request that names none.
func listedTier(k *store.Key) string {
	if t, err := tier.Parse(k.ServiceTier); err == nil && t != tier.Silver {
		return t.String()
	}
	return ""
}

// keyFormError is a field of the key form that cannot be used: Key is the catalogue's message
// and Arg its detail.
type keyFormError struct{ Key, Arg string }

func (e *keyFormError) Error() string { return e.Key + ": " + e.Arg }

// parseKeyForm reads the creation form into a key to create (without its id or secret) and its
// cap (nil when none).
func parseKeyForm(f keyForm) (models []string, routing []byte, keyCap *store.Cap, err error) {
	switch {
	case strings.TrimSpace(f.Name) == "":
		return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.name_missing"}
	case utf8.RuneCountInString(f.Name) > maxKeyName:
		return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.name_long"}
	case strings.EqualFold(strings.TrimSpace(f.Name), consoleKeyName):
		return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.name_reserved", Arg: consoleKeyName}
	}
	for m := range strings.SplitSeq(f.Models, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if len(m) > maxModelName {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.models", Arg: m[:maxModelName]}
		}
		models = append(models, m)
	}
	if len(models) > maxKeyModels {
		return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.models_many"}
	}
	if s := strings.TrimSpace(f.Routing); s != "" && s != "null" && s != "{}" {
		if len(s) > maxRoutingLen {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.routing", Arg: "too long"}
		}
		if _, err := matcher.ParsePrefs(json.RawMessage(s)); err != nil {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.routing", Arg: err.Error()}
		}
		// Stored compact, as the API reads it.
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err != nil {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.routing", Arg: err.Error()}
		}
		routing = buf.Bytes()
	}
	if s := strings.TrimSpace(f.Limit); s != "" {
		n, err := money.ParseUSD(s)
		if err != nil || n <= 0 {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.limit", Arg: s}
		}
		if !store.ValidPeriod(f.Period) {
			return nil, nil, nil, &keyFormError{Key: "buyer.keys.error.period", Arg: f.Period}
		}
		keyCap = &store.Cap{Period: f.Period, Limit: n}
	}
	return models, routing, keyCap, nil
}

// parseKeyLimits reads the creation form's rate limits: each empty (the coordinator's) or a
// whole number from 1 to the coordinator's limit, if it has one. A buyer may tighten the
// coordinator's limits, not lift them.
func parseKeyLimits(f keyForm, most store.RateLimits) (store.RateLimits, error) {
	var l store.RateLimits
	for _, fl := range []struct {
		text string
		most int
		v    *int
	}{{f.RPM, most.RequestsPerMinute, &l.RequestsPerMinute}, {f.TPM, most.TokensPerMinute, &l.TokensPerMinute}, {f.Concurrent, most.Concurrent, &l.Concurrent}} {
		s := strings.TrimSpace(fl.text)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		switch {
		case err != nil || n < 1:
			return l, &keyFormError{Key: "buyer.keys.error.rate", Arg: s}
		case fl.most > 0 && n > fl.most:
			return l, &keyFormError{Key: "buyer.keys.error.rate_max", Arg: strconv.Itoa(fl.most)}
		}
		*fl.v = n
	}
	return l, nil
}

// parseKeyTier reads the creation form's service tier, by OpenAI's or ShareAI's name, into the
// name a key stores: tier.Tier's String.
func parseKeyTier(f keyForm) (string, error) {
	t, err := tier.Parse(strings.TrimSpace(f.ServiceTier))
	if err != nil {
		return "", &keyFormError{Key: "buyer.keys.error.tier", Arg: f.ServiceTier}
	}
	return t.String(), nil
}

// parseKeySplit reads the creation form's default split, as ops.CreateKey checks it.
func parseKeySplit(f keyForm, models []string) ([]byte, error) {
	s := strings.TrimSpace(f.Split)
	if len(s) > maxRoutingLen {
		return nil, &keyFormError{Key: "buyer.keys.error.split", Arg: "too long"}
	}
	split, err := ops.KeySplit([]byte(s), models)
	if err != nil {
		return nil, &keyFormError{Key: "buyer.keys.error.split", Arg: err.Error()}
	}
	return split, nil
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) error {
	ctx, acct := r.Context(), sessionOf(r).user.AccountID
	f := keyForm{Name: r.PostFormValue("name"), Models: r.PostFormValue("models"), Routing: r.PostFormValue("routing"),
		Limit: r.PostFormValue("limit"), Period: r.PostFormValue("period"),
		RPM: r.PostFormValue("rpm"), TPM: r.PostFormValue("tpm"), Concurrent: r.PostFormValue("concurrent"),
		ServiceTier: r.PostFormValue("service_tier"), Split: r.PostFormValue("split")}
	models, routing, keyCap, err := parseKeyForm(f)
	var (
		limits  store.RateLimits
		keyTier string
		split   []byte
	)
	if err == nil {
		split, err = parseKeySplit(f, models)
	}
	if err == nil {
		limits, err = parseKeyLimits(f, c.cfg.KeyLimits)
	}
	if err == nil {
		keyTier, err = parseKeyTier(f)
	}
	if fe := (*keyFormError)(nil); errors.As(err, &fe) {
		return c.renderKeys(w, r, http.StatusBadRequest, keysPage{Form: f, Error: fe.Key, ErrorArg: fe.Arg})
	} else if err != nil {
		return err
	}
	secret, k, err := ops.CreateKey(ctx, c.cfg.Store, ops.NewKey{AccountID: acct, Kind: store.KeyBuyer, Name: f.Name,
		Models: models, Routing: routing, Split: split, Limits: limits, ServiceTier: keyTier, Cap: keyCap, At: c.cfg.Now()})
	if err != nil {
		return err
	}
	c.log.InfoContext(r.Context(), "console: key created", "account", acct, "key", k.ID, "prefix", k.Prefix)
	// Rendered from the POST, not redirected: the secret must not travel in a URL or a cookie.
	return c.renderKeys(w, r, http.StatusOK, keysPage{NewKey: secret, NewKeyID: k.ID})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) error {
	ctx, acct, id := r.Context(), sessionOf(r).user.AccountID, r.PathValue("id")
	keys, err := c.cfg.Store.Keys(ctx, acct, store.KeyBuyer)
	if err != nil {
		return err
	}
	var k *store.Key
	for _, kk := range keys {
		if kk.ID == id {
			k = kk
		}
	}
	if k == nil {
		// Another account's key answers as an unknown one.
		return store.ErrNotFound
	}
	if !k.Revoked() {
		if _, err := c.cfg.Store.RevokeKey(ctx, k.ID, c.cfg.Now()); err != nil {
			return err
		}
		c.log.InfoContext(r.Context(), "console: key revoked", "account", acct, "key", k.ID, "prefix", k.Prefix)
	}
	c.redirect(w, r, "/buyer/keys", "buyer.flash.key_revoked")
	return nil
}
