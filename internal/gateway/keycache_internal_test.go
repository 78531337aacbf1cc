package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// A key revoked in the store by another process (`shareai keys revoke`) stops working within
// the key cache's TTL, 10 s by default, as the README and docs/architecture.md say: until then
// the gateway may still trust it, from then on it asks the store again.
func TestKeyCache_RevokedWithinTTL(t *testing.T) {
	ctx := context.Background()
	db := sqlstoretest.Open(t, "sqlite")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	acct := &store.Account{ID: store.NewID("acct"), Name: "buyer", CreatedAt: t0}
	if err := db.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	secret, k := store.NewKey(acct.ID, store.KeyBuyer, "key", t0)
	if err := db.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(t0.UnixNano())
	g := New(Config{Store: db, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	const documented = 10 * time.Second
	if g.cfg.KeyCacheTTL != documented {
		t.Fatalf("default key cache TTL %v; the docs say %v", g.cfg.KeyCacheTTL, documented)
	}
	authenticate := func(at time.Duration) error {
		now.Store(t0.Add(at).UnixNano())
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		return g.authenticate(r, &call{}, store.KeyBuyer)
	}
	if err := authenticate(0); err != nil {
		t.Fatalf("a valid key: %v", err)
	}
	if _, err := db.RevokeKey(ctx, k.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := authenticate(documented - time.Nanosecond); err != nil {
		t.Fatalf("within the TTL the cached key is still trusted, as documented; got %v", err)
	}
	err := authenticate(documented)
	if ae, ok := err.(*api.Error); !ok || ae.Status != http.StatusUnauthorized || ae.Code != api.CodeInvalidAPIKey {
		t.Fatalf("once the TTL has passed: %v; want 401 invalid_api_key", err)
	}
}
