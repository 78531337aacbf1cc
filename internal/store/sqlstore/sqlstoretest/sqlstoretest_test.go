package sqlstoretest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

func TestKinds(t *testing.T) {
	if got, want := sqlstoretest.Kinds(), []string{"sqlite", "postgres"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
}

// Each Open is a fresh database: what one test writes, the next does not see.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			a := sqlstoretest.Open(t, kind)
			if err := a.CreateAccount(ctx, &store.Account{ID: "acct_1", Name: "alice"}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Account(ctx, "alice"); err != nil {
				t.Fatalf("Account(alice) in the database it was created in: %v", err)
			}
			b := sqlstoretest.Open(t, kind)
			if _, err := b.Account(ctx, "alice"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Account(alice) in a second fresh database: got error %v, want %v", err, store.ErrNotFound)
			}
		})
	}
}
