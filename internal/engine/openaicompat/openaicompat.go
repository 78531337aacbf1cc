// Package openaicompat is the provider agent's engine for any server that speaks OpenAI's
// streaming chat and text completion API: vLLM, llama.cpp's llama-server, SGLang, LM Studio,
// Ollama's /v1, or another ShareAI gateway.
//
// Every job is sent with "stream": true and "stream_options": {"include_usage": true}, and the
// server-sent events are read the way real servers write them (see shared/ENGINES.md): a
// role-only first chunk, usage in a chunk with empty choices or in every chunk, non-standard
// fields, errors in the middle of a stream, and streams cut before their "[DONE]". Its tests
// replay exchanges recorded from llama.cpp's llama-server and samples of vLLM (0.5 to 0.10.1+,
// vLLM-Omni) and Ollama /v1 streams.
//
// This package imports only the standard library, api (for JSON strings), engine and protocol.
package openaicompat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/engine"
)

// Config configures an Engine.
type Config struct {
	// BaseURL is the server's OpenAI API root, such as http://127.0.0.1:8000/v1.
	BaseURL string
	// APIKey, when set, is sent as a Bearer token.
	APIKey string
	// Models are the models offered. When empty, they are discovered with GET {BaseURL}/models.
	Models []engine.Model
	// Upstream maps an offered model name to the name sent to the server; a name not in the map
	// is sent as it is.
	Upstream map[string]string
	// Client sends the requests. The default has its own transport that keeps many idle
	// connections per host and no overall timeout, since streams are long.
	Client *http.Client
	// Continue says how the server continues a partial assistant answer, so that this node can
	// take over answers other nodes left unfinished: ContinuePrefill, ContinueVLLM, or "" when
	// it cannot (the models are then offered without continuation).
	Continue string
}

// Engine runs jobs on an OpenAI-compatible server. It is safe for concurrent use.
type Engine struct {
	client    *http.Client
	chatURL   string
	complURL  string
	modelsURL string
	auth      string // Authorization header value, or ""
	models    []engine.Model
	upstream  map[string]string
	continues string // Config.Continue
}

var _ engine.Engine = (*Engine)(nil)

// New returns an engine for the server at cfg.BaseURL.
func New(cfg Config) (*Engine, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		return nil, errors.New("openai engine: base URL is required")
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("openai engine: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("openai engine: base URL %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("openai engine: base URL %q: no host", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("openai engine: base URL %q: must not have a query or fragment", base)
	}
	for _, m := range cfg.Models {
		if m.Name == "" {
			return nil, errors.New("openai engine: a configured model has no name")
		}
	}
	switch cfg.Continue {
	case "", ContinuePrefill, ContinueVLLM:
	default:
		return nil, fmt.Errorf("openai engine: continue %q: want %q, %q or nothing", cfg.Continue, ContinuePrefill, ContinueVLLM)
	}
	e := &Engine{
		client:    cfg.Client,
		chatURL:   base + "/chat/completions",
		complURL:  base + "/completions",
		modelsURL: base + "/models",
		models:    slices.Clone(cfg.Models),
		upstream:  cfg.Upstream,
		continues: cfg.Continue,
	}
	for i := range e.models {
		e.models[i].Continues = e.continues != ""
	}
	if e.client == nil {
		e.client = defaultClient()
	}
	if cfg.APIKey != "" {
		e.auth = "Bearer " + cfg.APIKey
	}
	return e, nil
}

func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Streams are small events; compressing them costs CPU on both ends and can hold
		// events back in the server's compressor.
		DisableCompression: true,
	}}
}

// Name returns "openai".
func (e *Engine) Name() string { return "openai" }

// upstreamName is the model name sent to the server for an offered name.
func (e *Engine) upstreamName(offered string) string {
	if u, ok := e.upstream[offered]; ok && u != "" {
		return u
	}
	return offered
}

// Models returns the configured models, or asks the server with GET {BaseURL}/models. The
// context length comes from vLLM's max_model_len, ShareAI's context_length or llama.cpp's
// meta.n_ctx, 0 when none is
// given. A discovered model that Config.Upstream maps offered names to is listed under those
// names.
func (e *Engine) Models(ctx context.Context) ([]engine.Model, error) {
	if len(e.models) > 0 {
		return slices.Clone(e.models), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.modelsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("openai engine: list models: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if e.auth != "" {
		req.Header.Set("Authorization", e.auth)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("openai engine: list models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("openai engine: list models: %w", statusError(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
	if err != nil {
		return nil, fmt.Errorf("openai engine: list models: %w", err)
	}
	return e.parseModels(body)
}

const maxModelsBody = 16 << 20

// modelList is the answer of GET /models. llama.cpp also sends an Ollama-style "models" list,
// which is ignored.
type modelList struct {
	Data []struct {
		ID            string `json:"id"`
		MaxModelLen   int    `json:"max_model_len"`  // vLLM, SGLang
		ContextLength int    `json:"context_length"` // ShareAI, OpenRouter
		Meta          *struct {
			NCtx int `json:"n_ctx"` // llama.cpp
		} `json:"meta"`
	} `json:"data"`
}

func (e *Engine) parseModels(body []byte) ([]engine.Model, error) {
	var list modelList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("openai engine: list models: %w", err)
	}
	offered := make(map[string][]string, len(e.upstream)) // upstream name → offered names
	for o, u := range e.upstream {
		if u != "" && u != o {
			offered[u] = append(offered[u], o)
		}
	}
	models := make([]engine.Model, 0, len(list.Data))
	for _, d := range list.Data {
		if d.ID == "" {
			continue
		}
		ctxLen := cmp.Or(d.MaxModelLen, d.ContextLength)
		if ctxLen == 0 && d.Meta != nil {
			ctxLen = d.Meta.NCtx
		}
		names := offered[d.ID]
		if len(names) == 0 {
			names = []string{d.ID}
		}
		slices.Sort(names)
		for _, n := range names {
			models = append(models, engine.Model{Name: n, ContextLength: max(ctxLen, 0), Continues: e.continues != ""})
		}
	}
	return models, nil
}
