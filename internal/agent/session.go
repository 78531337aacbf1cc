package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"

	"github.com/shareai/shareai/internal/aside"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/receipt"
)

// errFatal marks errors that reconnecting cannot fix.
var errFatal = errors.New("fatal")

// maxJobBytes bounds one message from the coordinator (a job carries the buyer's whole request).
const maxJobBytes = 64 << 20

// conn is one connection to the coordinator.
type conn struct {
	a      *Agent
	ws     *websocket.Conn
	out    chan protocol.Frame
	done   chan struct{}
	nodeID string // as the coordinator registered the node; set before any job starts
	// batched says the coordinator takes receipts signed in batches, after the end frames
	// (receipts); otherwise each is signed alone, in its end frame. Set before any job starts.
	batched  bool
	receipts chan pendingReceipt // the jobs' receipts to sign in batches, when batched

	mu   sync.Mutex
	jobs map[string]*job
	// running per offered model, to refuse jobs beyond an offer's slots.
	perModel map[string]int
	limits   map[string]int
}

// job is one job running on the engine.
type job struct {
	cancel context.CancelCauseFunc
	credit chan int // grants from the coordinator
}

// session connects, registers and serves one connection. It reports whether the node
// registered, so the caller can reset its backoff.
func (a *Agent) session(ctx context.Context, offers []protocol.Offer) (registered bool, err error) {
	// Each connection goes to the next coordinator: when one goes away, its agents move to
	// another replica, and one that refuses to connect is not retried before the others.
	url, base := a.urls[a.next%len(a.urls)], a.bases[a.next%len(a.urls)]
	a.next++
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + a.cfg.Token}},
	})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return false, fmt.Errorf("%w: the coordinator refused the provider token", errFatal)
		}
		return false, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(maxJobBytes)
	c := &conn{
		a: a, ws: ws,
		out:      make(chan protocol.Frame, 1024),
		done:     make(chan struct{}),
		jobs:     make(map[string]*job),
		perModel: make(map[string]int),
		limits:   make(map[string]int),
	}
	for _, o := range offers {
		c.limits[o.Model] = o.MaxConcurrent
	}
	defer ws.CloseNow()
	reg, err := c.handshake(ctx, offers)
	if err != nil {
		return false, err
	}
	c.nodeID, c.batched = reg.NodeID, reg.BatchedReceipts
	c.receipts = make(chan pendingReceipt, receipt.MaxBatch)
	a.mu.Lock()
	a.nodeID = reg.NodeID
	a.ws, a.conn, a.coord = ws, c, base
	a.conns++
	if a.conns == 1 {
		close(a.ready)
	}
	a.mu.Unlock()
	a.log.Info("registered with coordinator", logNode, reg.NodeID, "offers", len(offers), "coordinator", base)

	// WebSocket reads and writes get wsctx, which is never cancelled: a cancellable context costs a
	// context.AfterFunc per read and write. Closing the connection stops them instead.
	wsctx := context.WithoutCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.readLoop(gctx, wsctx) })
	g.Go(func() error { return c.writeLoop(gctx, wsctx) })
	g.Go(func() error { return c.heartbeat(gctx, time.Duration(reg.HeartbeatInterval)*time.Millisecond) })
	if c.batched {
		g.Go(func() error { return c.signReceipts(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		if ctx.Err() != nil {
			ws.Close(websocket.StatusGoingAway, "agent stopping")
		} else {
			ws.CloseNow()
		}
		return nil
	})
	err = g.Wait()
	a.mu.Lock()
	a.ws, a.conn, a.coord = nil, nil, ""
	a.mu.Unlock()
	close(c.done)
	c.cancelAll()
	return true, err
}

func (c *conn) handshake(ctx context.Context, offers []protocol.Offer) (*protocol.Registered, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	fr, err := c.readOne(ctx)
	if err != nil {
		return nil, fmt.Errorf("read challenge: %w", err)
	}
	if fr.Type != protocol.TypeChallenge || fr.Challenge == nil {
		return nil, fmt.Errorf("expected a challenge frame, got %q", fr.Type)
	}
	a := c.a
	sig, err := signChallenge(a.key, fr.Challenge)
	if err != nil {
		return nil, err
	}
	reg := &protocol.Register{
		Version:   protocol.Version,
		NodeKey:   a.key.Public().(ed25519.PublicKey),
		Signature: sig,
		Name:      a.cfg.Name,
		Region:    a.cfg.Region,
		Agent:     a.cfg.Version,
		Engine:    a.cfg.Engine.Name(),
		Hardware:  a.cfg.Hardware,
		Offers:    offers,
		Windows:   a.cfg.Windows,
		Timezone:  a.cfg.Timezone,
		Selftest:  a.cfg.Selftest,
	}
	b, _ := json.Marshal(protocol.Frame{Type: protocol.TypeRegister, Register: reg})
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, fmt.Errorf("send register: %w", err)
	}
	fr, err = c.readOne(ctx)
	if err != nil {
		// The coordinator refused the registration and said why.
		var ce websocket.CloseError
		switch {
		case !errors.As(err, &ce):
		case ce.Code == websocket.StatusPolicyViolation:
			// What the node sent is over the protocol's limits: its configuration must change.
			return nil, fmt.Errorf("%w: coordinator refused the node: %s", errFatal, ce.Reason)
		case ce.Code == websocket.StatusInternalError:
			return nil, fmt.Errorf("coordinator refused the node: %s", ce.Reason)
		}
		return nil, fmt.Errorf("read registered: %w", err)
	}
	if fr.Type != protocol.TypeRegistered || fr.Registered == nil {
		return nil, fmt.Errorf("expected a registered frame, got %q", fr.Type)
	}
	return fr.Registered, nil
}

