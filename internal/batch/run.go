package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
)

// Log keys.
const (
	logBatch     = "batch"
	logRequestID = "request_id"
)

// linePage is how many lines the runner reads at once.
const linePage = 512

// Run runs, until ctx is done, the batches this replica may run: every Poll it claims those no
// live replica runs (store.ClaimBatches) and runs each it did not run yet. When ctx is done
// no new line starts; the lines in flight go on (Wait waits for them), and what is left of
// each batch is run by the next replica to claim it.
func (b *Batches) Run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Poll)
	defer t.Stop()
	for {
		b.claim(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Wait waits until no line is in flight, or ctx is done.
func (b *Batches) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.lines.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claim claims the batches to run and starts those not running yet.
func (b *Batches) claim(ctx context.Context) {
	// The replica's lease must be live before it names itself a runner, or a peer would take
	// the batch back at once.
	if err := b.cfg.Ledger.RenewLease(ctx); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("renew the replica's lease before running batches", "err", err)
		}
		return
	}
	bs, err := b.cfg.Store.ClaimBatches(ctx, b.cfg.Ledger.Replica(), b.cfg.Now())
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("claim batches", "err", err)
		}
		return
	}
	for _, bt := range bs {
		b.mu.Lock()
		running := b.active[bt.ID]
		b.active[bt.ID] = true
		b.mu.Unlock()
		if !running {
			b.lines.Add(1) // the batch's own goroutine counts as in flight until it returns
			go func() {
				defer b.lines.Done()
				defer func() {
					b.mu.Lock()
					delete(b.active, bt.ID)
					b.mu.Unlock()
				}()
				b.runBatch(ctx, bt)
			}()
		}
	}
}

// run is a batch as this replica runs it.
type run struct {
	*store.Batch
	key      atomic.Pointer[store.Key]
	stopping atomic.Value // "": runs on; store.BatchCancelling or store.BatchExpired
	stop     chan struct{}
	once     sync.Once
	lines    sync.WaitGroup
}

// end stops the batch's new lines, cancelled or expired.
func (r *run) end(why string) {
	r.once.Do(func() {
		r.stopping.Store(why)
		close(r.stop)
	})
}

func (r *run) ending() string {
	s, _ := r.stopping.Load().(string)
	return s
}

// runBatch runs a batch's lines not ended yet, then ends the batch, unless ctx is done first.
func (b *Batches) runBatch(ctx context.Context, bt *store.Batch) {
	r := &run{Batch: bt, stop: make(chan struct{})}
	if err := b.refresh(ctx, r); err != nil {
		b.log.Warn("read a batch to run", logBatch, bt.ID, "err", err)
		return
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go b.watch(wctx, r)
	if bt.Status == store.BatchInProgress && r.ending() == "" {
		b.startLines(ctx, r)
	}
	r.lines.Wait()
	if ctx.Err() != nil {
		return // the next runner finishes it
	}
	if err := b.finish(ctx, r); err != nil && ctx.Err() == nil {
		b.log.Error("end a batch", logBatch, bt.ID, "err", err)
	}
}

// startLines starts each line not ended yet, as workers free, until the batch ends or ctx is
// done.
func (b *Batches) startLines(ctx context.Context, r *run) {
	for from := 0; ; {
		ls, err := b.cfg.Store.BatchLines(ctx, r.ID, from, linePage, store.LinePending, store.LineRunning)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("read a batch's lines", logBatch, r.ID, "err", err)
			}
			return
		}
		if len(ls) == 0 {
			return
		}
		// Lines start in chunks, each in one transaction, as workers free: a write per line
		// would queue behind one another for the database's write lock, and so would live
		// requests' holds.
		var chunk []*store.BatchLine
		for _, l := range ls {
			select {
			case b.slots <- struct{}{}:
			default:
				b.start(ctx, r, chunk)
				chunk = chunk[:0]
				select {
				case b.slots <- struct{}{}:
				case <-ctx.Done():
					return
				case <-r.stop:
					return
				}
			}
			if chunk = append(chunk, l); len(chunk) == startChunk {
				b.start(ctx, r, chunk)
				chunk = chunk[:0]
			}
		}
		b.start(ctx, r, chunk)
		from = ls[len(ls)-1].Line + 1
	}
}

// startChunk is the most lines started in one transaction.
const startChunk = 32

