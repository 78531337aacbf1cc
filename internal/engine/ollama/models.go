package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/engine"
)

// modelList is the answer of GET /api/tags (installed models) and GET /api/ps (loaded ones).
// Fields not read here (modified_at, family, expires_at, size_vram, context_length) are
// ignored.
type modelList struct {
	Models []struct {
		Name    string `json:"name"`
		Model   string `json:"model"`
		Size    int64  `json:"size"`
		Digest  string `json:"digest"`
		Details struct {
			ParameterSize     string `json:"parameter_size"`
			QuantizationLevel string `json:"quantization_level"`
		} `json:"details"`
	} `json:"models"`
}

// Models lists the offered models Ollama has installed (GET /api/tags): their quantization,
// parameters and weights size from the list; their context length from POST /api/show,
// asked once per model and digest (0 when it fails or says none). They continue answers when
// Ollama is 0.2.8 or later (GET /api/version).
func (e *Engine) Models(ctx context.Context) ([]engine.Model, error) {
	var tags modelList
	if err := e.getJSON(ctx, "/api/tags", &tags); err != nil {
		return nil, fmt.Errorf("ollama engine: list models: %w", err)
	}
	continues, err := e.continues(ctx)
	if err != nil {
		return nil, fmt.Errorf("ollama engine: version: %w", err)
	}
	installed := make(map[string]int, len(tags.Models)) // canonical name → index in tags
	for i, m := range tags.Models {
		installed[canonical(nameOf(m.Name, m.Model))] = i
	}
	names := e.offered
	if names == nil {
		names = make([]string, 0, len(tags.Models))
		for _, m := range tags.Models {
			names = append(names, nameOf(m.Name, m.Model))
		}
	}
	models := make([]engine.Model, 0, len(names))
	for _, name := range names {
		i, ok := installed[canonical(name)]
		if !ok || name == "" {
			continue
		}
		t := tags.Models[i]
		info, err := e.show(ctx, nameOf(t.Name, t.Model), t.Digest)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("ollama engine: show %s: %w", name, ctx.Err())
		}
		params := parseParameterSize(t.Details.ParameterSize)
		if params == 0 {
			params = float64(info.parameters) / 1e9
		}
		models = append(models, engine.Model{
			Name:          name,
			ContextLength: e.contextLength(info.contextLength),
			Continues:     continues,
			Quantization:  t.Details.QuantizationLevel,
			Parameters:    params,
			SizeBytes:     max(t.Size, 0),
		})
	}
	return models, nil
}

// Loaded lists the offered models Ollama holds in memory now (GET /api/ps): the warm set.
func (e *Engine) Loaded(ctx context.Context) ([]string, error) {
	var ps modelList
	if err := e.getJSON(ctx, "/api/ps", &ps); err != nil {
		return nil, fmt.Errorf("ollama engine: list loaded models: %w", err)
	}
	offered := make(map[string]string, len(e.offered)) // canonical → as configured
	for _, n := range e.offered {
		offered[canonical(n)] = n
	}
	loaded := make([]string, 0, len(ps.Models))
	for _, m := range ps.Models {
		name := nameOf(m.Name, m.Model)
		if e.offered != nil {
			var ok bool
			if name, ok = offered[canonical(name)]; !ok {
				continue
			}
		}
		if name != "" {
			loaded = append(loaded, name)
		}
	}
	return loaded, nil
}

// contextLength is the context length offered for a model whose own is n (0: unknown).
func (e *Engine) contextLength(n int) int {
	if e.numCtx > 0 && (n == 0 || e.numCtx < n) {
		return e.numCtx
	}
	return n
}

// modelInfo is what /api/show tells of a model.
type modelInfo struct {
	contextLength int   // the model's own, 0 when unknown
	parameters    int64 // general.parameter_count, 0 when unknown
}

// showAnswer is the part of POST /api/show's answer read here. model_info has keys such as
// "general.architecture": "llama" and "llama.context_length": 8192.
type showAnswer struct {
	ModelInfo map[string]json.RawMessage `json:"model_info"`
}

// show asks /api/show about a model, once per name and digest.
func (e *Engine) show(ctx context.Context, name, digest string) (modelInfo, error) {
	key := name + "@" + digest
	e.mu.Lock()
	info, ok := e.shown[key]
	e.mu.Unlock()
	if ok {
		return info, nil
	}
	var ans showAnswer
	// "name" is what versions before the "model" field read.
	if err := e.postJSON(ctx, "/api/show", map[string]string{"model": name, "name": name}, &ans); err != nil {
		return modelInfo{}, err
	}
	info = ans.info()
	e.mu.Lock()
	e.shown[key] = info
	e.mu.Unlock()
	return info, nil
}

func (a *showAnswer) info() modelInfo {
	var info modelInfo
	var arch string
	json.Unmarshal(a.ModelInfo["general.architecture"], &arch)
	if arch != "" {
		json.Unmarshal(a.ModelInfo[arch+".context_length"], &info.contextLength)
	}
	json.Unmarshal(a.ModelInfo["general.parameter_count"], &info.parameters)
	info.contextLength = max(info.contextLength, 0)
	info.parameters = max(info.parameters, 0)
	return info
}

// parseParameterSize reads Ollama's details.parameter_size, such as "8.0B" or "494.03M", in
// billions; 0 when it cannot.
func parseParameterSize(s string) float64 {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	scale := 1.0
	switch s[len(s)-1] {
	case 'K', 'k':
		scale = 1e-6
	case 'M', 'm':
		scale = 1e-3
	case 'B', 'b':
		scale = 1
	case 'T', 't':
		scale = 1e3
	default:
		return 0
	}
	f, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil || f < 0 {
		return 0
	}
	return f * scale
}

// minContinueVersion is the first Ollama version that continues a trailing assistant message
// (github.com/ollama/ollama/issues/5775, fixed in 0.2.8).
var minContinueVersion = [3]int{0, 2, 8}

// continues reports whether Ollama continues a partial assistant answer: it is 0.2.8 or later.
// A server without /api/version predates it; a version that cannot be read (a build from
// source says "0.0.0") is taken to be recent.
func (e *Engine) continues(ctx context.Context) (bool, error) {
	var v struct {
		Version string `json:"version"`
	}
	err := e.getJSON(ctx, "/api/version", &v)
	if re, ok := errors.AsType[*engine.RequestError](err); ok && re.Status == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got, ok := parseVersion(v.Version)
	if !ok || got == [3]int{} {
		return true, nil
	}
	for i := range got {
		if got[i] != minContinueVersion[i] {
			return got[i] > minContinueVersion[i], nil
		}
	}
	return true, nil
}

// parseVersion reads "0.2.8", "v0.12.6" or "0.2.8-rc1" (a release candidate of 0.2.8).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	s, _, _ = strings.Cut(s, "+")
	s, _, _ = strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// nameOf is a listed model's name: "name", or "model" where a version gives only that.
func nameOf(name, model string) string {
	if name != "" {
		return name
	}
	return model
}

// canonical is a model name as Ollama resolves it, for comparing names: lower case, without
// the default registry and namespace, with the tag "latest" when it has none.
func canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	name = strings.TrimPrefix(name, "registry.ollama.ai/")
	name = strings.TrimPrefix(name, "library/")
	if i := strings.LastIndexByte(name, ':'); i < 0 || strings.Contains(name[i:], "/") {
		name += ":latest"
	}
	return name
}

// dedupe returns the names without repeats of the same model, trimmed, in order.
func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if c := canonical(n); !seen[c] {
			seen[c] = true
			out = append(out, n)
		}
	}
	return out
}
