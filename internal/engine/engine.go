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
	// Run runs one job. It calls emit for each piece of the answer, in order, and returns when
	// the answer is complete, ctx is done, or emit returns an error (then Run returns that
	// error). A failure the engine reports about the request itself is a *RequestError.
	Run(ctx context.Context, req *protocol.Request, emit func(protocol.Delta) error) (Result, error)
}

// Model is a model an engine serves.
type Model struct {
	Name          string
	ContextLength int // 0 when unknown
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
