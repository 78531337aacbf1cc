package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
)

// The playground runs a prompt through the request core in-process, paid by the signed-in
// buyer's account itself: no API key is made, and none ever reaches the browser. The account's
// spend caps and balance apply, as for any of its keys; the answer is the API's own, streamed
// as server-sent events, and its usage and receipts are recorded as any request's.

// Bounds of the playground's form.
const (
	maxPrompt     = 32 << 10 // bytes
	maxRegionList = 32
)

// playgroundPage is /buyer/playground's data.
type playgroundPage struct {
	Models []string // the models served now
	Sorts  []string
}

func (c *Console) playground(w http.ResponseWriter, r *http.Request) error {
	p := playgroundPage{Sorts: []string{matcher.SortPrice, matcher.SortLatency, matcher.SortThroughput}}
	if c.cfg.Fleet != nil {
		for _, m := range c.cfg.Fleet.Models() {
			p.Models = append(p.Models, m.ID)
		}
	}
	c.render(w, r, http.StatusOK, "buyer_playground", p)
	return nil
}

// chatRequest is the OpenAI chat request the playground makes.
type chatRequest struct {
	Model         string          `json:"model"`
	Messages      []chatMessage   `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions streamOptions   `json:"stream_options"`
	Provider      json.RawMessage `json:"provider,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// playgroundPrefs reads the form's routing preferences into a request's provider object: nil
// when it asks for none. Errors are *api.Error, naming the field.
func playgroundPrefs(r *http.Request) (json.RawMessage, error) {
	provider := map[string]any{}
	if s := strings.TrimSpace(r.PostFormValue("sort")); s != "" {
		provider["sort"] = s
	}
	var regions []string
	for _, f := range strings.FieldsFunc(r.PostFormValue("regions"), func(r rune) bool { return r == ',' || r == ' ' }) {
		regions = append(regions, f)
	}
	if len(regions) > maxRegionList {
		return nil, api.BadRequest("provider.regions", api.CodeInvalidValue, "At most %d regions.", maxRegionList)
	}
	if len(regions) > 0 {
		provider["regions"] = regions
	}
	maxPrice := map[string]string{}
	for field, name := range map[string]string{"prompt": "max_price_prompt", "completion": "max_price_completion"} {
		if s := strings.TrimSpace(r.PostFormValue(name)); s != "" {
			maxPrice[field] = s
		}
	}
	if len(maxPrice) > 0 {
		provider["max_price"] = maxPrice
	}
	if len(provider) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(provider)
	if err != nil {
		return nil, err
	}
	if _, err := matcher.ParsePrefs(b); err != nil {
		var fe *matcher.FieldError
		if errors.As(err, &fe) {
			return nil, api.BadRequest(fe.Field, api.CodeInvalidValue, "%s", fe.Error())
		}
		return nil, api.BadRequest("provider", api.CodeInvalidValue, "%s", err.Error())
	}
	return b, nil
}

// playgroundChat serves POST /buyer/playground/chat: the form's prompt as a streamed chat
// request, decoded and validated as the API would, and run by the request core for the
// account. The answer is the API's own: server-sent events, or an OpenAI error in JSON.
func (c *Console) playgroundChat(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if c.cfg.Core == nil {
		return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Message: "The playground is not available here."}
	}
	ctx, _, release := c.cfg.Core.Track(r.Context()) // a shutdown's drain covers the chat from here
	defer release()
	out, err := c.chat(w, r.WithContext(ctx))
	var u *store.Usage
	if out != nil {
		u = out.Usage
	}
	c.cfg.Metrics.RequestEnded(core.RequestMetrics(protocol.KindChat, u, err)) // counted with the API's
	return apiError(err)
}

// chat decodes the playground's form into a streamed chat and serves it, for the account.
func (c *Console) chat(w http.ResponseWriter, r *http.Request) (*core.Outcome, error) {
	model, prompt := strings.TrimSpace(r.PostFormValue("model")), r.PostFormValue("prompt")
	switch {
	case model == "":
		return nil, api.BadRequest("model", api.CodeInvalidValue, "Choose a model.")
	case strings.TrimSpace(prompt) == "":
		return nil, api.BadRequest("messages", api.CodeInvalidValue, "Write a prompt.")
	case len(prompt) > maxPrompt:
		return nil, api.BadRequest("messages", api.CodeInvalidValue, "The prompt is longer than %d bytes.", maxPrompt)
	}
	provider, err := playgroundPrefs(r)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(chatRequest{Model: model, Messages: []chatMessage{{Role: "user", Content: prompt}},
		Stream: true, StreamOptions: streamOptions{IncludeUsage: true}, Provider: provider})
	if err != nil {
		return nil, err
	}
	var chat api.ChatRequest
	if err := api.Decode(bytes.NewReader(body), &chat); err != nil {
		return nil, err
	}
	job, aerr := chat.Job() // an *api.Error: kept apart, lest a nil one become a non-nil error
	if aerr != nil {
		return nil, aerr
	}
	req := &core.Request{ID: requestid.From(r.Context()), Account: sessionOf(r).user.AccountID, Job: job, Routing: chat.Routing, Stream: true,
		Answer: func(b core.Begin) relay.Sink {
			b.Answer.IncludeUsage = true
			return relay.NewChatStream(w, b.Answer) // w is the browser's: the answer streams straight to it
		}}
	defer c.cfg.Metrics.RequestStarted(true)()
	return c.cfg.Core.Serve(r.Context(), req)
}

// apiError is err as the playground's script reads it, an OpenAI error: itself when it is one,
// else a 500 whose cause is logged, not shown.
func apiError(err error) error {
	if _, ok := errors.AsType[*api.Error](err); err == nil || ok {
		return err
	}
	return &api.Error{Status: http.StatusInternalServerError, Type: api.TypeServer, Message: "The playground had an error; try again.", Cause: err}
}
