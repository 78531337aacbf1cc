package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// t0 is a time with millisecond precision, as the store keeps.
var t0 = time.UnixMilli(1_700_000_000_000).UTC()

func at(d time.Duration) time.Time { return t0.Add(d) }

// Each test runs on every database at hand through sqlstore.ForEachDB (testdb_test.go):
// SQLite always, PostgreSQL when SHAREAI_TEST_POSTGRES is set.

func mustAccount(t *testing.T, db store.Store, id, name string) {
	t.Helper()
	if err := db.CreateAccount(context.Background(), &store.Account{ID: id, Name: name, CreatedAt: t0}); err != nil {
		t.Fatalf("CreateAccount(%s): %v", id, err)
	}
}

func mustKey(t *testing.T, db store.Store, k *store.Key) {
	t.Helper()
	if err := db.CreateKey(context.Background(), k); err != nil {
		t.Fatalf("CreateKey(%s): %v", k.ID, err)
	}
}

// checkErr fails unless err is nil when want is nil, or errors.Is(err, want) otherwise.
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("got error %v, want none", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("got error %v, want %v", err, want)
	}
}

var errAny = errors.New("any error")

func checkAnyErr(t *testing.T, err, want error) {
	t.Helper()
	if want == errAny {
		if err == nil {
			t.Fatalf("got no error, want one")
		}
		return
	}
	checkErr(t, err, want)
}

func TestDB_CreateAccount(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		tests := []struct {
			name string
			a    store.Account
			want error
		}{
			{"new", store.Account{ID: "acct_2", Name: "bob", CreatedAt: t0}, nil},
			{"name taken", store.Account{ID: "acct_3", Name: "alice", CreatedAt: t0}, store.ErrConflict},
			{"id taken", store.Account{ID: "acct_1", Name: "carol", CreatedAt: t0}, store.ErrConflict},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkErr(t, db.CreateAccount(ctx, &tt.a), tt.want)
			})
		}
	})
}

func TestDB_Account(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustAccount(t, db, "acct_2", "acct_1") // a name that is another account's id
		tests := []struct {
			name     string
			idOrName string
			wantID   string
			wantErr  error
		}{
			{"by id", "acct_1", "acct_1", nil},
			{"by name", "alice", "acct_1", nil},
			{"id wins over name", "acct_1", "acct_1", nil},
			{"by name only", "acct_2", "acct_2", nil},
			{"missing", "nobody", "", store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a, err := db.Account(ctx, tt.idOrName)
				checkErr(t, err, tt.wantErr)
				if err != nil {
					return
				}
				if a.ID != tt.wantID {
					t.Errorf("Account(%q).ID = %q, want %q", tt.idOrName, a.ID, tt.wantID)
				}
			})
		}
		got, err := db.Account(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		want := &store.Account{ID: "acct_1", Name: "alice", CreatedAt: t0}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Account(alice) = %+v, want %+v", got, want)
		}
	})
}

func TestDB_MarkProvider(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		tests := []struct {
			name    string
			account string
			want    error
		}{
			{"first", "acct_1", nil},
			{"again", "acct_1", nil},
			{"no such account", "acct_x", store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkErr(t, db.MarkProvider(ctx, tt.account), tt.want)
			})
		}
	})
}

