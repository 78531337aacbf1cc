package verify_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// thinker plays a model that reasons before it answers, as the DeepSeek R1 distills, QwQ and
// Qwen3 do: words tokens of reasoning, then the simulated model's answer, cut at max_tokens
// as an engine cuts it, with the finish reason "length".
type thinker struct {
	*sim.Engine
	words int
	// channel sends the reasoning in its own field (as vLLM's reasoning parser and Ollama
	// do); else it is in the text, between <think> and </think>.
	channel bool
	mu      sync.Mutex
	asked   []int // the max_tokens of the requests, in order
}

func (e *thinker) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	e.mu.Lock()
	e.asked = append(e.asked, req.MaxTokens)
	e.mu.Unlock()
	var tokens []protocol.Delta
	if !e.channel {
		tokens = append(tokens, protocol.Delta{Text: "<think>"})
	}
	for i := range e.words {
		w := "hmm "
		if i%7 == 0 {
			w = "so, "
		}
		if e.channel {
			tokens = append(tokens, protocol.Delta{Reasoning: w})
		} else {
			tokens = append(tokens, protocol.Delta{Text: w})
		}
	}
	if !e.channel {
		tokens = append(tokens, protocol.Delta{Text: "</think>\n\n"})
	}
	for _, w := range strings.SplitAfter(e.Answer(req), " ") {
		tokens = append(tokens, protocol.Delta{Text: w})
	}
	finish := "stop"
	if req.MaxTokens > 0 && len(tokens) > req.MaxTokens {
		tokens, finish = tokens[:req.MaxTokens], "length"
	}
	// Many tokens a delta, as engines batch them.
	for i := 0; i < len(tokens); i += 64 {
		var d protocol.Delta
		for _, t := range tokens[i:min(i+64, len(tokens))] {
			d.Text += t.Text
			d.Reasoning += t.Reasoning
		}
		if err := out.Delta(d); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{FinishReason: finish, Usage: protocol.Usage{PromptTokens: 40, CompletionTokens: len(tokens)}}, nil
}

func (e *thinker) maxTokens() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.asked...)
}

// A model that reasons at length before it answers is not failed for being cut short: a
// model of a reasoning family gets room to reason at once, and any other once it is seen
// reasoning (its first checks, cut short, decide nothing); both are verified, no check failed.
// One that never stops reasoning is failed, after a few checks cut short in a row, and
// quarantined: a node cannot escape every check by answering "length".
func TestOnboarding_ReasoningModels(t *testing.T) {
	const (
		r1      = "acme/deepseek-r1-distill-qwen-7b" // a reasoning family, by its name
		mystery = "acme/mystery-7b"                  // a name that tells nothing
		looping = "acme/qwq-32b"                     // reasons and never answers
	)
	engines := []*thinker{
		{Engine: sim.New(sim.Config{Models: modelsNamed(r1)}), words: 1500},
		{Engine: sim.New(sim.Config{Models: modelsNamed(mystery)}), words: 600, channel: true},
		{Engine: sim.New(sim.Config{Models: modelsNamed(looping)}), words: 100000},
	}
	env := testenv.New(t, testenv.Providers(3), func(c *testenv.Config) {
		c.Coordinator.Fleet.TrustNewNodes = false
		c.NewEngine = func(i int) (engine.Engine, error) {
			return engines[i], nil
		}
	})
	env.WaitFor("the reasoning models verified, the looping one quarantined", func() bool {
		return level(env, 0) == store.LevelVerified && level(env, 1) == store.LevelVerified &&
			offerLevel(env, 2, looping) == store.LevelQuarantined
	})
	for i, model := range []string{r1, mystery} {
		for _, c := range checks(t, env, i) {
			if !c.Passed {
				t.Errorf("%s: a failed check: %s", model, c.Detail)
			}
		}
		asked := engines[i].maxTokens()
		t.Logf("%s: max_tokens asked %v", model, asked)
		if asked[len(asked)-1] < 3000 {
			t.Errorf("%s: last asked for max_tokens %d; want room to reason", model, asked[len(asked)-1])
		}
	}
	if asked := engines[0].maxTokens(); asked[0] < 3000 {
		t.Errorf("%s: first asked for max_tokens %d; want room to reason from the first check", r1, asked[0])
	}
	cs := checks(t, env, 2)
	for _, c := range cs {
		if c.Passed || !strings.Contains(c.Detail, "cut by max_tokens") {
			t.Errorf("%s: check %+v; want failed, cut short", looping, c)
		}
	}
	t.Logf("%s: %d checks failed, the last: %s", looping, len(cs), cs[0].Detail)
	if everVerified(t, env, node(env, 2), looping) {
		t.Errorf("%s was verified", looping)
	}
}
