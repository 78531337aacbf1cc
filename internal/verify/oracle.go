package verify

import (
	"context"
	"strings"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
)

// SimPrefix begins the names of the models the simulated engine serves.
const SimPrefix = "sim/"

// KnownAnswer returns the text an honest node answers to req, when it is known in advance:
// for the simulated engine's models (names beginning with "sim/"), whose answer is a pure
// function of the request, it is what an unsalted sim engine's Run emits, max_tokens and stop
// strings applied. ok is false for every other model: a real model's answer is known only by
// running it, so it is compared with another node's answer instead (see [Agree]). ok is false
// too for a request the sim engine refuses, and for one that makes it call a tool.
func KnownAnswer(req *protocol.Request) (answer string, ok bool) {
	answer, _, ok = known(req)
	return answer, ok
}

// Known reports whether the answers of model are known in advance ([KnownAnswer]).
func Known(model string) bool { return strings.HasPrefix(model, SimPrefix) }

// known is KnownAnswer with the completion tokens an honest node counts for the answer.
func known(req *protocol.Request) (answer string, completionTokens int, ok bool) {
	if req == nil || !Known(req.Model) {
		return "", 0, false
	}
	// An engine serving just this model, whatever its name: the answer depends on the name,
	// not on the rest of the engine's configuration (context length aside, which a probe
	// never comes near). No TTFT and no speed: Run never waits.
	e := sim.New(sim.Config{Models: []engine.Model{{Name: req.Model}}})
	var b strings.Builder
	tool := false
	res, err := e.Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
		tool = tool || len(d.ToolCalls) > 0
		b.WriteString(d.Text)
		return nil
	}))
	if err != nil || tool {
		return "", 0, false
	}
	return b.String(), res.Usage.CompletionTokens, true
}