func TestDB_CreateKey(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		key := func(id, hash string, mod func(*store.Key)) store.Key {
			k := store.Key{ID: id, AccountID: "acct_1", Kind: store.KeyBuyer, Name: "laptop",
				Prefix: "sk-" + id, Hash: []byte(hash), CreatedAt: t0}
			if mod != nil {
				mod(&k)
			}
			return k
		}
		mustKey(t, db, &store.Key{ID: "key_0", AccountID: "acct_1", Kind: store.KeyBuyer, Hash: []byte("h0"), CreatedAt: t0})
		tests := []struct {
			name string
			k    store.Key
			want error
		}{
			{"buyer", key("key_1", "h1", nil), nil},
			{"provider", key("key_2", "h2", func(k *store.Key) { k.Kind = store.KeyProvider }), nil},
			{"already revoked", key("key_3", "h3", func(k *store.Key) { k.RevokedAt = at(time.Hour) }), nil},
			{"rate limits", key("key_10", "h10", func(k *store.Key) {
				k.Limits = store.RateLimits{RequestsPerMinute: 10, TokensPerMinute: 3_000_000_000, Concurrent: -1}
			}), nil},
			{"service tier", key("key_11", "h11", func(k *store.Key) { k.ServiceTier = "bronze" }), nil},
			{"hash taken", key("key_4", "h0", nil), store.ErrConflict},
			{"id taken", key("key_0", "h5", nil), store.ErrConflict},
			{"no such account", key("key_6", "h6", func(k *store.Key) { k.AccountID = "acct_x" }), store.ErrNotFound},
			{"no hash", key("key_7", "", nil), errAny},
			{"no id", key("", "h8", nil), errAny},
			{"bad kind", key("key_9", "h9", func(k *store.Key) { k.Kind = "admin" }), errAny},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := db.CreateKey(ctx, &tt.k)
				checkAnyErr(t, err, tt.want)
				if err != nil {
					return
				}
				got, err := db.KeyByHash(ctx, tt.k.Hash)
				if err != nil {
					t.Fatalf("KeyByHash: %v", err)
				}
				if !reflect.DeepEqual(got, &tt.k) {
					t.Errorf("KeyByHash = %+v, want %+v", got, &tt.k)
				}
			})
		}
	})
}

func TestDB_KeyByHash(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		secret, k := store.NewKey("acct_1", store.KeyProvider, "rig", t0)
		mustKey(t, db, k)
		tests := []struct {
			name    string
			hash    []byte
			wantID  string
			wantErr error
		}{
			{"found", store.HashSecret(secret), k.ID, nil},
			{"missing", store.HashSecret(secret + "x"), "", store.ErrNotFound},
			{"empty", nil, "", store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.KeyByHash(ctx, tt.hash)
				checkErr(t, err, tt.wantErr)
				if err == nil && got.ID != tt.wantID {
					t.Errorf("KeyByHash().ID = %q, want %q", got.ID, tt.wantID)
				}
			})
		}
	})
}

func TestDB_Keys(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustAccount(t, db, "acct_2", "bob")
		for i, k := range []struct{ id, account, kind string }{
			{"key_a", "acct_1", store.KeyBuyer},
			{"key_b", "acct_1", store.KeyProvider},
			{"key_c", "acct_2", store.KeyBuyer},
			{"key_d", "acct_1", store.KeyBuyer},
		} {
			mustKey(t, db, &store.Key{ID: k.id, AccountID: k.account, Kind: k.kind,
				Hash: []byte(k.id), CreatedAt: at(time.Duration(i) * time.Minute)})
		}
		if _, err := db.RevokeKey(ctx, "key_d", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name          string
			account, kind string
			want          []string
		}{
			{"account buyer keys, revoked included", "acct_1", store.KeyBuyer, []string{"key_d", "key_a"}},
			{"account provider keys", "acct_1", store.KeyProvider, []string{"key_b"}},
			{"every account's buyer keys", "", store.KeyBuyer, []string{"key_d", "key_c", "key_a"}},
			{"every kind", "acct_1", "", []string{"key_d", "key_b", "key_a"}},
			{"none", "acct_2", store.KeyProvider, nil},
			{"no such account", "acct_x", store.KeyBuyer, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ks, err := db.Keys(ctx, tt.account, tt.kind)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, k := range ks {
					got = append(got, k.ID)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Keys(%q, %q) = %v, want %v", tt.account, tt.kind, got, tt.want)
				}
			})
		}
	})
}

