// Package engine defines how the provider agent runs a job on a local inference engine. Each
// backend lives in its own subpackage (sim, openaicompat).
//
// Engines must not import the coordinator's packages (store, ledger, gateway, fleet).
package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/shareai/shareai/internal/protocol"
)

// Engine runs jobs.
type Engine interface {
	// Name is the engine's kind as users see it: "sim", "openai".
	Name() string
	// Models lists the models the engine serves now.
	Models(ctx context.Context) ([]Model, error)
	// Run runs one job. It passes each piece of the answer to out, in order, and calls
	// out.Flush before it waits (for more bytes from its server, or for the next token's
	// time). It returns when the answer is complete, ctx is done, or out returns an error
	// (then Run returns that error). A failure the engine reports about the request itself is
	// a *RequestError.
	Run(ctx context.Context, req *protocol.Request, out Output) (Result, error)
}

// Output receives a job's answer from an engine.
type Output interface {
	// Delta adds the next piece of the answer. The agent may hold pieces back, merged, to
	// send several in one frame.
	Delta(protocol.Delta) error
	// Flush sends on the pieces held back. Engines call it before they wait, so nothing
	// waits with them.
	Flush() error
}

// Loader is an Engine that can tell which of its models are loaded in memory (warm), so the
// matcher can prefer nodes that need not load the model first.
type Loader interface {
	Loaded(ctx context.Context) ([]string, error)
}

// Emit is an Output that hands each piece to a function at once; Flush does nothing.
type Emit func(protocol.Delta) error

// Delta calls f.
func (f Emit) Delta(d protocol.Delta) error { return f(d) }

// Flush does nothing: Emit holds nothing back.
func (f Emit) Flush() error { return nil }

// Model is a model an engine serves.
type Model struct {
	Name          string
	ContextLength int // 0 when unknown
	// Continues is true when the engine continues a chat whose last message is a partial
	// assistant answer exactly from where it stops (for mid-stream failover).
	Continues bool
	// What the engine knows of the model's weights, for the VRAM fit check; zero when unknown.
	Quantization string  // as the engine names it: Q4_K_M, Q8_0, F16, fp8, ...
	Parameters   float64 // in billions, e.g. 8.0
	SizeBytes    int64   // of the weights file
}

// Result ends a successful run.
type Result struct {
	FinishReason string // "stop", "length", "tool_calls", ...
	Usage        protocol.Usage
	// Estimated is true when the engine did not report usage and it was counted instead.
	Estimated bool
}

// RequestError is the engine refusing a request (an HTTP 4xx answer from an OpenAI-compatible
// server, say). The coordinator shows it to the buyer, who can fix the request.
type RequestError struct {
	Status  int
	Message string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("engine refused the request (%d): %s", e.Status, e.Message)
}

// ErrIncomplete is returned (wrapped) when the engine's answer ended before the engine said it
// was complete, for example a stream without its final event.
var ErrIncomplete = errors.New("engine answer ended early")
