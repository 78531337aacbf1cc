package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// Log keys.
const (
	logModel  = "model"
	logStatus = "status"
)

// pullRequest is the body of POST /api/pull.
type pullRequest struct {
	Model  string `json:"model"`
	Name   string `json:"name"` // what versions before the "model" field read
	Stream bool   `json:"stream"`
}

// progressLine is one object of a pull's stream: a status ("pulling manifest", "pulling
// 6a0746a1ec1a" for each layer with its total and completed bytes, "verifying sha256 digest",
// "writing manifest", "success") or an error.
type progressLine struct {
	Status    string          `json:"status"`
	Total     int64           `json:"total"`
	Completed int64           `json:"completed"`
	Error     json.RawMessage `json:"error"`
}

// Pull downloads model into Ollama (POST /api/pull), calling progress, when not nil, with each
// progress line Ollama sends: its status and, while a layer downloads, the bytes completed of
// its total (0 when Ollama gives none). Pulling a model Ollama has checks it is up to date
// and downloads only what changed. Ollama resumes a pull cut short where it stopped.
//
// Pull returns when Ollama says "success". An answer that is not 2xx, an {"error": ...} line
// (Ollama's way to say there is no such model, "pull model manifest: file does not exist", or
// that a download failed) or a stream that ends before "success" is an error.
func (e *Engine) Pull(ctx context.Context, model string, progress func(status string, completed, total int64)) error {
	resp, err := e.post(ctx, "/api/pull", pullRequest{Model: model, Name: model, Stream: true})
	if err != nil {
		return fmt.Errorf("ollama engine: pull %s: %w", model, err)
	}
	defer resp.Body.Close()
	objs := newObjects(resp.Body, nil)
	for {
		var p progressLine
		if err := objs.next(&p); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("ollama engine: pull %s: %w", model, ctx.Err())
			}
			if err == io.EOF {
				err = errors.New(`stream ended before "success"`)
			}
			return fmt.Errorf("ollama engine: pull %s: %w", model, err)
		}
		if !isUnset(p.Error) {
			return fmt.Errorf("ollama engine: pull %s: %s", model, errorText(p.Error))
		}
		if progress != nil {
			progress(p.Status, p.Completed, p.Total)
		}
		if p.Status == "success" {
			return nil
		}
	}
}

// EnsurePulled pulls, one after another, the models of Config.Pull that Ollama does not have
// (GET /api/tags), logging each status and every tenth of a layer's download to log (nil: no
// log). It goes on after a failed pull and returns the failures joined; it stops when ctx is
// done.
func (e *Engine) EnsurePulled(ctx context.Context, log *slog.Logger) error {
	if len(e.pull) == 0 {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tags modelList
	if err := e.getJSON(ctx, "/api/tags", &tags); err != nil {
		return fmt.Errorf("ollama engine: list models: %w", err)
	}
	installed := make(map[string]bool, len(tags.Models))
	for _, m := range tags.Models {
		installed[canonical(nameOf(m.Name, m.Model))] = true
	}
	var errs []error
	for _, model := range e.pull {
		if installed[canonical(model)] {
			continue
		}
		log.Info("pulling model", logModel, model)
		if err := e.Pull(ctx, model, logProgress(log, model)); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		log.Info("pulled model", logModel, model)
	}
	return errors.Join(errs...)
}

// logProgress is a Pull progress function that logs each new status and every further tenth
// of a download.
func logProgress(log *slog.Logger, model string) func(status string, completed, total int64) {
	var last string
	var tenths int64
	return func(status string, completed, total int64) {
		if status != last {
			last, tenths = status, 0
			if total > 0 {
				log.Info("pull", logModel, model, logStatus, status, "bytes", total)
			} else {
				log.Info("pull", logModel, model, logStatus, status)
			}
			return
		}
		if total <= 0 {
			return
		}
		if t := min(completed, total) * 10 / total; t > tenths {
			tenths = t
			log.Info("pull", logModel, model, logStatus, status, "percent", t*10)
		}
	}
}