// signChallenge answers the coordinator's challenge: the node key's signature of
// protocol.RegisterMessage, never of bytes the coordinator chose alone. A nonce of any size but
// protocol.NonceSize is refused, so that a coordinator cannot pass off other bytes as one.
func signChallenge(key ed25519.PrivateKey, ch *protocol.Challenge) ([]byte, error) {
	if len(ch.Nonce) != protocol.NonceSize {
		return nil, fmt.Errorf("refused the coordinator's challenge: its nonce is %d bytes, not %d", len(ch.Nonce), protocol.NonceSize)
	}
	return ed25519.Sign(key, protocol.RegisterMessage(ch.Nonce)), nil
}

func (c *conn) readOne(ctx context.Context) (protocol.Frame, error) {
	var fr protocol.Frame
	_, msg, err := c.ws.Read(ctx)
	if err != nil {
		return fr, err
	}
	err = json.Unmarshal(msg, &fr)
	return fr, err
}

func (c *conn) readLoop(ctx, wsctx context.Context) error {
	var msgs protocol.Messages
	for {
		_, r, err := c.ws.Reader(wsctx)
		var msg []byte
		if err == nil {
			msg, err = msgs.Read(r)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read from coordinator: %w", err)
		}
		err = protocol.Decode(msg, func(fr protocol.Frame) error {
			c.handle(ctx, fr)
			return nil
		})
		if err != nil {
			return fmt.Errorf("from coordinator: %w", err)
		}
	}
}

func (c *conn) handle(ctx context.Context, fr protocol.Frame) {
	switch fr.Type {
	case protocol.TypeJob:
		if fr.Request != nil {
			c.start(c.a.traceContext(ctx, fr.Trace), fr.Job, fr.Request)
		}
	case protocol.TypeCancel:
		c.mu.Lock()
		j := c.jobs[fr.Job]
		c.mu.Unlock()
		if j != nil {
			j.cancel(nil)
		}
	case protocol.TypeCredit:
		c.mu.Lock()
		j := c.jobs[fr.Job]
		c.mu.Unlock()
		if j != nil {
			select {
			case j.credit <- fr.Credit:
			default: // the coordinator never grants more than a window's worth at a time
			}
		}
	case protocol.TypeSelftest:
		if fr.Selftest != nil {
			c.a.mu.Lock()
			c.a.selftest = fr.Selftest
			c.a.mu.Unlock()
		}
	default:
		c.a.log.Debug("ignoring frame", "type", fr.Type)
	}
}

