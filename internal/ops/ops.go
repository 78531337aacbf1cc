// Package ops holds the domain operations that more than one front end runs: the console and
// cmd/shareai call the same function, so that an operation is written once and behaves the
// same whoever runs it. Each operation checks its parameters, commits what it records in one
// store transaction, and then, when it runs inside a coordinator, applies the change to the
// live fleet (Fleet). cmd/shareai, a process of its own with only the database, passes no
// fleet: a running coordinator then takes the change in from the database (a node's level at
// its prober's next scoring, within a minute; a key at its next look-up, within seconds).
//
// It imports store and the pure packages that check what a store record may hold (money,
// matcher, tier); never the console, the gateway, the fleet or cmd/.
package ops

import "errors"

// Fleet is the live fleet of a running coordinator, as far as the operations change it.
type Fleet interface {
	// ApplyLevel gives a connected node its new level now, and reports whether the node was
	// connected; a node that is not keeps the level the store gives it when it connects.
	ApplyLevel(nodeID, level string) bool
}

// Errors of the operations' parameters; wrap-safe, compare with errors.Is. An unknown node is
// store.ErrNotFound.
var (
	ErrNoReason = errors.New("a reason is required, for the audit log")
	ErrLevel    = errors.New("not a level an operator sets")
	ErrKey      = errors.New("not a key that can be created")
)
