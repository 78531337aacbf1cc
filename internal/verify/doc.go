// Package verify checks that a node serves the model it claims. The coordinator sends each node
// canary probes: chat requests a node cannot tell from a buyer's (see [Probe]), and compares the
// answers with the answer known in advance when the model's output is known exactly (the
// simulated engine, see [KnownAnswer] and [AgreeExact]), or else with the answer of another,
// verified node serving the same model (see [Agree]).
//
// The probes, the known answers and the comparison are pure functions: no I/O, no clock, no
// randomness, so that a check replays the same. They import only the standard library,
// golang.org/x/text/unicode/norm, and the protocol, engine and engine/sim packages.
//
// This package must not import the agent: a node's code must never learn what a probe is.
package verify
