package sqlstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

func TestDB_Users(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		u := &store.User{ID: "usr_1", Email: "Alice@Example.com", PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
			AccountID: "acct_1", Roles: []string{store.RoleProvider, store.RoleBuyer, store.RoleProvider}, Lang: "fa", CreatedAt: t0}
		if err := db.CreateUser(ctx, u); err != nil {
			t.Fatalf("CreateUser: %v", err)
		}
		want := &store.User{ID: "usr_1", Email: "alice@example.com", PasswordHash: u.PasswordHash, AccountID: "acct_1",
			Roles: []string{store.RoleBuyer, store.RoleProvider}, Lang: "fa", CreatedAt: t0}
		for _, email := range []string{"alice@example.com", "ALICE@example.COM"} {
			got, err := db.UserByEmail(ctx, email)
			if err != nil {
				t.Fatalf("UserByEmail(%s): %v", email, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("UserByEmail(%s) = %+v, want %+v", email, got, want)
			}
		}
		got, err := db.User(ctx, "usr_1")
		if err != nil {
			t.Fatalf("User: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("User(usr_1) = %+v, want %+v", got, want)
		}

		tests := []struct {
			name string
			u    store.User
			want error
		}{
			{"email taken, in another case", store.User{ID: "usr_2", Email: "ALICE@example.com", AccountID: "acct_1"}, store.ErrConflict},
			{"id taken", store.User{ID: "usr_1", Email: "bob@example.com", AccountID: "acct_1"}, store.ErrConflict},
			{"no such account", store.User{ID: "usr_3", Email: "carol@example.com", AccountID: "acct_x"}, store.ErrNotFound},
			{"second user of the account, no roles", store.User{ID: "usr_4", Email: "dave@example.com", AccountID: "acct_1"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				u := tt.u
				u.CreatedAt = t0
				checkErr(t, db.CreateUser(ctx, &u), tt.want)
			})
		}
		if got, err := db.User(ctx, "usr_4"); err != nil || got.Roles != nil {
			t.Errorf("User(usr_4) = %+v, %v; want no roles", got, err)
		}
		_, err = db.UserByEmail(ctx, "carol@example.com")
		checkErr(t, err, store.ErrNotFound)
		_, err = db.User(ctx, "usr_x")
		checkErr(t, err, store.ErrNotFound)

		roles := []struct {
			set, want []string
		}{
			{[]string{store.RoleAdmin, store.RoleBuyer}, []string{store.RoleAdmin, store.RoleBuyer}},
			{[]string{store.RoleProvider, store.RoleProvider}, []string{store.RoleProvider}},
			{nil, nil},
		}
		for _, tt := range roles {
			if err := db.SetUserRoles(ctx, "usr_1", tt.set); err != nil {
				t.Fatalf("SetUserRoles(%v): %v", tt.set, err)
			}
			got, err := db.User(ctx, "usr_1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Roles, tt.want) {
				t.Errorf("after SetUserRoles(%v): roles %v, want %v", tt.set, got.Roles, tt.want)
			}
		}
		checkErr(t, db.SetUserRoles(ctx, "usr_x", []string{store.RoleBuyer}), store.ErrNotFound)
	})
}

