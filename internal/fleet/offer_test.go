package fleet_test

import (
	"testing"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// An offer gets buyers' traffic only while its node and its model on the node are verified
// (or the node trusted): its level is the node's, unless the model is new or quarantined on it.
func TestOffer_Level(t *testing.T) {
	for _, tt := range []struct {
		node, own string // own "": an offer the fleet did not register
		want      string
	}{
		{store.LevelVerified, store.LevelVerified, store.LevelVerified},
		{store.LevelTrusted, store.LevelVerified, store.LevelTrusted},
		{store.LevelVerified, store.LevelNew, store.LevelNew},
		{store.LevelTrusted, store.LevelQuarantined, store.LevelQuarantined},
		{store.LevelNew, store.LevelVerified, store.LevelNew},
		{store.LevelQuarantined, store.LevelVerified, store.LevelQuarantined},
		{store.LevelSuspended, store.LevelVerified, store.LevelSuspended},
		{store.LevelVerified, "", store.LevelVerified},
		{store.LevelNew, "", store.LevelNew},
	} {
		o := &fleet.Offer{Offer: protocol.Offer{Model: "m", MaxConcurrent: 1}, Node: (&fleet.Node{ID: "n"}).WithLevel(tt.node)}
		if tt.own != "" {
			o.WithLevel(tt.own)
		}
		live := tt.want == store.LevelVerified || tt.want == store.LevelTrusted
		if got := o.Level(); got != tt.want || o.Live() != live {
			t.Errorf("node %s, model %q: level %s, live %v; want %s, %v", tt.node, tt.own, got, o.Live(), tt.want, live)
		}
	}
}
