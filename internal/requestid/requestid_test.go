package requestid

import (
	"testing"
	"time"
)

// Minted reads back the millisecond New made an id in, and refuses what New did not make.
func TestMinted(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := New()
	after := time.Now()
	at, ok := Minted(id)
	if !ok || at.Before(before) || at.After(after) {
		t.Errorf("Minted(%s) = %v, %v; want a time in [%v, %v]", id, at, ok, before, after)
	}
	for _, bad := range []string{"", "req_", "twice", id[:len(id)-1], id + "a", "job_" + id[4:], "req_" + "0000000000000000000000!!"} {
		if at, ok := Minted(bad); ok {
			t.Errorf("Minted(%q) = %v, true; want false", bad, at)
		}
	}
}