func TestDB_RevokeKey(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		for _, k := range []struct{ id, prefix string }{
			{"key_1", "sk-aaaaaaaa"},
			{"key_2", "sk-bbbbbbbb"},
			{"key_3", "sk-twin0000"},
			{"key_4", "sk-twin0000"},
			{"key_5", "sk-cccccccc"},
		} {
			mustKey(t, db, &store.Key{ID: k.id, AccountID: "acct_1", Kind: store.KeyBuyer,
				Prefix: k.prefix, Hash: []byte(k.id), CreatedAt: t0})
		}
		first, later := at(time.Hour), at(2*time.Hour)
		if _, err := db.RevokeKey(ctx, "key_5", first); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name        string
			idOrPrefix  string
			wantID      string
			wantRevoked time.Time
			wantErr     error
		}{
			{"by id", "key_1", "key_1", later, nil},
			{"by prefix", "sk-bbbbbbbb", "key_2", later, nil},
			{"again keeps the first time", "key_5", "key_5", first, nil},
			{"ambiguous prefix", "sk-twin0000", "", time.Time{}, sqlstore.ErrAmbiguous},
			{"shorter prefix matches nothing", "sk-aaaa", "", time.Time{}, store.ErrNotFound},
			{"missing", "key_x", "", time.Time{}, store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				k, err := db.RevokeKey(ctx, tt.idOrPrefix, later)
				checkErr(t, err, tt.wantErr)
				if err != nil {
					return
				}
				if k.ID != tt.wantID || !k.RevokedAt.Equal(tt.wantRevoked) || !k.Revoked() {
					t.Errorf("RevokeKey(%q) = %s revoked at %v, want %s revoked at %v",
						tt.idOrPrefix, k.ID, k.RevokedAt, tt.wantID, tt.wantRevoked)
				}
				stored, err := db.KeyByHash(ctx, []byte(tt.wantID))
				if err != nil {
					t.Fatal(err)
				}
				if !stored.RevokedAt.Equal(tt.wantRevoked) {
					t.Errorf("stored RevokedAt = %v, want %v", stored.RevokedAt, tt.wantRevoked)
				}
			})
		}
		for _, id := range []string{"key_3", "key_4"} {
			k, err := db.KeyByHash(ctx, []byte(id))
			if err != nil {
				t.Fatal(err)
			}
			if k.Revoked() {
				t.Errorf("%s revoked by an ambiguous prefix, want untouched", id)
			}
		}
		if _, err := db.RevokeKey(ctx, "key_3", time.Time{}); err == nil {
			t.Errorf("RevokeKey at zero time: got no error, want one")
		}
	})
}

func TestDB_SetKeyLimits(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		for _, k := range []struct{ id, prefix string }{
			{"key_1", "sk-aaaaaaaa"},
			{"key_2", "sk-twin0000"},
			{"key_3", "sk-twin0000"},
		} {
			mustKey(t, db, &store.Key{ID: k.id, AccountID: "acct_1", Kind: store.KeyBuyer, Prefix: k.prefix,
				Hash: []byte(k.id), CreatedAt: t0, Models: []string{"m"}, Limits: store.RateLimits{RequestsPerMinute: 5}})
		}
		tests := []struct {
			name       string
			idOrPrefix string
			limits     store.RateLimits
			wantID     string
			wantErr    error
		}{
			{"by id", "key_1", store.RateLimits{RequestsPerMinute: 60, TokensPerMinute: 90_000, Concurrent: 3}, "key_1", nil},
			{"by prefix, back to the defaults", "sk-aaaaaaaa", store.RateLimits{}, "key_1", nil},
			{"no limit", "key_2", store.RateLimits{RequestsPerMinute: -1, TokensPerMinute: -1, Concurrent: -1}, "key_2", nil},
			{"ambiguous prefix", "sk-twin0000", store.RateLimits{Concurrent: 1}, "", sqlstore.ErrAmbiguous},
			{"missing", "key_x", store.RateLimits{}, "", store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				k, err := db.SetKeyLimits(ctx, tt.idOrPrefix, tt.limits)
				checkErr(t, err, tt.wantErr)
				if err != nil {
					return
				}
				if k.ID != tt.wantID || k.Limits != tt.limits {
					t.Errorf("SetKeyLimits(%q) = %s with %+v, want %s with %+v", tt.idOrPrefix, k.ID, k.Limits, tt.wantID, tt.limits)
				}
				stored, err := db.KeyByHash(ctx, []byte(tt.wantID))
				if err != nil {
					t.Fatal(err)
				}
				if stored.Limits != tt.limits || !reflect.DeepEqual(stored.Models, []string{"m"}) {
					t.Errorf("stored %+v, want limits %+v and its models kept", stored, tt.limits)
				}
			})
		}
		// Listing reads them too.
		ks, err := db.Keys(ctx, "acct_1", store.KeyBuyer)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if k.ID == "key_3" && k.Limits != (store.RateLimits{RequestsPerMinute: 5}) {
				t.Errorf("Keys: %s has limits %+v, want those it was created with", k.ID, k.Limits)
			}
		}
	})
}