// start runs a job in its own goroutine, or refuses it at once if its offer has no free slot.
func (c *conn) start(ctx context.Context, id string, req *protocol.Request) {
	if why := c.a.Paused(); why != "" && !c.a.cfg.Selftest { // a selftest is its owner's wish
		c.send(protocol.Frame{Type: protocol.TypeEnd, Job: id, End: &protocol.End{Error: &protocol.Error{Message: "node takes no new jobs: " + why}}})
		c.a.metrics.JobRefused(c.offeredModel(req.Model))
		return
	}
	c.mu.Lock()
	limit, offered := c.limits[req.Model]
	if !offered || c.perModel[req.Model] >= limit || c.jobs[id] != nil {
		c.mu.Unlock()
		msg := fmt.Sprintf("node does not offer model %q", req.Model)
		if offered {
			msg = fmt.Sprintf("node is busy: %d jobs of %q running", limit, req.Model)
		}
		c.send(protocol.Frame{Type: protocol.TypeEnd, Job: id, End: &protocol.End{Error: &protocol.Error{Message: msg}}})
		c.a.metrics.JobRefused(c.offeredModel(req.Model))
		return
	}
	jctx, cancel := context.WithCancelCause(ctx)
	j := &job{cancel: cancel, credit: make(chan int, 4)}
	c.jobs[id] = j
	c.perModel[req.Model]++
	c.mu.Unlock()
	c.a.mu.Lock()
	c.a.running++
	c.a.ranSince = max(c.a.ranSince, c.a.running)
	c.a.mu.Unlock()

	started := c.a.cfg.Now()
	aside.Go(func() { // a worker whose stack earlier jobs grew: a job calls deep, into net/http
		end, rec := c.run(jctx, id, j, req, started)
		cancel(nil)
		c.mu.Lock()
		delete(c.jobs, id)
		c.perModel[req.Model]--
		c.mu.Unlock()
		c.a.mu.Lock()
		c.a.running--
		c.a.mu.Unlock()
		if c.send(end) == nil && rec != nil {
			c.receipts <- pendingReceipt{id, *rec} // after its end frame: the coordinator waits for it
		}
	})
}

// run runs a job on the engine and returns its end frame, which carries the last piece of the
// answer not sent yet and the node's receipt of the job: signed alone in it, or, to a
// coordinator that takes batches, to sign in a batch after it (rec).
func (c *conn) run(ctx context.Context, id string, j *job, req *protocol.Request, started time.Time) (fr protocol.Frame, rec *receipt.Receipt) {
	ctx, span := c.a.startJob(ctx, id, req)
	defer func() { endJob(span, fr.End) }()
	began := time.Now() // for the metrics: the wall clock, whatever cfg.Now says
	out := &output{c: c, ctx: ctx, id: id, grants: j.credit, credit: protocol.Window}
	fr = c.runEngine(ctx, id, req, out)
	r := c.receipt(id, req.Model, started, out, fr)
	if c.batched {
		fr.End.ReceiptFollows, rec = true, &r
	} else {
		fr.End.Receipt = c.signAlone(id, r)
	}
	c.a.metrics.JobEnded(jobMetrics(req.Model, began, out.first, time.Now(), fr.End))
	return fr, rec
}

// jobMetrics is what the metrics record of a job that ran from started to ended, its engine's
// first piece of answer at first, and ended with e.
func jobMetrics(model string, started, first, ended time.Time, e *protocol.End) metrics.Job {
	j := metrics.Job{Model: model, Outcome: "ok", Duration: ended.Sub(started).Seconds(),
		PromptTokens: e.Usage.PromptTokens, Completed: e.Usage.CompletionTokens}
	switch {
	case e.Error != nil:
		j.Outcome = "error"
	case e.FinishReason == protocol.FinishCancelled:
		j.Outcome = "cancelled"
	}
	if !first.IsZero() {
		j.TTFT = first.Sub(started).Seconds()
	}
	return j
}

// offeredModel returns model if the node offers it, else "": the metrics' label for a job of a
// model the node does not serve, which may be any name.
func (c *conn) offeredModel(model string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.limits[model]; ok {
		return model
	}
	return ""
}

