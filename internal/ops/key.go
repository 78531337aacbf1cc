package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// NewKey is a key to create, with its rules. A provider token (Kind store.KeyProvider) has
// none of them: it makes no requests and spends nothing.
type NewKey struct {
	AccountID string
	Kind      string // store.KeyBuyer or store.KeyProvider
	Name      string // trimmed
	// Models are the only models the key may use, in order of preference (also its
	// fallbacks); each is trimmed and empty ones are dropped. None: any.
	Models []string
	// Routing is the key's default routing preferences, as the JSON of a request's provider
	// object; it is stored compact. Empty, null or {}: none.
	Routing []byte
	// Limits are the key's rate limits (store.RateLimits: 0 the coordinator's, -1 none).
	Limits store.RateLimits
	// ServiceTier is the tier of the key's requests that name none, by any name tier.Parse
	// takes; "" is silver.
	ServiceTier string
	// Split is the key's default model roulette, as the JSON of a request's split object
	// (api.ParseSplit), for its requests that set none; its arms must be among Models when
	// those are given. It is stored compact. Empty, null or {}: none.
	Split []byte
	// Cap, when not nil, caps what the key spends per Period (its Scope is the key's).
	Cap *store.Cap
	At  time.Time // when: required
}

// CreateKey makes a key, and stores it with its spend cap in one transaction (marking a
// provider token's account as a provider), so that the key never works without its cap. It
// returns the secret, to be shown once (only its hash is stored), and the stored key. A
// running coordinator finds the key at its first use: no live state is changed.
func CreateKey(ctx context.Context, st store.Store, nk NewKey) (secret string, k *store.Key, err error) {
	rules, err := nk.rules()
	if err != nil {
		return "", nil, err
	}
	secret, k = store.NewKey(nk.AccountID, nk.Kind, strings.TrimSpace(nk.Name), nk.At)
	k.Models, k.Routing, k.Limits, k.ServiceTier, k.Split = rules.Models, rules.Routing, rules.Limits, rules.ServiceTier, rules.Split
	var caps []store.Cap
	if nk.Cap != nil {
		c := *nk.Cap
		c.Scope = store.KeyScope(k.ID)
		caps = append(caps, c)
	}
	if err := st.CreateKeyWithCaps(ctx, k, caps); err != nil {
		return "", nil, err
	}
	return secret, k, nil
}

// rules checks nk and returns its rules as a key stores them.
func (nk NewKey) rules() (store.Key, error) {
	bad := func(format string, args ...any) (store.Key, error) {
		return store.Key{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrKey)
	}
	var k store.Key
	switch {
	case nk.AccountID == "":
		return bad("no account")
	case nk.At.IsZero():
		return bad("no time given")
	case nk.Kind != store.KeyBuyer && nk.Kind != store.KeyProvider:
		return bad("kind %q", nk.Kind)
	}
	for _, m := range nk.Models {
		if m = strings.TrimSpace(m); m != "" {
			k.Models = append(k.Models, m)
		}
	}
	if s := bytes.TrimSpace(nk.Routing); len(s) > 0 && string(s) != "null" && string(s) != "{}" {
		if _, err := matcher.ParsePrefs(json.RawMessage(s)); err != nil {
			return bad("routing: %v", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, s); err != nil {
			return bad("routing: %v", err)
		}
		k.Routing = buf.Bytes()
	}
	split, err := KeySplit(nk.Split, k.Models)
	if err != nil {
		return bad("%v", err)
	}
	k.Split = split
	for _, l := range []int{nk.Limits.RequestsPerMinute, nk.Limits.TokensPerMinute, nk.Limits.Concurrent} {
		if l < -1 {
			return bad("rate limit %d: want a number, 0 for the coordinator's default or -1 for none", l)
		}
	}
	k.Limits = nk.Limits
	t, err := tier.Parse(strings.TrimSpace(nk.ServiceTier))
	if err != nil {
		return bad("%v", err)
	}
	k.ServiceTier = t.String()
	if c := nk.Cap; c != nil && (c.Limit <= 0 || !store.ValidPeriod(c.Period)) {
		return bad("spend cap of $%s per %q: want a positive amount per daily, weekly or monthly", c.Limit, c.Period)
	}
	if nk.Kind == store.KeyProvider {
		switch {
		case len(k.Models) > 0 || k.Routing != nil || k.Split != nil:
			return bad("a provider token has no models, routing or split: it makes no requests")
		case k.Limits != (store.RateLimits{}):
			return bad("a provider token has no rate limits: it makes no requests")
		case strings.TrimSpace(nk.ServiceTier) != "":
			return bad("a provider token has no service tier: it makes no requests")
		case nk.Cap != nil:
			return bad("a provider token has no spend cap: it spends nothing")
		}
		k.ServiceTier = ""
	}
	return k, nil
}

// KeySplit checks a key's default split (the JSON of a request's split) and returns it as the
// key stores it, compact; nil for none. Its arms must be among the key's models, if it lists
// any: the requests it applies to could use no other.
func KeySplit(raw []byte, models []string) ([]byte, error) {
	s, aerr := api.ParseSplit(bytes.TrimSpace(raw))
	if aerr != nil {
		return nil, fmt.Errorf("split: %s", aerr.Message)
	}
	if s == nil {
		return nil, nil
	}
	for _, a := range s {
		if len(models) > 0 && !slices.Contains(models, a.Model) {
			return nil, fmt.Errorf("split: the model %q is not among the key's models (%s)", a.Model, strings.Join(models, ", "))
		}
	}
	return s.JSON(), nil
}