func TestDB_SetKeyServiceTier(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		limits := store.RateLimits{RequestsPerMinute: 5}
		for _, k := range []struct{ id, prefix string }{
			{"key_1", "sk-aaaaaaaa"},
			{"key_2", "sk-twin0000"},
			{"key_3", "sk-twin0000"},
		} {
			mustKey(t, db, &store.Key{ID: k.id, AccountID: "acct_1", Kind: store.KeyBuyer, Prefix: k.prefix,
				Hash: []byte(k.id), CreatedAt: t0, Limits: limits, ServiceTier: "silver"})
		}
		tests := []struct {
			name       string
			idOrPrefix string
			tier       string
			wantID     string
			wantErr    error
		}{
			{"by id", "key_1", "gold", "key_1", nil},
			{"by prefix", "sk-aaaaaaaa", "bronze", "key_1", nil},
			{"back to none", "key_2", "", "key_2", nil},
			{"ambiguous prefix", "sk-twin0000", "gold", "", sqlstore.ErrAmbiguous},
			{"missing", "key_x", "gold", "", store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				k, err := db.SetKeyServiceTier(ctx, tt.idOrPrefix, tt.tier)
				checkErr(t, err, tt.wantErr)
				if err != nil {
					return
				}
				if k.ID != tt.wantID || k.ServiceTier != tt.tier {
					t.Errorf("SetKeyServiceTier(%q, %q) = %s with %q, want %s", tt.idOrPrefix, tt.tier, k.ID, k.ServiceTier, tt.wantID)
				}
				stored, err := db.KeyByHash(ctx, []byte(tt.wantID))
				if err != nil {
					t.Fatal(err)
				}
				if stored.ServiceTier != tt.tier || stored.Limits != limits {
					t.Errorf("stored %+v, want tier %q and its rate limits kept", stored, tt.tier)
				}
			})
		}
	})
}

func TestDB_UpsertNode(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustAccount(t, db, "acct_2", "bob")
		orig := store.Node{ID: "node_1", AccountID: "acct_1", PublicKey: []byte("pk1"), Name: "rig",
			Region: "eu", Engine: "ollama", Agent: "v1", Hardware: []byte(`{"gpus":1}`),
			Offers: []byte(`[{"model":"llama"}]`), FirstSeen: t0, LastSeen: t0, Level: store.LevelNew}
		if err := db.UpsertNode(ctx, &orig); err != nil {
			t.Fatal(err)
		}
		update := store.Node{ID: "node_1", AccountID: "acct_2", PublicKey: []byte("pk-other"),
			Name: "rig2", Region: "us", Engine: "vllm", Agent: "v2", Hardware: nil,
			Offers: []byte(`[]`), FirstSeen: at(time.Hour), LastSeen: at(time.Hour), Level: store.LevelNew}
		updated := update
		updated.PublicKey, updated.FirstSeen = orig.PublicKey, orig.FirstSeen

		tests := []struct {
			name    string
			n       store.Node
			want    *store.Node // as read back by id
			wantErr error
		}{
			{"insert", orig, &orig, nil},
			{"update keeps id, public key and first seen", update, &updated, nil},
			{"public key of another node", store.Node{ID: "node_2", AccountID: "acct_1",
				PublicKey: []byte("pk1"), FirstSeen: t0, LastSeen: t0}, nil, store.ErrConflict},
			{"no such account", store.Node{ID: "node_3", AccountID: "acct_x",
				PublicKey: []byte("pk3"), FirstSeen: t0, LastSeen: t0}, nil, store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := db.UpsertNode(ctx, &tt.n)
				checkErr(t, err, tt.wantErr)
				if err != nil {
					return
				}
				got, err := db.Node(ctx, tt.n.ID)
				if err != nil {
					t.Fatalf("Node: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Node(%s) = %+v, want %+v", tt.n.ID, got, tt.want)
				}
			})
		}
		if _, err := db.Node(ctx, "node_x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Node(node_x): got error %v, want %v", err, store.ErrNotFound)
		}
	})
}

