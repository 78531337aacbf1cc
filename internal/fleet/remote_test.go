package fleet_test

import (
	"testing"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/testenv"
)

// A fleet given peers is joining until it has their nodes in view, and its watchers hear of
// the join; a fleet without peers has nothing to join.
func TestFleet_Joining(t *testing.T) {
	f := fleet.New(fleet.Config{})
	if f.Joining() {
		t.Fatal("a fleet without peers is joining")
	}
	f.SetPeers(testenv.NoPeers{})
	if !f.Joining() {
		t.Fatal("a fleet given peers is not joining them")
	}
	changed := f.Changed()
	f.Joined()
	if f.Joining() {
		t.Error("still joining after Joined")
	}
	select {
	case <-changed:
	default:
		t.Error("Joined did not tell the fleet's watchers: a request waiting for the view would not look again")
	}
	changed = f.Changed()
	f.Joined()
	select {
	case <-changed:
		t.Error("a second Joined told the watchers of a change that did not happen")
	default:
	}
}