// start starts the first attempts of lines, for each of which a worker slot is taken, and runs
// each on its own goroutine; a line that cannot start (the batch is another replica's) gives
// its slot back.
func (b *Batches) start(ctx context.Context, r *run, ls []*store.BatchLine) {
	if len(ls) == 0 {
		return
	}
	lines, ids := make([]int, len(ls)), make([]string, len(ls))
	for i, l := range ls {
		lines[i], ids[i] = l.Line, requestid.New()
	}
	tries, err := b.cfg.Store.StartLines(ctx, b.cfg.Ledger.Replica(), r.ID, lines, ids)
	if err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrStale) {
		b.log.Warn("start batch lines", logBatch, r.ID, "err", err)
	}
	for i, l := range ls {
		if err != nil || tries[i] == 0 {
			<-b.slots
			continue
		}
		r.lines.Add(1)
		b.lines.Add(1)
		go func() {
			defer func() { <-b.slots; r.lines.Done(); b.lines.Done() }()
			b.runLine(ctx, r, l, ids[i], tries[i])
		}()
	}
}

// watch reads the batch's status and key every Poll, and ends its new lines once it is
// cancelled (through any replica) or has expired.
func (b *Batches) watch(ctx context.Context, r *run) {
	t := time.NewTicker(b.cfg.Poll)
	defer t.Stop()
	for {
		if !b.cfg.Now().Before(r.ExpiresAt) {
			r.end(store.BatchExpired)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := b.refresh(ctx, r); err != nil && ctx.Err() == nil {
				b.log.Warn("read a running batch", logBatch, r.ID, "err", err)
			}
		}
	}
}

// refresh reads the batch's status and its key again.
func (b *Batches) refresh(ctx context.Context, r *run) error {
	bt, err := b.cfg.Store.BatchByID(ctx, "", r.ID)
	if err != nil {
		return err
	}
	if bt.Status == store.BatchCancelling {
		r.end(store.BatchCancelling)
	}
	keys, err := b.cfg.Store.Keys(ctx, r.AccountID, store.KeyBuyer)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(keys, func(k *store.Key) bool { return k.ID == r.KeyID }); i >= 0 {
		r.key.Store(keys[i])
	}
	return nil
}

// runLine runs one line until it ends (its result written) or must wait for a later run: the
// batch ended, or ctx is done. Each attempt has its own request id; an attempt no node could
// take holds nothing, and waits for a slot under the same id.
func (b *Batches) runLine(ctx context.Context, r *run, l *store.BatchLine, id string, tries int) {
	job, rt, _, err := Decode(r.Endpoint, l.Body)
	if err != nil { // validated at creation: only a change of the rules since
		b.endLine(ctx, r, l, id, err, nil)
		return
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 { // the first was started with its chunk
			id = requestid.New()
			if tries, err = b.cfg.Store.StartLine(ctx, b.cfg.Ledger.Replica(), r.ID, l.Line, id); err != nil {
				if !errors.Is(err, store.ErrStale) && ctx.Err() == nil {
					b.log.Warn("start a batch line", logBatch, r.ID, "line", l.Line, "err", err)
				}
				return
			}
		}
		if tries > b.cfg.MaxTries {
			b.endLine(ctx, r, l, id, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
				Message: "No node could answer this request after several attempts."}, nil)
			return
		}
		out := b.serve(ctx, r, job, rt, id)
		switch {
		case out == nil:
			return // the batch ended or ctx is done before a node took it
		case out.err == nil && out.answer != nil:
			b.endLine(ctx, r, l, id, nil, out)
			return
		case out.err != nil && !transient(out.err) && !errors.Is(out.err, core.ErrBuyerGone):
			b.endLine(ctx, r, l, id, out.err, out)
			return
		}
		// (ErrBuyerGone: the batch's window closed while the line waited; it is expired.)
		// A node failed it, or the answer could not be finished: the attempt is settled as
		// any request (nothing, for an answer not delivered whole), and another made, if the
		// batch runs on.
		out.Settle(-1)
		err = out.err
		if r.ending() != "" || ctx.Err() != nil {
			return
		}
		b.log.Debug("batch line failed; trying again", logBatch, r.ID, "line", l.Line, logRequestID, id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-r.stop:
			return
		case <-time.After(backoff(tries)):
		}
	}
}

// served is how an attempt of a line went.
type served struct {
	*core.Outcome
	answer []byte // the answer's JSON, when it ended whole
	err    error
}