// receipt is the node's receipt of a job that ends with fr: its usage as the end frame reports
// it, the hash of every delta sent (the end frame's too), and its times.
func (c *conn) receipt(id, model string, started time.Time, out *output, fr protocol.Frame) receipt.Receipt {
	if fr.Delta != nil {
		out.hash.Add(*fr.Delta)
	}
	e := fr.End
	return receipt.Receipt{
		JobID: id, NodeID: c.nodeID, Model: model,
		PromptTokens: e.Usage.PromptTokens, CompletionTokens: e.Usage.CompletionTokens, UsageEstimated: e.Estimated,
		OutputSHA256: out.hash.Sum(), OutputBytes: out.hash.Len(), FinishReason: e.FinishReason,
		StartedAt: started, EndedAt: c.a.cfg.Now(),
	}
}

// signAlone signs a job's receipt alone and returns its JSON, or nil if it cannot be signed
// (logged: the job's end goes without it).
func (c *conn) signAlone(id string, r receipt.Receipt) json.RawMessage {
	s, err := receipt.Sign(c.a.key, r)
	var b []byte
	if err == nil {
		b, err = s.MarshalJSON()
	}
	if err != nil {
		c.a.log.Warn("job's receipt not signed", logJob, id, logModel, r.Model, "err", err)
		return nil
	}
	return b
}

// pendingReceipt is a job's receipt waiting to be signed in a batch.
type pendingReceipt struct {
	job string
	r   receipt.Receipt
}

// receiptLinger is how long the first receipt of a batch waits for others: the jobs' answers
// have ended already, and only their bills wait for the receipts, so one signature covers the
// receipts of every job that ends within it.
const receiptLinger = 2 * time.Millisecond

// signReceipts signs the jobs' receipts in batches, those that come within receiptLinger of
// the first, and sends each in a receipt frame, until ctx is done. Receipts not sent when the
// connection goes are lost: their requests are billed without them.
func (c *conn) signReceipts(ctx context.Context) error {
	batch := make([]pendingReceipt, 0, receipt.MaxBatch)
	linger := time.NewTimer(0)
	<-linger.C
	for {
		select {
		case p := <-c.receipts:
			batch = append(batch[:0], p)
		case <-ctx.Done():
			return nil
		}
		linger.Reset(receiptLinger)
	collect:
		for len(batch) < receipt.MaxBatch {
			select {
			case p := <-c.receipts:
				batch = append(batch, p)
			case <-linger.C:
				break collect
			case <-ctx.Done():
				return nil
			}
		}
		if !linger.Stop() {
			select {
			case <-linger.C:
			default:
			}
		}
		rs := make([]receipt.Receipt, len(batch))
		for i, p := range batch {
			rs[i] = p.r
		}
		signed, errs := receipt.SignBatch(c.a.key, rs)
		for i, p := range batch {
			b, err := errs[i], error(nil)
			var js []byte
			if b == nil {
				js, err = signed[i].MarshalJSON()
			}
			if err = errors.Join(b, err); err != nil {
				c.a.log.Warn("job's receipt not signed", logJob, p.job, logModel, p.r.Model, "err", err)
				continue
			}
			if c.send(protocol.Frame{Type: protocol.TypeReceipt, Job: p.job, Receipt: js}) != nil {
				return nil
			}
		}
	}
}

