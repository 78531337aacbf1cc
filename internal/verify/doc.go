// Package verify checks that a node serves the models it claims, each on its own. The
// coordinator sends each node canary probes: chat requests a node cannot tell from a buyer's
// (see [Probe]), fitted to the node's context length ([FitProbe]), and compares the answers
// with the answer known in advance when the model's output is known exactly (the simulated
// engine, see [KnownAnswer] and [AgreeExact]), or else with the answer of another, verified
// node serving the same model (see [Agree]). A model no other verified node serves yet gets
// reference-free checks instead, that any language model passes and a text generator fails
// (see [ReferenceFree]). When answers agree, the node's count of completion tokens is compared
// with the other count of the same answer (see [Inflated]).
//
// The probes, the reference-free tests, the known answers and the comparisons are pure
// functions: no I/O, no clock, no randomness of their own (the prober hands in the seeds), so
// that a check replays the same. They import only the standard library,
// golang.org/x/text/unicode/norm, and the protocol, engine and engine/sim packages.
//
// This package must not import the agent: a node's code must never learn what a probe is.
package verify
