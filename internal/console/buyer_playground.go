package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/store"
)

// The playground sends a prompt through the buyer API in-process, as the account, without any
// API key ever reaching the browser.
//
// The console holds no key of the account's it could use: only hashes of secrets are stored.
// So each chat mints a key of its own (named "console"), serves the chat with it, and revokes
// it when the answer has ended, whether it ended well or not. The secret lives only on the
// stack of the one request that made it: nothing to expire, nothing to leak on a restart (a
// crash between the two leaves a key whose secret nobody holds), and it works the same when
// several coordinators share the database. The cost is two small writes a chat; the keys
// page leaves the revoked console keys out. Usage is the account's, as for any of its keys:
// the account's spend caps and balance apply.

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

func (c *Console) playground(w http.ResponseWriter, r *http.Request) {
	p := playgroundPage{Sorts: []string{matcher.SortPrice, matcher.SortLatency, matcher.SortThroughput}}
	if c.cfg.Fleet != nil {
		for _, m := range c.cfg.Fleet.Models() {
			p.Models = append(p.Models, m.ID)
		}
	}
	c.render(w, r, http.StatusOK, "buyer_playground", p)
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
// request, through the buyer API with a key minted for this chat alone. The answer is the
// API's own: server-sent events, or an OpenAI error in JSON.
func (c *Console) playgroundChat(w http.ResponseWriter, r *http.Request) {
	ctx, acct := r.Context(), sessionOf(r).user.AccountID
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if c.cfg.API == nil {
		(&api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Message: "The playground is not available here."}).Write(w)
		return
	}
	model, prompt := strings.TrimSpace(r.PostFormValue("model")), r.PostFormValue("prompt")
	switch {
	case model == "":
		api.BadRequest("model", api.CodeInvalidValue, "Choose a model.").Write(w)
		return
	case strings.TrimSpace(prompt) == "":
		api.BadRequest("messages", api.CodeInvalidValue, "Write a prompt.").Write(w)
		return
	case len(prompt) > maxPrompt:
		api.BadRequest("messages", api.CodeInvalidValue, "The prompt is longer than %d bytes.", maxPrompt).Write(w)
		return
	}
	provider, err := playgroundPrefs(r)
	if ae := (*api.Error)(nil); errors.As(err, &ae) {
		ae.Write(w)
		return
	} else if err != nil {
		c.chatFail(w, r, err)
		return
	}
	body, err := json.Marshal(chatRequest{Model: model, Messages: []chatMessage{{Role: "user", Content: prompt}},
		Stream: true, StreamOptions: streamOptions{IncludeUsage: true}, Provider: provider})
	if err != nil {
		c.chatFail(w, r, err)
		return
	}

	secret, k := store.NewKey(acct, store.KeyBuyer, consoleKeyName, c.cfg.Now())
	if err := c.cfg.Store.CreateKey(ctx, k); err != nil {
		c.chatFail(w, r, err)
		return
	}
	defer func() {
		// Even when the browser went away: the key must not outlive its chat.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := c.cfg.Store.RevokeKey(rctx, k.ID, c.cfg.Now()); err != nil {
			c.log.ErrorContext(r.Context(), "console: revoke the playground's key", "account", acct, "key", k.ID, "err", err)
		}
	}()

	r2, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		c.chatFail(w, r, err)
		return
	}
	r2.Host, r2.RemoteAddr, r2.TLS = r.Host, r.RemoteAddr, r.TLS
	r2.Header.Set("Authorization", "Bearer "+secret)
	r2.Header.Set("Content-Type", "application/json")
	r2.Header.Set("Accept", "text/event-stream")
	r2.Header.Set("User-Agent", "shareai-console")
	// w is the browser's: the API streams its events straight to it, flushing as it goes.
	c.cfg.API.ServeHTTP(w, r2)
}

// chatFail answers the playground's script a failure it cannot fix, as the API would: an
// OpenAI error in JSON, the cause logged.
func (c *Console) chatFail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console: playground", "path", r.URL.Path, "err", err)
	(&api.Error{Status: http.StatusInternalServerError, Type: api.TypeServer, Message: "The playground had an error; try again."}).Write(w)
}