// serve runs one attempt of a line through the core: while no slot is idle for it, it waits
// for a line to end (its slot), the fleet to change or a short while, and tries again. It
// returns nil when the batch ended or ctx is done before a node took it.
func (b *Batches) serve(ctx context.Context, r *run, job *protocol.Request, rt api.Routing, id string) *served {
	// A line's answer is not cut off by the runner's stop: once a node has it, it finishes
	// and is billed (bounded by the batch's expiry and the core's Abort at the drain deadline).
	lctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), r.ExpiresAt)
	defer cancel()
	for wait := 0; ; wait++ {
		key := r.key.Load()
		if key == nil || key.Revoked() {
			return &served{Outcome: &core.Outcome{}, err: &api.Error{Status: http.StatusUnauthorized, Type: api.TypeInvalidRequest, Code: api.CodeInvalidAPIKey,
				Message: "The batch's API key has been revoked."}}
		}
		var w answerWriter
		req := &core.Request{ID: id, Key: key, Job: job, Routing: rt, Batch: true, Defer: true,
			Answer: func(bg core.Begin) relay.Sink { return relay.Open(&w, bg.Answer, job.Kind == protocol.KindChat, false) }}
		out, err := b.cfg.Core.Serve(lctx, req)
		if !errors.Is(err, core.ErrNoCapacity) && !b.joining(err) {
			b.lineEnded() // its slot is free
			s := &served{Outcome: out, err: err}
			if err == nil && out.Usage != nil && out.Usage.Outcome == store.OutcomeOK && w.status == http.StatusOK {
				s.answer = w.body.Bytes()
			}
			return s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.stop:
			return nil
		case <-b.freed:
		case <-b.cfg.Fleet.Changed():
		case <-time.After(idleWait(wait)):
		}
	}
}

// joinGrace is how long after its start the runner takes a model no node serves for one whose
// nodes have not connected yet (a coordinator just restarted): its lines wait for them, as for
// a slot, rather than fail.
const joinGrace = time.Minute

// joining says whether err says no node serves the model, within joinGrace of the start.
func (b *Batches) joining(err error) bool {
	ae, ok := errors.AsType[*api.Error](err)
	return ok && ae.Code == api.CodeModelNotFound && b.cfg.Now().Sub(b.started) < joinGrace
}

