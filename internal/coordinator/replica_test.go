package coordinator

import (
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// A coordinator without a replica name makes one, and its ledger places holds under it.
func TestNew_Replica(t *testing.T) {
	db := sqlstoretest.Open(t, "sqlite")
	c := New(Config{Store: db})
	defer c.closeBilling()
	if got := c.Replica(); !strings.HasPrefix(got, "rep_") || len(got) < 10 || c.Ledger.Replica() != got {
		t.Errorf("Replica() = %q, ledger's %q; want a made name rep_… shared with the ledger", got, c.Ledger.Replica())
	}
	named := New(Config{Store: db, Replica: "rep_a"})
	defer named.closeBilling()
	if got := named.Replica(); got != "rep_a" || named.Ledger.Replica() != "rep_a" {
		t.Errorf("Replica() = %q, ledger's %q; want rep_a", got, named.Ledger.Replica())
	}
}