func TestDB_WebSessions(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		for _, id := range []string{"usr_1", "usr_2"} {
			if err := db.CreateUser(ctx, &store.User{ID: id, Email: id + "@example.com", AccountID: "acct_1", CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		s := &store.WebSession{Hash: []byte("hash-1"), UserID: "usr_1", CSRF: "csrf-1", CreatedAt: t0, ExpiresAt: at(7 * 24 * time.Hour)}
		if err := db.CreateWebSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		got, err := db.WebSession(ctx, []byte("hash-1"), at(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("WebSession = %+v, want %+v", got, s)
		}
		for _, tt := range []struct {
			name string
			hash string
			now  time.Time
			want error
		}{
			{"a millisecond before it expires", "hash-1", s.ExpiresAt.Add(-time.Millisecond), nil},
			{"when it expires", "hash-1", s.ExpiresAt, store.ErrNotFound},
			{"after", "hash-1", s.ExpiresAt.Add(time.Hour), store.ErrNotFound},
			{"unknown", "hash-x", t0, store.ErrNotFound},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := db.WebSession(ctx, []byte(tt.hash), tt.now)
				checkErr(t, err, tt.want)
			})
		}

		checkErr(t, db.CreateWebSession(ctx, &store.WebSession{Hash: []byte("hash-1"), UserID: "usr_2", CSRF: "x",
			CreatedAt: t0, ExpiresAt: at(time.Hour)}), store.ErrConflict)
		checkErr(t, db.CreateWebSession(ctx, &store.WebSession{Hash: []byte("hash-x"), UserID: "usr_x", CSRF: "x",
			CreatedAt: t0, ExpiresAt: at(time.Hour)}), store.ErrNotFound)

		// A new session forgets the user's expired ones, and only theirs.
		for _, s := range []*store.WebSession{
			{Hash: []byte("short-1"), UserID: "usr_1", CSRF: "a", CreatedAt: t0, ExpiresAt: at(time.Hour)},
			{Hash: []byte("short-2"), UserID: "usr_2", CSRF: "b", CreatedAt: t0, ExpiresAt: at(time.Hour)},
			{Hash: []byte("hash-2"), UserID: "usr_1", CSRF: "c", CreatedAt: at(2 * time.Hour), ExpiresAt: at(9 * time.Hour)},
		} {
			if err := db.CreateWebSession(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range []struct {
			hash string
			want error
		}{{"short-1", store.ErrNotFound}, {"short-2", nil}, {"hash-1", nil}, {"hash-2", nil}} {
			_, err := db.WebSession(ctx, []byte(tt.hash), t0) // t0: before any expired
			if tt.want == nil && err != nil || tt.want != nil && err == nil {
				t.Errorf("WebSession(%s) after a new session of usr_1: error %v, want %v", tt.hash, err, tt.want)
			}
		}

		if err := db.DeleteWebSession(ctx, []byte("hash-1")); err != nil {
			t.Fatal(err)
		}
		_, err = db.WebSession(ctx, []byte("hash-1"), t0)
		checkErr(t, err, store.ErrNotFound)
		if err := db.DeleteWebSession(ctx, []byte("hash-1")); err != nil {
			t.Errorf("DeleteWebSession of a deleted session: %v, want none", err)
		}
		if _, err := db.WebSession(ctx, []byte("hash-2"), t0); err != nil {
			t.Errorf("the user's other session: %v", err)
		}
	})
}

func TestDB_UsageByDay(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		// t0 is 22:13:20 UTC: t0+2h is the next day.
		n := 0
		use := func(account, model string, when time.Time, prompt, completion int, cost money.Nanos, outcome string) *store.Usage {
			n++
			return &store.Usage{RequestID: "req_" + string(rune('a'+n)), AccountID: account, KeyID: "key_1", Model: model,
				Endpoint: "chat", PromptTokens: prompt, CompletionTokens: completion, Outcome: outcome, Cost: cost, CreatedAt: when}
		}
		if err := db.InsertUsage(ctx, []*store.Usage{
			use("acct_1", "llama", at(-48*time.Hour), 1000, 1000, 1000, store.OutcomeOK), // before since
			use("acct_1", "llama", t0, 10, 20, 300, store.OutcomeOK),
			use("acct_1", "llama", at(time.Hour), 5, 6, 70, store.OutcomeOK),
			use("acct_1", "qwen", at(time.Minute), 1, 0, 0, store.OutcomeError),
			use("acct_1", "llama", at(2*time.Hour), 7, 8, 90, store.OutcomeOK),
			use("acct_2", "llama", t0, 100, 100, 100, store.OutcomeOK), // another account
		}); err != nil {
			t.Fatal(err)
		}
		got, err := db.UsageByDay(ctx, "acct_1", at(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := []store.UsageDay{
			{Day: day("2023-11-14"), Model: "llama", Requests: 2, PromptTokens: 15, CompletionTokens: 26, Cost: 370},
			{Day: day("2023-11-14"), Model: "qwen", Requests: 1, PromptTokens: 1},
			{Day: day("2023-11-15"), Model: "llama", Requests: 1, PromptTokens: 7, CompletionTokens: 8, Cost: 90},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("UsageByDay =\n%+v\nwant\n%+v", got, want)
		}
		if got, err := db.UsageByDay(ctx, "acct_x", t0); err != nil || len(got) != 0 {
			t.Errorf("UsageByDay(acct_x) = %v, %v; want none", got, err)
		}
	})
}
