package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// 'admin user role' on each kind of database the coordinator runs on.
func TestAdminUserRole(t *testing.T) {
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dsn := sqlstoretest.DSN(t, kind)
			st, err := sqlstore.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.CreateAccount(ctx, &store.Account{ID: "acct_alice", Name: "alice", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if err := st.CreateUser(ctx, &store.User{ID: "usr_alice", Email: "alice@example.com", PasswordHash: "x",
				AccountID: "acct_alice", Roles: []string{store.RoleBuyer}, CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			db := []string{"--db", dsn}
			if kind == "sqlite" {
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(dsn, filepath.Join(dir, "coordinator.db")); err != nil {
					t.Fatal(err)
				}
				dsn = filepath.Join(dir, "coordinator.db")
				db = []string{"--data-dir", dir}
			}
			roles := func() []string {
				t.Helper()
				st, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				u, err := st.User(ctx, "usr_alice")
				if err != nil {
					t.Fatal(err)
				}
				return u.Roles
			}

			steps := []struct {
				args      []string
				code      int
				out, errs string // what stdout and stderr contain
				roles     []string
			}{
				{[]string{"ALICE@example.com", "admin", "--actor", "op"}, 0, "roles admin, buyer.", "", []string{"admin", "buyer"}},
				{[]string{"alice@example.com", "admin"}, 0, "has the role admin already", "", []string{"admin", "buyer"}},
				{[]string{"alice@example.com", "provider"}, 0, "roles admin, buyer, provider.", "", []string{"admin", "buyer", "provider"}},
				{[]string{"--remove", "alice@example.com", "admin"}, 0, "roles buyer, provider.", "", []string{"buyer", "provider"}},
				{[]string{"alice@example.com", "admin", "--remove"}, 0, "does not have the role admin", "", []string{"buyer", "provider"}},
				{[]string{"alice@example.com", "buyer", "--remove"}, 0, "roles provider.", "", []string{"provider"}},
				{[]string{"alice@example.com", "provider", "--remove"}, 1, "", "a user needs one", []string{"provider"}},
				{[]string{"alice@example.com", "owner"}, 1, "", `role "owner": want one of buyer, provider, admin`, []string{"provider"}},
				{[]string{"bob@example.com", "admin"}, 1, "", `no console user "bob@example.com"`, []string{"provider"}},
				{[]string{"alice@example.com"}, 2, "", "wrong number of arguments", []string{"provider"}},
			}
			for _, s := range steps {
				args := append(append([]string{"admin", "user", "role"}, s.args...), db...)
				code, out, errs := shareai(t, args...)
				if code != s.code || !strings.Contains(out, s.out) || !strings.Contains(errs, s.errs) {
					t.Errorf("shareai %s = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
						strings.Join(s.args, " "), code, out, errs, s.code, s.out, s.errs)
				}
				if got := roles(); !reflect.DeepEqual(got, s.roles) {
					t.Errorf("after %s: roles %v, want %v", strings.Join(s.args, " "), got, s.roles)
				}
			}

			st, err = sqlstore.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			log, err := st.AuditLog(ctx, "usr_alice", 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range log {
				got = append(got, e.Action+" "+e.Detail)
			}
			want := []string{
				"user.role.remove alice@example.com buyer: roles buyer,provider → provider",
				"user.role.remove alice@example.com admin: roles admin,buyer,provider → buyer,provider",
				"user.role.grant alice@example.com provider: roles admin,buyer → admin,buyer,provider",
				"user.role.grant alice@example.com admin: roles buyer → admin,buyer",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if log[len(log)-1].Actor != "admin:op" {
				t.Errorf("actor %q, want admin:op", log[len(log)-1].Actor)
			}
		})
	}
}

// Usage, and an unknown verb.
func TestAdminUser_Usage(t *testing.T) {
	if code, out, _ := shareai(t, "admin", "user", "--help"); code != 0 || !strings.Contains(out, "shareai admin user role EMAIL") {
		t.Errorf("admin user --help = %d, %q", code, out)
	}
	if code, _, errs := shareai(t, "admin", "user", "grant"); code != 2 || !strings.Contains(errs, `unknown admin user command "grant"`) {
		t.Errorf("admin user grant = %d, %q", code, errs)
	}
}
