package testenv

import (
	"context"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
)

// NoPeers is a replica's peers (fleet.Peers) that hold no slot and take no job: a fleet given
// them (Fleet.SetPeers) is joining, as a replica that has just started is, until its test
// calls Fleet.Joined.
type NoPeers struct{}

func (NoPeers) Acquire(*fleet.Offer, tier.Tier) bool                          { return false }
func (NoPeers) Release(*fleet.Offer)                                          {}
func (NoPeers) Dispatch(context.Context, *fleet.Job, *protocol.Request) error { return nil }
func (NoPeers) Control(*fleet.Job, fleet.Control, int)                        {}
