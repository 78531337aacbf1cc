// Package ollama is the provider agent's engine for Ollama, spoken to in its native API
// (/api/chat, /api/generate, /api/tags, /api/ps, /api/show, /api/pull) rather than its
// OpenAI-compatible /v1, so that a node can report what the matcher needs (quantization,
// parameters, weights size, context length, the models loaded now) and pull models at start.
//
// What a provider needs to know:
//
//   - Continuing an answer another node left unfinished (mid-stream failover) needs Ollama
//     0.2.8 or later, which continues a chat whose last message is a partial assistant answer,
//     when the model's template leaves the last assistant turn open. Models asks /api/version
//     and offers continuation only from that version on.
//   - Ollama runs a model with its own context window (num_ctx: the Modelfile's, else
//     OLLAMA_CONTEXT_LENGTH, else its default, 2048 to 4096 tokens in most versions, more
//     on large GPUs in recent ones) and drops what does not fit. Set Config.NumCtx to run
//     every model with a known window; it is then what the node offers.
//   - Models listed in Config.Pull are pulled at start by EnsurePulled, which the agent calls;
//     a pull downloads gigabytes and may take many minutes.
//   - Ollama unloads a model left idle for 5 minutes (OLLAMA_KEEP_ALIVE sets how long); the
//     first job after that waits for the model to load. Loaded tells which are loaded now.
//
// Its tests replay samples of Ollama's answers from its API documentation and issue tracker.
//
// This package imports only the standard library, engine and protocol. It must not import the
// coordinator's packages.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/tracing"
)

// DefaultBaseURL is where Ollama listens by default.
const DefaultBaseURL = "http://127.0.0.1:11434"

// Config configures an Engine.
type Config struct {
	// BaseURL is Ollama's address, DefaultBaseURL when empty. It is the server's root, not
	// its /v1 or /api path.
	BaseURL string
	// Models are the models offered, as Ollama names them ("llama3.2" is "llama3.2:latest").
	// A listed model that is not installed is not offered. When empty, every installed model
	// is offered.
	Models []string
	// Pull are models EnsurePulled pulls when Ollama does not have them. They are offered
	// too, once installed.
	Pull []string
	// NumCtx, when above 0, is the context window in tokens every request runs with (Ollama's
	// num_ctx option), and what Models reports, capped by the model's own context length.
	// When 0, Models reports the model's own context length and Ollama uses its default
	// window, which may be smaller: prompts longer than it are cut by Ollama.
	NumCtx int
	// HTTPClient sends the requests. The default keeps idle connections and has no overall
	// timeout, since answers stream for long and pulls take minutes.
	HTTPClient *http.Client
}

// Engine runs jobs on an Ollama server. It is safe for concurrent use.
type Engine struct {
	client  *http.Client
	base    string // without a trailing slash
	offered []string
	pull    []string
	numCtx  int
	newID   func() string // tool call ids Ollama did not give

	mu    sync.Mutex
	shown map[string]modelInfo // by name and digest: what /api/show said
}

var (
	_ engine.Engine = (*Engine)(nil)
	_ engine.Loader = (*Engine)(nil)
)

// New returns an engine for the Ollama server at cfg.BaseURL. It does not contact the server.
func New(cfg Config) (*Engine, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("ollama engine: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("ollama engine: base URL %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("ollama engine: base URL %q: no host", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("ollama engine: base URL %q: must not have a query or fragment", base)
	}
	if cfg.NumCtx < 0 {
		return nil, fmt.Errorf("ollama engine: num_ctx %d is negative", cfg.NumCtx)
	}
	e := &Engine{
		client: cfg.HTTPClient,
		base:   base,
		numCtx: cfg.NumCtx,
		newID:  randomCallID,
		shown:  make(map[string]modelInfo),
	}
	if e.client == nil {
		e.client = defaultClient()
	}
	for _, names := range [][]string{cfg.Models, cfg.Pull} {
		for _, n := range names {
			if strings.TrimSpace(n) == "" {
				return nil, errors.New("ollama engine: a configured model has no name")
			}
		}
	}
	if len(cfg.Models) > 0 {
		e.offered = dedupe(append(append([]string(nil), cfg.Models...), cfg.Pull...))
	}
	e.pull = dedupe(cfg.Pull)
	return e, nil
}

func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Streams are small objects; compressing them costs CPU and can hold them back.
		DisableCompression: true,
	}}
}

// Name returns "ollama".
func (e *Engine) Name() string { return "ollama" }

// post sends body as JSON to path and returns the answer, which the caller closes. An answer
// that is not 2xx is turned into an error by statusError.
func (e *Engine) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return e.do(req)
}

// get asks path and returns the answer, which the caller closes.
func (e *Engine) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	if err != nil {
		return nil, err
	}
	return e.do(req)
}

func (e *Engine) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("Accept", "application/json, application/x-ndjson")
	tracing.InjectHTTP(req.Context(), req.Header) // the agent's engine span, if traced
	resp, err := e.client.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, statusError(resp)
	}
	return resp, nil
}

// getJSON asks path and decodes its JSON answer into v.
func (e *Engine) getJSON(ctx context.Context, path string, v any) error {
	resp, err := e.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeBody(resp.Body, v)
}

// postJSON sends body to path and decodes the JSON answer into v.
func (e *Engine) postJSON(ctx context.Context, path string, body, v any) error {
	resp, err := e.post(ctx, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeBody(resp.Body, v)
}

// maxBody bounds a JSON answer that is not a stream (a model list, a model's details).
const maxBody = 16 << 20

func decodeBody(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxBody))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bad answer %q: %w", clip(string(b)), err)
	}
	return nil
}

// marshal encodes v as JSON without escaping HTML, so the buyer's text reaches Ollama as sent.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