func TestDB_TouchNodes(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		for _, id := range []string{"node_1", "node_2", "node_3"} {
			n := &store.Node{ID: id, AccountID: "acct_1", PublicKey: []byte(id), FirstSeen: t0, LastSeen: t0}
			if err := db.UpsertNode(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		later := at(time.Minute)
		if err := db.TouchNodes(ctx, []string{"node_1", "node_3", "node_x"}, later); err != nil {
			t.Fatalf("TouchNodes: %v", err)
		}
		if err := db.TouchNodes(ctx, nil, later); err != nil {
			t.Fatalf("TouchNodes(nil): %v", err)
		}
		tests := []struct {
			id                  string
			wantFirst, wantLast time.Time
		}{
			{"node_1", t0, later},
			{"node_2", t0, t0},
			{"node_3", t0, later},
		}
		for _, tt := range tests {
			t.Run(tt.id, func(t *testing.T) {
				n, err := db.Node(ctx, tt.id)
				if err != nil {
					t.Fatal(err)
				}
				if !n.FirstSeen.Equal(tt.wantFirst) || !n.LastSeen.Equal(tt.wantLast) {
					t.Errorf("seen %v..%v, want %v..%v", n.FirstSeen, n.LastSeen, tt.wantFirst, tt.wantLast)
				}
			})
		}
	})
}

func usage(id, account string, created time.Time) *store.Usage {
	return &store.Usage{RequestID: id, AccountID: account, KeyID: "key_1", Model: "llama",
		NodeID: "node_1", Endpoint: "chat", Stream: true, PromptTokens: 12, CompletionTokens: 34,
		TTFT: 1500 * time.Microsecond, Duration: 2*time.Second + 7*time.Microsecond,
		Outcome: store.OutcomeOK, CreatedAt: created,
		ServiceTier: "gold", QueueTime: 250*time.Millisecond + 3*time.Microsecond}
}

func TestDB_InsertUsage(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		failed := usage("req_2", "acct_1", at(time.Second))
		failed.NodeID, failed.Stream, failed.TTFT = "", false, 0
		failed.Outcome, failed.Error = store.OutcomeError, "no node"
		if err := db.InsertUsage(ctx, []*store.Usage{usage("req_1", "acct_1", t0), failed}); err != nil {
			t.Fatal(err)
		}
		dupLater := usage("req_1", "acct_1", at(time.Hour))
		dupLater.Model = "other"
		dupInBatch := usage("req_3", "acct_1", at(2*time.Second))
		dupInBatch2 := usage("req_3", "acct_1", at(3*time.Second))
		dupInBatch2.Model = "other"
		if err := db.InsertUsage(ctx, []*store.Usage{dupLater, dupInBatch, dupInBatch2}); err != nil {
			t.Fatalf("InsertUsage with duplicates: %v", err)
		}
		if err := db.InsertUsage(ctx, nil); err != nil {
			t.Fatalf("InsertUsage(nil): %v", err)
		}
		tests := []struct {
			name    string
			id      string
			want    *store.Usage
			wantErr error
		}{
			{"ok", "req_1", usage("req_1", "acct_1", t0), nil},
			{"error", "req_2", failed, nil},
			{"duplicate in one batch keeps the first", "req_3", usage("req_3", "acct_1", at(2*time.Second)), nil},
			{"missing", "req_x", nil, store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.UsageByRequest(ctx, tt.id)
				checkErr(t, err, tt.wantErr)
				if err == nil && !reflect.DeepEqual(got, tt.want) {
					t.Errorf("UsageByRequest(%s) = %+v, want %+v", tt.id, got, tt.want)
				}
			})
		}
	})
}