// runEngine runs a job on the engine and returns its end frame.
func (c *conn) runEngine(ctx context.Context, id string, req *protocol.Request, out *output) protocol.Frame {
	ectx, espan := c.a.startEngine(ctx, req)
	res, err := c.a.cfg.Engine.Run(ectx, req, c.withChaos(out, ctx.Done()))
	endEngine(espan, res, err)
	fr := protocol.Frame{Type: protocol.TypeEnd, Job: id}
	var last *protocol.Delta
	if ctx.Err() == nil {
		last = out.last() // nil if cancelled while it waited for credit
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errSteppedAside) {
			// The node stepped aside mid-answer: an error, so another node finishes it.
			fr.End = &protocol.End{Usage: protocol.Usage{CompletionTokens: out.sent}, Estimated: true,
				Error: &protocol.Error{Message: fmt.Sprintf("%v: %s", errSteppedAside, c.a.Paused())}}
			return fr
		}
		// Cancelled by the coordinator (or the connection went away): report what was sent.
		fr.End = &protocol.End{FinishReason: protocol.FinishCancelled, Usage: protocol.Usage{CompletionTokens: out.sent}, Estimated: true}
		return fr
	}
	fr.Delta = last
	if err == nil {
		fr.End = &protocol.End{FinishReason: res.FinishReason, Usage: res.Usage, Estimated: res.Estimated}
		return fr
	}
	c.a.log.Warn("job failed", logJob, id, logModel, req.Model, "err", err)
	pe := &protocol.Error{Message: err.Error()}
	if re, ok := errors.AsType[*engine.RequestError](err); ok {
		pe.Status, pe.Message = re.Status, re.Message
	}
	pe.Message = protocol.Clip(pe.Message, protocol.MaxErrorBytes)
	fr.End = &protocol.End{Usage: protocol.Usage{CompletionTokens: out.sent}, Estimated: true, Error: pe}
	return fr
}

// maxHeld bounds how many pieces an output merges before it sends them on by itself.
const maxHeld = protocol.MaxDeltaPieces

// errToolCallsTooLarge fails a job whose engine sent tool calls too long for one frame.
var errToolCallsTooLarge = fmt.Errorf("the engine sent tool calls of over %d bytes in one piece, more than a delta may carry", protocol.MaxDeltaBytes)

// output is a job's engine.Output. It merges consecutive text pieces until the engine flushes
// (before it waits), so an engine's burst travels as one frame, and it sends frames only within
// the job's credit.
type output struct {
	c      *conn
	ctx    context.Context
	id     string
	grants chan int
	credit int // frames the coordinator will still take

	text, reasoning []byte
	held            int // pieces merged into text and reasoning, not sent yet
	sent            int // pieces handed on to the coordinator
	// hash is fed every delta handed on to the coordinator, for the job's receipt.
	hash  receipt.Hasher
	first time.Time // when the engine gave the first piece
}

func (o *output) Delta(d protocol.Delta) error {
	if o.first.IsZero() {
		o.first = time.Now()
	}
	if len(d.ToolCalls) > 0 {
		// Tool call deltas are sent as they are: merging them is the buyer's SDK's job.
		if len(d.ToolCalls) > protocol.MaxDeltaBytes {
			return errToolCallsTooLarge
		}
		if err := o.Flush(); err != nil {
			return err
		}
		d.Pieces = 1
		if err := o.send(&d); err != nil {
			return err
		}
		o.sent++
		return nil
	}
	o.text = append(o.text, d.Text...)
	o.reasoning = append(o.reasoning, d.Reasoning...)
	o.held++
	if o.held >= maxHeld {
		return o.Flush()
	}
	return nil
}

func (o *output) Flush() error {
	d := o.take(false)
	if d == nil {
		return nil
	}
	return o.send(d)
}

// last takes the answer's last delta, to go on the job's end frame. Of a delta too large for
// one frame it sends all but the last part first, within the credit; nil when ctx ends first.
func (o *output) last() *protocol.Delta {
	d := o.take(true)
	if d == nil {
		return nil
	}
	parts := split(*d, protocol.MaxDeltaBytes)
	for _, p := range parts[:len(parts)-1] {
		if err := o.send1(&p); err != nil {
			return nil
		}
	}
	return &parts[len(parts)-1]
}

// split cuts a delta whose text, reasoning and tool calls are longer than limit bytes into
// deltas of at most limit bytes each, between characters: reasoning first, then text, and
// last the tool calls and the pieces. Tool calls are never cut: they are at most limit.
func split(d protocol.Delta, limit int) []protocol.Delta {
	size := func(d protocol.Delta) int { return len(d.Text) + len(d.Reasoning) + len(d.ToolCalls) }
	var parts []protocol.Delta
	for d.Reasoning != "" && size(d) > limit {
		n := cutAt(d.Reasoning, limit)
		parts = append(parts, protocol.Delta{Reasoning: d.Reasoning[:n]})
		d.Reasoning = d.Reasoning[n:]
	}
	for d.Text != "" && size(d) > limit {
		n := cutAt(d.Text, limit)
		parts = append(parts, protocol.Delta{Text: d.Text[:n]})
		d.Text = d.Text[n:]
	}
	return append(parts, d)
}

