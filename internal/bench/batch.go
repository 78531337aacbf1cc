package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// BatchConfig configures a batch run: one batch of Lines chat completions through the Batch
// API (POST /v1/files, POST /v1/batches, polling, the output file), with live load beside
// it, so that the report says both what the batch achieved and what it cost live requests.
type BatchConfig struct {
	BaseURL, APIKey, Model string
	Lines                  int // the batch's lines
	MaxTokens              int
	Prompt                 string
	// Live, unless its Concurrency is 0, is the live load run twice: alone first (the
	// baseline), then again while the batch runs. Its BaseURL, APIKey, Model, MaxTokens and
	// Prompt are the batch's.
	Live Config
	// Poll is how often the batch is polled; default 250ms.
	Poll time.Duration
	// MetricsURL, when set, is the coordinator's Prometheus endpoint: the run reads its
	// slot-time counters before and after the batch, for the share of idle slot-time the batch
	// filled (BatchRun.SlotFill).
	MetricsURL string
	// Timeout bounds the whole batch; 0: none.
	Timeout  time.Duration
	Client   *http.Client
	Progress Progress
}

// BatchRun is what a batch run measured: its own figures, and the live load's alone and
// while the batch ran.
type BatchRun struct {
	ID        string `json:"id"`
	Lines     int    `json:"lines"`
	Status    string `json:"status"` // the batch's last status: completed, unless it failed
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	// Seconds is from the batch's creation to the client seeing it completed (within Poll).
	Seconds        float64 `json:"seconds"`
	LinesPerSecond float64 `json:"lines_per_second"`
	// OutputTokens are the completion tokens of the output file's answers.
	OutputTokens          int64   `json:"output_tokens"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	// Duplicates counts custom_ids the output and error files hold more than once; Missing,
	// the lines they hold none of. Both are 0 when every line was answered exactly once.
	Duplicates int `json:"duplicates"`
	Missing    int `json:"missing"`

	// SlotFill is the nodes' slot-time while the batch ran, read from MetricsURL; nil without.
	SlotFill *SlotFill `json:"slot_fill,omitempty"`

	LiveAlone  *Report `json:"live_alone,omitempty"`  // the live load with no batch running
	LiveDuring *Report `json:"live_during,omitempty"` // the same load while the batch ran
}

// SlotFill is the slot-time of the nodes open for jobs (inside their windows) while a batch
// ran, in slot-seconds, and the share of what live requests left idle that the batch filled.
type SlotFill struct {
	BusySeconds  float64 `json:"busy_slot_seconds"`  // busy with a job: live or batch
	FreeSeconds  float64 `json:"free_slot_seconds"`  // idle
	BatchSeconds float64 `json:"batch_slot_seconds"` // busy with a batch line
	// Filled is BatchSeconds / (BatchSeconds + FreeSeconds): of the slot-time live requests
	// left idle, the share batch lines took.
	Filled float64 `json:"filled"`
}

// slotFill is the slot-time between two readings of the counters.
func slotFill(before, after *SlotTime) *SlotFill {
	f := &SlotFill{BusySeconds: after.Busy - before.Busy, FreeSeconds: after.Free - before.Free, BatchSeconds: after.Batch - before.Batch}
	if idle := f.BatchSeconds + f.FreeSeconds; idle > 0 {
		f.Filled = f.BatchSeconds / idle
	}
	return f
}

// RunBatch uploads a batch of cfg.Lines requests, runs the live load alone and then beside
// the batch, waits for the batch to end, and checks its output file: each line answered once.
func RunBatch(ctx context.Context, cfg BatchConfig) (*Report, error) {
	if cfg.Lines < 1 {
		return nil, errors.New("bench: a batch needs at least one line")
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(max(cfg.Live.Concurrency, 4))
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	b := &batchClient{client: cfg.Client, base: cfg.BaseURL, key: cfg.APIKey}
	live := cfg.Live.Concurrency > 0
	if live {
		cfg.Live.BaseURL, cfg.Live.APIKey, cfg.Live.Model = cfg.BaseURL, cfg.APIKey, cfg.Model
		cfg.Live.MaxTokens, cfg.Live.Prompt, cfg.Live.Client = cfg.MaxTokens, cfg.Prompt, cfg.Client
	}
	run := &BatchRun{Lines: cfg.Lines}
	if live {
		alone, err := Run(ctx, cfg.Live)
		if err != nil {
			return nil, err
		}
		run.LiveAlone = alone
	}

	input, err := batchInput(cfg.Model, cfg.Prompt, cfg.MaxTokens, cfg.Lines)
	if err != nil {
		return nil, err
	}
	file, err := b.upload(ctx, "bench-batch.jsonl", input)
	if err != nil {
		return nil, fmt.Errorf("upload the batch's input: %w", err)
	}
	var slotsBefore *SlotTime
	if cfg.MetricsURL != "" {
		if slotsBefore, err = ScrapeSlotTime(ctx, cfg.Client, cfg.MetricsURL, cfg.Model); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	batch, err := b.create(ctx, file)
	if err != nil {
		return nil, fmt.Errorf("create the batch: %w", err)
	}
	run.ID = batch.ID
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	// The live load runs while the batch does; the batch is polled meanwhile.
	type liveDone struct {
		rep *Report
		err error
	}
	during := make(chan liveDone, 1)
	if live {
		go func() {
			rep, err := Run(ctx, cfg.Live)
			during <- liveDone{rep, err}
		}()
	}
	batch, err = b.wait(ctx, batch.ID, cfg.Poll, func(c batchCounts) {
		if cfg.Progress != nil {
			cfg.Progress.Update(Snapshot{Done: int64(c.Completed + c.Failed), Failed: int64(c.Failed), Total: int64(cfg.Lines), Elapsed: time.Since(start)})
		}
	})
	run.Seconds = time.Since(start).Seconds()
	if live {
		d := <-during
		if d.err != nil && err == nil {
			err = d.err
		}
		run.LiveDuring = d.rep
	}
	if err != nil {
		return nil, err
	}
	if slotsBefore != nil {
		after, err := ScrapeSlotTime(ctx, cfg.Client, cfg.MetricsURL, cfg.Model)
		if err != nil {
			return nil, err
		}
		run.SlotFill = slotFill(slotsBefore, after)
	}
	run.Status, run.Completed, run.Failed = batch.Status, batch.RequestCounts.Completed, batch.RequestCounts.Failed
	if run.Seconds > 0 {
		run.LinesPerSecond = float64(run.Completed) / run.Seconds
	}
	if err := b.check(ctx, batch, cfg.Lines, run); err != nil {
		return nil, err
	}
	if run.Seconds > 0 {
		run.OutputTokensPerSecond = float64(run.OutputTokens) / run.Seconds
	}
	if cfg.Progress != nil {
		cfg.Progress.Done(Snapshot{Done: int64(run.Completed + run.Failed), Failed: int64(run.Failed), Total: int64(cfg.Lines), Elapsed: time.Since(start)})
	}
	return &Report{URL: cfg.BaseURL, Model: cfg.Model, MaxTokens: cfg.MaxTokens, Errors: []ErrorGroup{}, Batch: run}, nil
}

// batchInput is a batch's input file: lines chat completions, custom_ids line-1 … line-N.
func batchInput(model, prompt string, maxTokens, lines int) ([]byte, error) {
	body, err := requestBody(model, prompt, maxTokens, false)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&buf, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i+1, body)
	}
	return buf.Bytes(), nil
}

// batchClient speaks the Batch API as a buyer does.
type batchClient struct {
	client    *http.Client
	base, key string
}

type batchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

type batchObject struct {
	ID            string      `json:"id"`
	Status        string      `json:"status"`
	OutputFileID  string      `json:"output_file_id"`
	ErrorFileID   string      `json:"error_file_id"`
	RequestCounts batchCounts `json:"request_counts"`
}

// upload posts a file for batch work and returns its id.
func (b *batchClient) upload(ctx context.Context, name string, content []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("purpose", "batch")
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	fw.Write(content)
	if err := mw.Close(); err != nil {
		return "", err
	}
	var file struct {
		ID string `json:"id"`
	}
	err = b.do(ctx, http.MethodPost, "/files", mw.FormDataContentType(), &body, &file)
	return file.ID, err
}

// create starts a batch over an uploaded file.
func (b *batchClient) create(ctx context.Context, fileID string) (*batchObject, error) {
	req, _ := json.Marshal(map[string]string{"input_file_id": fileID, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
	var batch batchObject
	err := b.do(ctx, http.MethodPost, "/batches", "application/json", bytes.NewReader(req), &batch)
	return &batch, err
}

// wait polls a batch until it ends, telling progress its counts.
func (b *batchClient) wait(ctx context.Context, id string, every time.Duration, progress func(batchCounts)) (*batchObject, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var batch batchObject
		if err := b.do(ctx, http.MethodGet, "/batches/"+id, "", nil, &batch); err != nil {
			return nil, err
		}
		progress(batch.RequestCounts)
		switch batch.Status {
		case "completed", "failed", "expired", "cancelled":
			return &batch, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// check reads the batch's output and error files: every line once, and the output tokens.
func (b *batchClient) check(ctx context.Context, batch *batchObject, lines int, run *BatchRun) error {
	seen := make(map[string]int, lines)
	for _, id := range []string{batch.OutputFileID, batch.ErrorFileID} {
		if id == "" {
			continue
		}
		err := b.lines(ctx, id, func(line []byte) error {
			var out struct {
				CustomID string `json:"custom_id"`
				Response *struct {
					Body struct {
						Usage usageJSON `json:"usage"`
					} `json:"body"`
				} `json:"response"`
			}
			if err := json.Unmarshal(line, &out); err != nil {
				return fmt.Errorf("file %s: a line is not JSON: %w", id, err)
			}
			seen[out.CustomID]++
			if id == batch.OutputFileID && out.Response != nil {
				run.OutputTokens += int64(out.Response.Body.Usage.CompletionTokens)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for i := range lines {
		switch n := seen[fmt.Sprintf("line-%d", i+1)]; {
		case n == 0:
			run.Missing++
		case n > 1:
			run.Duplicates += n - 1
		}
	}
	return nil
}

// lines calls each with every line of a file's content.
func (b *batchClient) lines(ctx context.Context, fileID string, each func([]byte) error) error {
	resp, err := b.send(ctx, http.MethodGet, "/files/"+fileID+"/content", "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// do sends a request and decodes its JSON answer into out.
func (b *batchClient) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	resp, err := b.send(ctx, method, path, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// send sends a request and returns its answer, or the API's error for a status other than 200.
func (b *batchClient) send(ctx context.Context, method, path, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s: %w", method, path, httpError(resp.StatusCode, msg))
	}
	return resp, nil
}

// writeText writes a batch run's figures.
func (r *BatchRun) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "Batch %s: %d lines, %s\n", r.ID, r.Lines, r.Status)
	fmt.Fprintf(b, "  completed %d, failed %d, in %s: %.1f lines/s, %.0f output tokens/s\n",
		r.Completed, r.Failed, seconds(r.Seconds), r.LinesPerSecond, r.OutputTokensPerSecond)
	if r.Duplicates+r.Missing > 0 {
		fmt.Fprintf(b, "  NOT exactly once: %d duplicate answers, %d lines missing\n", r.Duplicates, r.Missing)
	} else {
		fmt.Fprintf(b, "  every line answered exactly once\n")
	}
	if f := r.SlotFill; f != nil {
		fmt.Fprintf(b, "  slot-time open meanwhile: %.0f slot-s busy (%.0f of them batch lines), %.0f free: the batch filled %.1f%% of the idle slot-time\n",
			f.BusySeconds, f.BatchSeconds, f.FreeSeconds, 100*f.Filled)
	}
	if r.LiveAlone != nil && r.LiveDuring != nil && r.LiveAlone.TTFT != nil && r.LiveDuring.TTFT != nil {
		a, d := r.LiveAlone.TTFT, r.LiveDuring.TTFT
		fmt.Fprintf(b, "  live TTFT p50/p99: alone %s / %s, beside the batch %s / %s (%d and %d requests, %d and %d failed)\n",
			msec(a.P50), msec(a.P99), msec(d.P50), msec(d.P99), r.LiveAlone.Requests, r.LiveDuring.Requests, r.LiveAlone.Failed, r.LiveDuring.Failed)
	}
}