// A record's service tier and queue time are kept whichever way it is written: on its own, or
// with the settlement of its hold (the batch insert of hold.go).
func TestDB_UsageServiceTier(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		if err := db.Deposit(ctx, "acct_1", 1000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		inserted := usage("req_1", "acct_1", t0)
		inserted.ServiceTier, inserted.QueueTime = "bronze", 1234567*time.Microsecond
		if err := db.InsertUsage(ctx, []*store.Usage{inserted}); err != nil {
			t.Fatal(err)
		}
		settled := usage("req_2", "acct_1", t0)
		settled.ServiceTier, settled.QueueTime = "gold", 42*time.Millisecond
		if err := db.PlaceHold(ctx, &store.Hold{RequestID: "req_2", AccountID: "acct_1", KeyID: "key_1", Amount: 10, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		s := &store.Settlement{RequestID: "req_2", Debit: 10, Fee: 10, At: at(time.Second), Usage: settled}
		if errs := db.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		unset := usage("req_3", "acct_1", t0)
		unset.ServiceTier, unset.QueueTime = "", 0
		if err := db.InsertUsage(ctx, []*store.Usage{unset}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []*store.Usage{inserted, settled, unset} {
			got, err := db.UsageByRequest(ctx, want.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ServiceTier != want.ServiceTier || got.QueueTime != want.QueueTime {
				t.Errorf("%s: tier %q, queued %v; want %q, %v", want.RequestID, got.ServiceTier, got.QueueTime, want.ServiceTier, want.QueueTime)
			}
		}
		list, err := db.Usages(ctx, "acct_1", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range list {
			if got.RequestID == "req_1" && (got.ServiceTier != "bronze" || got.QueueTime != inserted.QueueTime) {
				t.Errorf("Usages: %s has tier %q, queued %v; want bronze, %v", got.RequestID, got.ServiceTier, got.QueueTime, inserted.QueueTime)
			}
		}
	})
}

func TestDB_Usages(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		var us []*store.Usage
		for i := range 5 {
			us = append(us, usage(fmt.Sprintf("req_%d", i), "acct_1", at(time.Duration(i)*time.Second)))
		}
		us = append(us, usage("req_other", "acct_2", at(time.Hour)))
		if err := db.InsertUsage(ctx, us); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			account string
			limit   int
			want    []string
		}{
			{"newest first", "acct_1", 10, []string{"req_4", "req_3", "req_2", "req_1", "req_0"}},
			{"limit", "acct_1", 2, []string{"req_4", "req_3"}},
			{"zero limit", "acct_1", 0, nil},
			{"other account", "acct_2", 10, []string{"req_other"}},
			{"no records", "acct_x", 10, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.Usages(ctx, tt.account, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, u := range got {
					ids = append(ids, u.RequestID)
				}
				if !reflect.DeepEqual(ids, tt.want) {
					t.Errorf("Usages(%s, %d) = %v, want %v", tt.account, tt.limit, ids, tt.want)
				}
			})
		}
	})
}

func TestDB_InsertUsage_concurrent(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		const writers, each = 20, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				var us []*store.Usage
				for i := range each {
					us = append(us, usage(fmt.Sprintf("req_%d_%d", w, i), "acct_1", at(time.Duration(i)*time.Second)))
				}
				errs <- db.InsertUsage(ctx, us)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("InsertUsage: %v", err)
			}
		}
		got, err := db.Usages(ctx, "acct_1", 2*writers*each)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != writers*each {
			t.Errorf("got %d records, want %d", len(got), writers*each)
		}
	})
}

func TestOpen_reopen(t *testing.T) {
	sqlstore.ForEachKind(t, func(t *testing.T, kind string) {
		driver := "sqlite"
		if kind == "postgres" {
			driver = "pgx"
		}
		ctx := context.Background()
		db, dsn := sqlstore.OpenTestDB(t, kind)
		mustAccount(t, db, "acct_1", "alice")
		migrations := func() map[int]int64 {
			t.Helper()
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			rows, err := raw.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			m := make(map[int]int64)
			for rows.Next() {
				var v int
				var at int64
				if err := rows.Scan(&v, &at); err != nil {
					t.Fatal(err)
				}
				m[v] = at
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return m
		}
		before := migrations()
		if len(before) == 0 || before[1] == 0 {
			t.Fatalf("schema_migrations = %v, want version 1 recorded", before)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		db2, err := sqlstore.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer db2.Close()
		if err := db2.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		a, err := db2.Account(ctx, "alice")
		if err != nil {
			t.Fatalf("Account after reopen: %v", err)
		}
		if a.ID != "acct_1" {
			t.Errorf("Account(alice).ID = %q after reopen, want acct_1", a.ID)
		}
		if after := migrations(); !reflect.DeepEqual(after, before) {
			t.Errorf("schema_migrations after reopen = %v, want %v unchanged", after, before)
		}
	})
}

func TestOpen_pathWithQuery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd?name#1%.db")
	db, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	defer db.Close()
	mustAccount(t, db, "acct_1", "alice")
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range matches {
		found = found || m == path
	}
	if !found {
		t.Errorf("files %v, want %q among them", matches, path)
	}
}
