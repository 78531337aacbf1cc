// Package sim simulates a GPU: an engine that answers every request at once or at a set speed,
// with readable text that is a pure function of the request, for demos, tests and capacity
// planning. Two sim engines with the same salt give the same answer to the same request, so a
// buyer's stream can be checked, cut and continued on another node (failover) exactly; an
// engine with another salt plays a node that cheats.
//
// An answer is a sequence of tokens, each one word with its leading space and punctuation,
// emitted one per delta. It is random text, except that the simulated model follows a few
// simple instructions (repeat a code, a small sum, words in capitals: see instructed), so that
// it passes the checks that tell a language model from a text generator. A chat whose last message is the assistant's text P continues the
// answer: when the natural answer starts with P, Run emits exactly the rest of it.
//
// This package imports only the standard library and the engine and protocol packages.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// Config configures a simulated engine.
type Config struct {
	// Models are the models the engine serves; by default DefaultModels.
	Models []engine.Model
	// TTFT is the delay before the first delta.
	TTFT time.Duration
	// TokensPerSecond is the speed after the first delta; 0 means no delay.
	TokensPerSecond float64
	// Salt changes every answer: an engine with a different salt plays a node that cheats.
	Salt string
}

// DefaultModels are the models an engine serves when its Config lists none.
var DefaultModels = []engine.Model{
	{Name: "sim/llama-3.1-8b", ContextLength: 8192},
	{Name: "sim/qwen-2.5-7b", ContextLength: 32768},
}

// Engine is a simulated engine. It is safe for concurrent use.
type Engine struct {
	models []engine.Model
	ttft   time.Duration
	gap    time.Duration // between deltas
	salt   string
}

var _ engine.Engine = (*Engine)(nil)

// New returns an engine configured by cfg.
func New(cfg Config) *Engine {
	e := &Engine{models: slices.Clone(cfg.Models), ttft: max(cfg.TTFT, 0), salt: cfg.Salt}
	if len(e.models) == 0 {
		e.models = slices.Clone(DefaultModels)
	}
	if cfg.TokensPerSecond > 0 {
		e.gap = time.Duration(float64(time.Second) / cfg.TokensPerSecond)
	}
	return e
}

// Name returns "sim".
func (e *Engine) Name() string { return "sim" }

// Models returns the configured models.
func (e *Engine) Models(context.Context) ([]engine.Model, error) {
	ms := slices.Clone(e.models)
	for i := range ms {
		ms[i].Continues = true // a simulated answer continues exactly from any prefix
	}
	return ms, nil
}

// job is what Run emits for a request: text, or a tool call.
type job struct {
	promptTokens int
	text         text
	before       int               // tokens of the answer wholly in the partial answer continued
	toolCall     []json.RawMessage // deltas of a tool call; nil for text
	arguments    string            // the tool call's arguments
}

// prepare computes the whole answer to req.
func (e *Engine) prepare(req *protocol.Request) (job, error) {
	conv, err := e.parseConversation(req)
	if err != nil {
		return job{}, err
	}
	j := job{promptTokens: conv.promptTokens}
	name, call, err := toolToCall(req)
	if err != nil {
		return job{}, err
	}
	if call {
		r := newRNG(append(conv.key[:len(conv.key):len(conv.key)], tagToolCall))
		j.toolCall, j.arguments = toolCallDeltas(&r, name)
		return j, nil
	}
	asJSON, err := wantsJSON(req)
	if err != nil {
		return job{}, err
	}
	r := conv.answerRNG()
	if !asJSON && !conv.continued {
		if s, ok := instructed(conv.instruction, &r); ok {
			j.text = plainText(s)
			return j, nil
		}
	}
	j.text = naturalAnswer(&r, asJSON)
	if conv.continued {
		if s, n := j.text.s, len(conv.prefix); strings.HasPrefix(s, conv.prefix) && (n == len(s) || utf8.RuneStart(s[n])) {
			whole := len(j.text.ends)
			j.text = j.text.after(len(conv.prefix))
			j.before = whole - len(j.text.ends)
		} else {
			r := conv.continuationRNG()
			j.text = continuation(&r, conv.prefix)
		}
	}
	return j, nil
}