// cutAt returns where to cut s to at most n bytes (at least 1), between two characters when it
// can.
func cutAt(s string, n int) int {
	if len(s) <= n {
		return len(s)
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return max(n, 1)
	}
	return i
}

// take returns the pieces held back as one delta, or nil; the last take returns all.
//
// A character cut between pieces is never sent in halves: its first bytes wait for the rest
// in the next delta, so every frame (and whatever another node continues from) is whole text.
func (o *output) take(last bool) *protocol.Delta {
	if o.held == 0 {
		return nil
	}
	n := len(o.text)
	if !last {
		n -= partialRune(o.text)
	}
	d := &protocol.Delta{Text: string(o.text[:n]), Reasoning: string(o.reasoning), Pieces: o.held}
	o.sent += o.held
	o.text = append(o.text[:0], o.text[n:]...)
	o.reasoning, o.held = o.reasoning[:0], 0
	if len(o.text) > 0 {
		o.held = 1 // the cut character's piece goes with the next
		o.sent--
		d.Pieces--
	}
	if d.Text == "" && d.Reasoning == "" {
		return nil
	}
	return d
}

// partialRune returns how many bytes at the end of b begin a UTF-8 character that b does not
// finish.
func partialRune(b []byte) int {
	for i := 1; i <= min(utf8.UTFMax-1, len(b)); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// send sends a delta, in as many frames as protocol.MaxDeltaBytes makes it take.
func (o *output) send(d *protocol.Delta) error {
	parts := split(*d, protocol.MaxDeltaBytes)
	for i := range parts {
		if err := o.send1(&parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// send1 sends one delta frame, waiting for credit if the coordinator has none left for it.
func (o *output) send1(d *protocol.Delta) error {
	for o.credit == 0 {
		select {
		case n := <-o.grants:
			o.credit += n
		case <-o.ctx.Done():
			return o.ctx.Err()
		}
	}
	o.credit--
	o.hash.Add(*d)
	return o.c.send(protocol.Frame{Type: protocol.TypeDelta, Job: o.id, Delta: d})
}

// send queues a frame for the writer; it fails once the connection is gone.
func (c *conn) send(fr protocol.Frame) error {
	select {
	case c.out <- fr:
		return nil
	case <-c.done:
		return errors.New("connection to coordinator closed")
	}
}

func (c *conn) writeLoop(ctx, wsctx context.Context) error {
	var b protocol.Batcher
	for {
		var fr protocol.Frame
		select {
		case fr = <-c.out:
		case <-ctx.Done():
			return nil
		}
		msg, err := b.Encode(fr, c.out)
		if err == nil {
			err = c.ws.Write(wsctx, websocket.MessageText, msg)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write to coordinator: %w", err)
		}
	}
}

// heartbeat tells the coordinator the node is alive every interval, and at once when the node
// starts or stops taking jobs: what runs, which models are loaded, whether it takes jobs, and
// its latest hardware reading.
func (c *conn) heartbeat(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := c.send(protocol.Frame{Type: protocol.TypeHeartbeat, Heartbeat: c.beat(ctx, every/2)}); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.a.kick:
		}
	}
}

func (c *conn) beat(ctx context.Context, timeout time.Duration) *protocol.Heartbeat {
	c.mu.Lock()
	n := len(c.jobs)
	c.mu.Unlock()
	hb := &protocol.Heartbeat{Running: n, Paused: c.a.Paused(), Telemetry: c.a.Telemetry()}
	if l, ok := c.a.cfg.Engine.(engine.Loader); ok {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		loaded, err := l.Loaded(lctx)
		cancel()
		if err == nil {
			hb.Loaded = append(loaded[:0:0], loaded...)
			if hb.Loaded == nil {
				hb.Loaded = []string{} // nothing loaded, which is not "cannot tell"
			}
		}
	}
	return hb
}

// cancelAll stops every job when the connection is gone: nobody can receive their answers.
func (c *conn) cancelAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.jobs {
		j.cancel(nil)
	}
}