// lineEnded hands the slot of an attempt that ended to one line waiting for one.
func (b *Batches) lineEnded() {
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// idleWait is how long a line waits for an idle slot before it looks again: short, growing to
// a second, spread so that waiting lines do not look all at once.
func idleWait(n int) time.Duration {
	d := 20 * time.Millisecond << min(n, 6)
	return min(d, time.Second)/2 + rand.N(min(d, time.Second)/2+1)
}

// backoff is how long a line waits before its next attempt after a node failed it.
func backoff(tries int) time.Duration {
	d := 250 * time.Millisecond << min(tries, 5)
	return d/2 + rand.N(d/2+1)
}

// transient says whether another attempt may answer a line an attempt did not: a node failed,
// none was free, or the coordinator is stopping. A refusal of the request itself (400, 403,
// 402, 404) is its answer.
func transient(err error) bool {
	ae, ok := errors.AsType[*api.Error](err)
	return !ok || ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
}

// endLine writes a line's result: the answer, or the error (errResult) in the error file,
// with the attempt's settlement when it has one, else on its own.
func (b *Batches) endLine(ctx context.Context, r *run, l *store.BatchLine, id string, errResult error, out *served) {
	res := &store.LineResult{BatchID: r.ID, Line: l.Line, RequestID: id}
	line := api.BatchOutput{ID: newID("batch_req_"), CustomID: l.CustomID}
	if errResult != nil {
		status, body := errorBody(errResult)
		line.Response = &api.BatchResponse{StatusCode: status, RequestID: id, Body: body}
		res.Failed = true
	} else {
		line.Response = &api.BatchResponse{StatusCode: http.StatusOK, RequestID: id, Body: out.answer}
	}
	var err error
	if res.Result, err = json.Marshal(line); err != nil {
		b.log.Error("encode a batch line's result", logBatch, r.ID, "err", err)
		return
	}
	done := make(chan error, 1)
	res.Committed = func(err error) { done <- err }
	if out != nil && out.SettleWith(-1, res) {
		err = <-done
	} else {
		err = b.cfg.Store.FinishLine(context.WithoutCancel(ctx), res)
	}
	switch {
	case errors.Is(err, store.ErrStale) && out != nil && out.Bill != nil:
		// Another replica runs the line now: this attempt is not billed.
		u := *out.Usage
		u.Outcome, u.Error = store.OutcomeError, "batch line attempt superseded by another replica's"
		if verr := b.cfg.Ledger.Void(context.WithoutCancel(ctx), id, &u); verr != nil {
			b.log.Warn("void a stale batch line's hold", logBatch, r.ID, logRequestID, id, "err", verr)
		}
	case err != nil && !errors.Is(err, store.ErrStale):
		b.log.Error("write a batch line's result", logBatch, r.ID, "line", l.Line, logRequestID, id, "err", err)
	}
}

// errorBody is an error's status and body as the live endpoint writes them.
func errorBody(err error) (int, json.RawMessage) {
	ae, ok := errors.AsType[*api.Error](err)
	if !ok {
		ae = &api.Error{Status: http.StatusInternalServerError, Type: api.TypeServer, Message: "The server had an error while processing this request."}
	}
	b, _ := json.Marshal(ae)
	return ae.Status, b
}

// answerWriter is where a line's answer is written: a non-streamed response, whole.
type answerWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *answerWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *answerWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// finish ends a batch whose lines this replica ran: completed once every line has ended, or
// cancelled or expired, with an output file of the lines answered and an error file of those
// that failed (and, expired, those that never ran), in line order.
func (b *Batches) finish(ctx context.Context, r *run) error {
	status := store.BatchCompleted
	switch r.ending() {
	case store.BatchCancelling:
		status = store.BatchCancelled
	case store.BatchExpired:
		status = store.BatchExpired
	}
	if status == store.BatchCompleted {
		left, err := b.cfg.Store.BatchLines(ctx, r.ID, 0, 1, store.LinePending, store.LineRunning)
		if err != nil || len(left) > 0 {
			return err // lines left to run: the next claim runs them
		}
	}
	replica := b.cfg.Ledger.Replica()
	if r.Status != store.BatchFinalizing {
		if err := b.cfg.Store.SetBatchStatus(ctx, replica, r.ID, store.BatchFinalizing, b.cfg.Now()); err != nil {
			return err
		}
	}
	var out, errs bytes.Buffer
	for from := 0; ; {
		ls, err := b.cfg.Store.BatchLines(ctx, r.ID, from, linePage)
		if err != nil {
			return err
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			switch {
			case l.Status == store.LineDone:
				out.Write(l.Result)
				out.WriteByte('\n')
			case l.Status == store.LineFailed:
				errs.Write(l.Result)
				errs.WriteByte('\n')
			case status == store.BatchExpired:
				line, err := json.Marshal(api.BatchOutput{ID: newID("batch_req_"), CustomID: l.CustomID,
					Error: &api.BatchLineFailed{Code: "batch_expired", Message: "This request could not be executed before the completion window expired."}})
				if err != nil {
					return err
				}
				errs.Write(line)
				errs.WriteByte('\n')
			}
		}
		from = ls[len(ls)-1].Line + 1
	}
	now := b.cfg.Now()
	outFile, outContent, err := b.resultFile(r, "output", out.Bytes(), now)
	if err != nil {
		return err
	}
	errFile, errContent, err := b.resultFile(r, "error", errs.Bytes(), now)
	if err != nil {
		return err
	}
	if err := b.cfg.Store.FinishBatch(ctx, replica, r.ID, status, now, outFile, errFile, outContent, errContent); err != nil {
		for _, f := range []*store.File{outFile, errFile} {
			if f != nil {
				b.remove(f)
			}
		}
		return err
	}
	b.log.Info("batch ended", logBatch, r.ID, "status", status)
	return nil
}

// resultFile makes a batch's output or error file of content (none when it is empty).
func (b *Batches) resultFile(r *run, kind string, content []byte, now time.Time) (*store.File, []byte, error) {
	if len(content) == 0 {
		return nil, nil, nil
	}
	f := &store.File{ID: newID("file-"), AccountID: r.AccountID, Purpose: store.PurposeBatchOutput,
		Filename: r.ID + "_" + kind + ".jsonl", CreatedAt: now}
	kept, err := b.storeFile(f, content)
	return f, kept, err
}

// Flush sends nothing: the answer is read once whole.
func (w *answerWriter) Flush() {}