// Answer returns the whole answer to req, as Run would emit it without max_tokens and stop
// strings, and with the prefix it continues: for a chat that ends with the assistant's text P,
// Answer starts with P and Run emits the rest. For a request that makes the model call a tool,
// Answer returns the call's arguments. It returns "" for a request Run refuses as malformed.
func (e *Engine) Answer(req *protocol.Request) string {
	j, err := e.prepare(req)
	if err != nil {
		return ""
	}
	if j.toolCall != nil {
		return j.arguments
	}
	return j.text.s
}

// Loaded lists the models loaded: a simulated GPU holds all of them.
func (e *Engine) Loaded(ctx context.Context) ([]string, error) {
	names := make([]string, len(e.models))
	for i, m := range e.models {
		names[i] = m.Name
	}
	return names, nil
}

// Run streams the answer to req, one token per delta, waiting TTFT before the first delta and
// 1/TokensPerSecond between deltas. It refuses models it does not serve, prompts longer than
// the model's context, and malformed requests with a *engine.RequestError. max_tokens and stop
// strings do not apply to tool calls.
func (e *Engine) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	i := slices.IndexFunc(e.models, func(m engine.Model) bool { return m.Name == req.Model })
	if i < 0 {
		return engine.Result{}, &engine.RequestError{Status: 404, Message: fmt.Sprintf("model %q not found", req.Model)}
	}
	j, err := e.prepare(req)
	if err != nil {
		return engine.Result{}, err
	}
	if n := e.models[i].ContextLength; n > 0 && j.promptTokens > n {
		return engine.Result{}, badRequest("prompt of %d tokens exceeds the context length of %d of model %q", j.promptTokens, n, req.Model)
	}

	p := pacer{ttft: e.ttft, gap: e.gap, done: ctx.Done(), flush: out.Flush}
	defer p.stop()
	res := engine.Result{Usage: protocol.Usage{PromptTokens: j.promptTokens}}
	send := func(d protocol.Delta) error {
		if err := p.wait(ctx); err != nil {
			return err
		}
		return out.Delta(d)
	}

	if j.toolCall != nil {
		for _, tc := range j.toolCall {
			if err := send(protocol.Delta{ToolCalls: tc}); err != nil {
				return engine.Result{}, err
			}
		}
		res.Usage.CompletionTokens = len(j.toolCall) - 1 // a token per piece of the arguments
		res.FinishReason = "tool_calls"
		return res, nil
	}

	t := j.text
	cut, _ := t.cut(req.Stop)
	res.FinishReason = "stop"
	limit := req.MaxTokens
	if req.Continue && limit > 0 {
		// A continuation's max_tokens counts the whole answer, the partial one included.
		limit = max(limit-j.before, 0)
		if limit == 0 {
			return engine.Result{FinishReason: "length", Usage: res.Usage}, nil
		}
	}
	start := t.from
	for k, end := range t.ends {
		if start >= cut {
			break
		}
		if limit > 0 && k == limit {
			res.FinishReason = "length"
			break
		}
		if err := send(protocol.Delta{Text: t.s[start:min(end, cut)]}); err != nil {
			return engine.Result{}, err
		}
		res.Usage.CompletionTokens++
		start = end
	}
	if p.n == 0 { // the prompt takes its time even when nothing follows
		if err := p.wait(ctx); err != nil {
			return engine.Result{}, err
		}
	}
	return res, nil
}

// pacer waits before each delta, on one timer that stops at once when ctx is done.
type pacer struct {
	ttft, gap time.Duration
	done      <-chan struct{}
	flush     func() error // sends what the output holds before a real wait
	timer     *time.Timer
	n         int // waits so far
}

func (p *pacer) wait(ctx context.Context) error {
	d := p.gap
	if p.n == 0 {
		d = p.ttft
	}
	p.n++
	if d <= 0 {
		select {
		case <-p.done:
			return ctx.Err()
		default:
			return nil
		}
	}
	if err := p.flush(); err != nil {
		return err
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.done:
		return ctx.Err()
	case <-p.timer.C:
		return nil
	}
}

func (p *pacer) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}
