package core

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/roulette"
	"github.com/shareai/shareai/internal/store"
)

// Model roulette: a request with a split (its own, or else its key's default) is served by an
// arm drawn here, in Prepare, so that every caller gets it. Within an account, the requests
// under one split (as it applies to their default model: api.Split.With) take the arms in
// turn (roulette.Rotations), so that over many requests the shares are exact. A request with
// a session (X-Session-Id, or the body's user) takes instead the arm a hash of the session
// picks (roulette.Sticky), the same for every request of the conversation, so that it does
// not change model; those requests do not turn the rotation. The arm drawn is tried first,
// then the request's model, then its fallbacks: a drawn arm no node serves is served by the
// default.
//
// The rotations are in memory, per coordinator process: with several replicas, each keeps
// its own, and the shares are exact per replica.

// splitOf is the request's split, or else its key's default; nil for none. A request pinned to
// its node has none.
func splitOf(r *Request) (api.Split, error) {
	if r.Offer != nil {
		return nil, nil
	}
	s, aerr := api.ParseSplit(r.Routing.Split)
	if aerr != nil {
		return nil, aerr
	}
	if s == nil && r.Key != nil && len(r.Key.Split) > 0 {
		if s, aerr = api.ParseSplit(r.Key.Split); aerr != nil {
			return nil, fmt.Errorf("default split of key %s: %s", r.Key.ID, aerr.Message)
		}
	}
	return s, nil
}

// drawArm draws the arm of a request with a split: the models to try (the arm, the request's
// model, its fallbacks), and the split as it applied, in its written form. Every arm must be
// one the key may use (403 model_not_allowed naming it), before anything is held. A request
// without a split tries its model then its fallbacks.
func (c *Core) drawArm(r *Request, fallbacks []string) (models []string, split string, err error) {
	s, err := splitOf(r)
	if err != nil || s == nil {
		return modelsToTry(r.Job.Model, fallbacks), "", err
	}
	for _, a := range s {
		if err := c.allowed(r.Key, "split."+a.Model, a.Model); err != nil {
			return nil, "", err
		}
	}
	s = s.With(r.Job.Model)
	split = s.String()
	var arm string
	if r.Session != "" {
		arm = roulette.Sticky(r.Account+"\x00"+r.Session+"\x00"+split, s)
	} else {
		arm = c.roulette.Draw(r.Account+"\x00"+split, s)
	}
	r.arm = arm
	return modelsToTry(arm, append([]string{r.Job.Model}, fallbacks...)), split, nil
}

// allowed is nil when the key may use the model (named at param), else the buyer's 403. A nil
// key, or one that lists no models, may use any.
func (c *Core) allowed(k *store.Key, param, model string) error {
	if k == nil || len(k.Models) == 0 {
		return nil
	}
	if base, _ := c.resolveModel(model); slices.Contains(k.Models, model) || slices.Contains(k.Models, base) {
		return nil
	}
	return &api.Error{Status: http.StatusForbidden, Type: api.TypePermission, Param: param, Code: api.CodeModelNotAllowed,
		Message: fmt.Sprintf("This API key may use only these models: %s; not '%s'.", strings.Join(k.Models, ", "), model)}
}
