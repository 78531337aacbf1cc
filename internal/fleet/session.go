package fleet

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// logAccount is the log key of a provider account.
const logAccount = "account"

// maxCloseReason bounds a close frame's reason: WebSocket allows 123 bytes.
const maxCloseReason = 120

var (
	errCoordinatorClosing = errors.New("coordinator shutting down")
	errReplaced           = errors.New("node reconnected on another connection")
	errSelftestDone       = errors.New("selftest done")
	errNodeGone           = errors.New("node disconnected")
)

var nodeIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NodeID derives a node's id from its public key, so a node keeps its id across reconnects.
func NodeID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return "node_" + nodeIDEncoding.EncodeToString(h[:10])
}

// ServeAgent is the HTTP handler agents connect to. It authenticates the provider token,
// upgrades to WebSocket, registers the node and serves its session until it ends.
func (f *Fleet) ServeAgent(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		http.Error(w, "missing provider token: send Authorization: Bearer spt-…", http.StatusUnauthorized)
		return
	}
	accountID, err := f.cfg.Authenticate(r.Context(), token)
	if err != nil {
		// The token shows by its first characters only, as keys do everywhere.
		// Debug: anyone can knock, and the agent itself says why it was refused.
		f.log.DebugContext(r.Context(), "agent refused: invalid provider token", "token", token[:min(len(token), 8)]+"…", "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid provider token", http.StatusUnauthorized)
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	conn.SetReadLimit(protocol.MaxRegisterBytes) // raised once the node has registered
	f.mu.RLock()
	closed := f.closed
	if !closed {
		f.sessions.Add(1)
	}
	f.mu.RUnlock()
	if closed {
		conn.Close(websocket.StatusGoingAway, errCoordinatorClosing.Error())
		return
	}
	defer f.sessions.Done()
	s := &session{
		fleet: f,
		conn:  conn,
		out:   make(chan protocol.Frame, 1024),
		done:  make(chan struct{}),
		jobs:  make(map[string]*Job),
	}
	// The session outlives the HTTP request's context, which ends when the handler returns.
	ctx := context.WithoutCancel(r.Context())
	err = s.run(ctx, accountID)
	limit := overLimit(err)
	if limit {
		// A broken or hostile agent: said once, with the limit, and the account to ask about it.
		f.log.Warn("node refused: over a protocol limit", logNode, s.nodeID(), logAccount, accountID, "remote", r.RemoteAddr, "err", err)
	}
	if s.node != nil && !s.node.Selftest {
		if !limit {
			f.log.Info("node disconnected", logNode, s.node.ID, "err", err)
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.flush(fctx, true); err != nil {
			f.log.Warn("record the node's session", logNode, s.node.ID, "err", err)
		}
		cancel()
	}
}

// session is one agent connection.
type session struct {
	fleet   *Fleet
	conn    *websocket.Conn
	node    *Node
	nodeKey ed25519.PublicKey // the key the node registered with
	out     chan protocol.Frame

	closeOnce sync.Once
	done      chan struct{}
	err       error // why the session ended; set before done is closed

	// clamps are the fields of the node's frames clamped to a limit so far, each logged once.
	// Only the reader touches it.
	clamps map[string]bool
	// release gives back the node's place among its account's nodes if it never joined the
	// fleet (Fleet.reserve); nil until one is held.
	release func()

	mu   sync.Mutex
	jobs map[string]*Job
	// awaiting are the ended jobs whose receipt frames are still to come, at most
	// maxAwaitingReceipts; nil once the session ended.
	awaiting map[string]*Job
	lastSeen time.Time
	act      activity
}

// nodeID is the id of the session's node, once its key is known; "" before.
func (s *session) nodeID() string {
	switch {
	case s.node != nil:
		return s.node.ID
	case len(s.nodeKey) == ed25519.PublicKeySize:
		return NodeID(s.nodeKey)
	}
	return ""
}

func (s *session) run(ctx context.Context, accountID string) error {
	defer func() {
		if s.release != nil {
			s.release() // a place the node never took in the fleet
		}
	}()
	node, err := s.handshake(ctx, accountID)
	if err != nil {
		s.close(err)
		return err
	}
	s.node = node
	s.conn.SetReadLimit(protocol.MaxMessageBytes)
	if node.Selftest {
		f := s.fleet
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			s.close(errCoordinatorClosing)
			return errCoordinatorClosing
		}
		if f.tests == nil {
			f.tests = map[*session]bool{}
		}
		f.tests[s] = true
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.tests, s)
			f.mu.Unlock()
		}()
	} else {
		replaced, err := s.fleet.add(node)
		if err != nil {
			s.close(err)
			return err
		}
		defer s.fleet.remove(node)
		if replaced != nil {
			replaced.sess.close(errReplaced)
		}
	}
	// Registered goes out only now that the node is in the fleet, so a request that follows the
	// agent's readiness finds the node. Jobs dispatched meanwhile wait in s.out for the writer.
	err = s.writeFrame(ctx, protocol.Frame{Type: protocol.TypeRegistered, Registered: &protocol.Registered{
		NodeID: node.ID, HeartbeatInterval: s.fleet.cfg.HeartbeatInterval.Milliseconds(), BatchedReceipts: true,
	}})
	if err != nil {
		s.close(err)
		return fmt.Errorf("send registered: %w", err)
	}
	s.fleet.log.Info("node registered", logNode, node.ID, "name", node.Name, "region", node.Region,
		"engine", node.Engine, "offers", len(node.Offers))

	// WebSocket reads and writes get ctx, which is never cancelled: a cancellable context costs
	// a context.AfterFunc per read and write. Closing the connection stops them instead.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.readLoop(ctx) })
	g.Go(func() error { return s.writeLoop(gctx, ctx) })
	g.Go(func() error { return s.watchdog(gctx) })
	g.Go(func() error {
		select {
		case <-s.done: // closed from outside
			return s.err
		case <-gctx.Done(): // a loop failed: close, so that the others stop
			s.close(context.Cause(gctx))
			return nil
		}
	})
	if node.Selftest {
		g.Go(func() error { return s.selftest(gctx, ctx) })
	}
	err = g.Wait()
	s.close(err)
	return s.err
}

func (s *session) handshake(ctx context.Context, accountID string) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nonce := make([]byte, protocol.NonceSize)
	rand.Read(nonce)
	if err := s.writeFrame(ctx, protocol.Frame{Type: protocol.TypeChallenge, Challenge: &protocol.Challenge{Nonce: nonce}}); err != nil {
		return nil, fmt.Errorf("send challenge: %w", err)
	}
	_, msg, err := s.conn.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read register: %w", err)
	}
	reg, err := decodeRegister(msg, nonce)
	if err != nil {
		return nil, err
	}
	s.nodeKey = reg.NodeKey
	if err := checkRegister(reg); err != nil {
		return nil, err
	}
	now := s.fleet.cfg.Now()
	node := newNode(reg, accountID, now, s)
	if node.Selftest {
		// Checked, not recorded: the node only has to be its provider's.
		if err := s.owned(ctx, node); err != nil {
			return nil, err
		}
	} else {
		release, err := s.fleet.reserve(node) // before its record: a refused node leaves none
		if err != nil {
			return nil, err
		}
		s.release = release
		if err := s.record(ctx, node, reg, now); err != nil {
			return nil, err
		}
	}
	s.lastSeen = now
	return node, nil
}

// decodeRegister reads the message that answers the challenge of nonce: a register frame, in
// the protocol version this coordinator speaks, signed with the node's key. The caller checks
// it against the limits (checkRegister) once the node is known by its key.
func decodeRegister(msg, nonce []byte) (*protocol.Register, error) {
	var fr protocol.Frame
	if err := json.Unmarshal(msg, &fr); err != nil || fr.Type != protocol.TypeRegister || fr.Register == nil {
		return nil, refuse("first frame is not a register frame")
	}
	reg := fr.Register
	if reg.Version != protocol.Version {
		return nil, fmt.Errorf("agent speaks protocol version %d, coordinator speaks %d: upgrade the agent", reg.Version, protocol.Version)
	}
	if len(reg.NodeKey) != ed25519.PublicKeySize {
		return nil, errors.New("node key is not an ed25519 public key")
	}
	if !ed25519.Verify(reg.NodeKey, protocol.RegisterMessage(nonce), reg.Signature) {
		if ed25519.Verify(reg.NodeKey, nonce, reg.Signature) {
			// Checked only to say why: the registration is refused all the same.
			return nil, errors.New("node key signature does not verify: the agent signed the bare nonce, as agents before receipts did; upgrade the agent")
		}
		return nil, errors.New("node key signature does not verify")
	}
	return reg, nil
}

// newNode is the node a checked registration describes, connected at now on session s.
func newNode(reg *protocol.Register, accountID string, now time.Time, s *session) *Node {
	node := &Node{
		ID:        NodeID(reg.NodeKey),
		AccountID: accountID,
		Name:      reg.Name,
		Region:    reg.Region,
		Engine:    reg.Engine,
		Agent:     reg.Agent,
		Hardware:  reg.Hardware,
		Connected: now,
		Windows:   reg.Windows,
		Timezone:  reg.Timezone,
		Selftest:  reg.Selftest,
		sess:      s,
	}
	for _, o := range reg.Offers {
		node.Offers = append(node.Offers, &Offer{Offer: o, Node: node})
	}
	return node
}

// record stores the node's registration. A node key belongs to the provider account that
// first registered it.
func (s *session) record(ctx context.Context, n *Node, reg *protocol.Register, now time.Time) error {
	st := s.fleet.cfg.Store
	prev, err := st.Node(ctx, n.ID)
	switch {
	case err == nil && prev.AccountID != n.AccountID:
		return fmt.Errorf("node %s belongs to another provider account", n.ID)
	case errors.Is(err, store.ErrNotFound):
		prev = nil
	case err != nil:
		return fmt.Errorf("look up node %s: %w", n.ID, err)
	}
	hw, _ := json.Marshal(reg.Hardware)
	offers, _ := json.Marshal(reg.Offers)
	if err := st.MarkProvider(ctx, n.AccountID); err != nil {
		return fmt.Errorf("mark provider: %w", err)
	}
	rec := &store.Node{
		ID: n.ID, AccountID: n.AccountID, PublicKey: reg.NodeKey, Name: n.Name, Region: n.Region,
		Engine: n.Engine, Agent: n.Agent, Hardware: hw, Offers: offers, FirstSeen: now, LastSeen: now,
		Fingerprint: reg.Hardware.Fingerprint, Windows: reg.Windows, Timezone: reg.Timezone,
	}
	newLevel := store.LevelNew
	if s.fleet.cfg.TrustNewNodes {
		newLevel = store.LevelVerified
	}
	level := newLevel
	if prev != nil {
		level = prev.Level
		rec.HardwareChangedAt = prev.HardwareChangedAt
		if prev.Fingerprint != "" && prev.Fingerprint != rec.Fingerprint {
			// New GPUs or a new driver: the node must prove itself again.
			rec.HardwareChangedAt = now
			s.fleet.log.Warn("node hardware changed", logNode, n.ID, "from", prev.Fingerprint, "to", rec.Fingerprint)
			err := st.AddNodeEvent(ctx, &store.NodeEvent{NodeID: n.ID, At: now, Kind: store.EventHardwareChanged,
				Detail: fmt.Sprintf("hardware fingerprint %s → %s: %s", prev.Fingerprint, cmp.Or(rec.Fingerprint, "none"), gpuSummary(reg.Hardware))})
			if err != nil {
				return fmt.Errorf("record node %s: %w", n.ID, err)
			}
			if (level == store.LevelVerified || level == store.LevelTrusted) && level != newLevel {
				// A quarantined (or suspended) node stays so: new hardware is no way out.
				level = newLevel // it proves itself again before it gets live traffic
				if err := st.SetNodeLevel(ctx, n.ID, level, "hardware changed: verified again before live traffic", now); err != nil {
					return fmt.Errorf("record node %s: %w", n.ID, err)
				}
			}
		}
	}
	if err := st.UpsertNode(ctx, rec); err != nil {
		return fmt.Errorf("record node %s: %w", n.ID, err)
	}
	if prev == nil && level != store.LevelNew {
		if err := st.SetNodeLevel(ctx, n.ID, level, "trusted without onboarding checks (coordinator setting)", now); err != nil {
			return fmt.Errorf("record node %s: %w", n.ID, err)
		}
	}
	n.level.Store(&level)
	if prev != nil {
		// Its record's last score, until the next scoring: connecting again wipes nothing, so
		// a node back from a crash does not rank as one with a perfect record
		// (docs/reputation.md).
		n.SetScore(prev.Score)
	}
	s.act.rec = store.NodeSession{ID: newSessionID(), NodeID: n.ID, ConnectedAt: now, LastSeen: now}
	if err := st.StartNodeSession(ctx, &s.act.rec); err != nil {
		return fmt.Errorf("record node %s's session: %w", n.ID, err)
	}
	return nil
}

// owned checks that a node key belongs to the provider account registering it, or to none.
func (s *session) owned(ctx context.Context, n *Node) error {
	prev, err := s.fleet.cfg.Store.Node(ctx, n.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("look up node %s: %w", n.ID, err)
	case prev.AccountID != n.AccountID:
		return fmt.Errorf("node %s belongs to another provider account", n.ID)
	}
	return nil
}

// selftest runs the coordinator's checks of a node that asked for a selftest, sends it the
// results, and ends the session.
func (s *session) selftest(ctx, wsctx context.Context) error {
	if s.fleet.cfg.Selftest == nil {
		return fmt.Errorf("%w: this coordinator cannot run selftests", errSelftestDone)
	}
	res := s.fleet.cfg.Selftest(ctx, s.node)
	if err := s.writeFrame(wsctx, protocol.Frame{Type: protocol.TypeSelftest, Selftest: res}); err != nil {
		return err
	}
	return errSelftestDone
}

// gpuSummary reads like "2 × NVIDIA GeForce RTX 3090 24576 MiB, driver 550.54".
func gpuSummary(hw protocol.Hardware) string {
	if len(hw.GPUs) == 0 {
		return "no GPU"
	}
	g := hw.GPUs[0]
	s := fmt.Sprintf("%d × %s %d MiB", len(hw.GPUs), g.Name, g.VRAMMiB)
	if g.Driver != "" {
		s += ", driver " + g.Driver
	}
	return s
}

func newSessionID() string {
	var b [10]byte
	rand.Read(b[:])
	return "ns_" + nodeIDEncoding.EncodeToString(b[:])
}

// close ends the session: every job still running fails, and the connection closes.
func (s *session) close(err error) {
	s.closeOnce.Do(func() {
		if err == nil {
			err = errNodeGone
		}
		s.err = err
		close(s.done)
		s.endJobs(err)
		status := websocket.StatusInternalError
		var le *limitError
		switch {
		case errors.Is(err, errSelftestDone):
			status = websocket.StatusNormalClosure
		case errors.Is(err, errCoordinatorClosing) || errors.Is(err, errReplaced):
			status = websocket.StatusGoingAway
		case errors.As(err, &le):
			status = websocket.StatusPolicyViolation
		}
		s.conn.Close(status, protocol.Clip(err.Error(), maxCloseReason))
	})
}

// maxAwaitingReceipts bounds the ended jobs of a session whose receipt frames are awaited: a
// node's receipts come within milliseconds of their ends, so only a node that holds them back
// reaches it, and its newer jobs then go without receipts.
const maxAwaitingReceipts = 4096

// awaitReceipt waits for the receipt frame of an ended job.
func (s *session) awaitReceipt(j *Job) {
	s.mu.Lock()
	if s.awaiting == nil && !s.ended() {
		s.awaiting = make(map[string]*Job)
	}
	ok := s.awaiting != nil && len(s.awaiting) < maxAwaitingReceipts
	if ok {
		s.awaiting[j.ID] = j
	}
	s.mu.Unlock()
	if !ok {
		j.noReceipt()
	}
}

// forgetReceipt stops awaiting a job's receipt frame.
func (s *session) forgetReceipt(j *Job) {
	s.mu.Lock()
	if s.awaiting[j.ID] == j {
		delete(s.awaiting, j.ID)
	}
	s.mu.Unlock()
}

// ended says the session has ended.
func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// endJobs fails every job still running on the session, which ends for err.
func (s *session) endJobs(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.awaiting {
		j.noReceipt() // the receipts the node still owed will not come
	}
	s.awaiting = nil
	jobs := s.jobs
	s.jobs = nil
	now := s.fleet.cfg.Now()
	for _, j := range jobs {
		end := &protocol.End{Error: &protocol.Error{Message: fmt.Sprintf("node %s: %v", j.Offer.Node.ID, errNodeGone)}}
		if !errors.Is(err, errCoordinatorClosing) {
			// A job cut short by the coordinator's own shutdown is not the node's failure.
			s.act.ended(j.Offer.Node.ID, now, end)
		}
		j.finish(protocol.Frame{Type: protocol.TypeEnd, Job: j.ID, End: end})
	}
	s.act.jobEnded(0, now)
}

// send queues a frame for the writer. It fails once the session has ended.
func (s *session) send(fr protocol.Frame) error {
	select {
	case s.out <- fr:
		return nil
	case <-s.done:
		return s.err
	}
}

func (s *session) writeLoop(ctx, wsctx context.Context) error {
	var b protocol.Batcher
	for {
		var fr protocol.Frame
		select {
		case fr = <-s.out:
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		}
		msg, err := b.Encode(fr, s.out)
		if err == nil {
			err = s.conn.Write(wsctx, websocket.MessageText, msg)
		}
		if err != nil {
			return fmt.Errorf("write to node: %w", err)
		}
	}
}

// writeFrame writes one frame as a message, during the handshake.
func (s *session) writeFrame(ctx context.Context, fr protocol.Frame) error {
	b, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	return s.conn.Write(ctx, websocket.MessageText, b)
}

func (s *session) readLoop(ctx context.Context) error {
	var msgs protocol.Messages
	for {
		_, r, err := s.conn.Reader(ctx)
		var msg []byte
		if err == nil {
			msg, err = msgs.Read(r)
		}
		if err != nil {
			select {
			case <-s.done: // closed on purpose
				return nil
			default:
			}
			return fmt.Errorf("read from node: %w", err)
		}
		if err := s.apply(msg); err != nil {
			return err
		}
	}
}

// apply takes in a message from the node: its frames, in order, each checked against the
// protocol's limits. An error refuses the node.
func (s *session) apply(msg []byte) error {
	s.mu.Lock()
	s.lastSeen = s.fleet.cfg.Now()
	s.mu.Unlock()
	if err := protocol.Decode(msg, s.handle); err != nil {
		if !overLimit(err) {
			// A JSON error, which may quote a long literal of the node's.
			err = refuse("%s", protocol.Clip(err.Error(), 100))
		}
		return fmt.Errorf("from node: %w", err)
	}
	return nil
}

func (s *session) handle(fr protocol.Frame) error {
	switch fr.Type {
	case protocol.TypeHeartbeat:
		if fr.Heartbeat != nil && s.node != nil {
			if err := s.checkHeartbeat(fr.Heartbeat); err != nil {
				return err
			}
			s.heartbeat(fr.Heartbeat)
		}
		return nil
	case protocol.TypeDelta, protocol.TypeEnd:
		if (fr.Type == protocol.TypeDelta && fr.Delta == nil) || (fr.Type == protocol.TypeEnd) != (fr.End != nil) {
			return refuse("protocol violation: %s frame without its body", fr.Type)
		}
		if fr.Delta != nil {
			if err := checkDelta(fr.Delta); err != nil {
				return err
			}
		}
		if fr.End != nil {
			if err := s.checkEnd(fr.End); err != nil {
				return err
			}
		}
		s.mu.Lock()
		j := s.jobs[fr.Job]
		var now time.Time
		if j != nil && fr.Type == protocol.TypeEnd {
			delete(s.jobs, fr.Job)
			now = s.fleet.cfg.Now()
			s.act.jobEnded(len(s.jobs), now)
			s.act.ended(s.node.ID, now, fr.End)
		}
		s.mu.Unlock()
		if j == nil {
			return nil // a job that already ended on this side
		}
		if fr.Type == protocol.TypeDelta {
			j.output.Add(*fr.Delta) // only this reader touches it
			return j.deliver(fr)
		}
		if fr.Delta != nil {
			// The last delta, riding on the end frame, goes in whatever the window.
			j.output.Add(*fr.Delta)
			j.put(protocol.Frame{Type: protocol.TypeDelta, Job: fr.Job, Delta: fr.Delta}, -1)
			fr.Delta = nil
		}
		if j.sawEnd(fr.End, now) {
			s.awaitReceipt(j)
		}
		j.finish(fr)
		return nil
	case protocol.TypeReceipt:
		if n := len(fr.Receipt); n == 0 || n > protocol.MaxReceiptBytes {
			return refuse("receipt of %d bytes not in 1..%d", n, protocol.MaxReceiptBytes)
		}
		s.mu.Lock()
		j := s.awaiting[fr.Job]
		delete(s.awaiting, fr.Job)
		s.mu.Unlock()
		if j != nil {
			j.receiptCame(fr.Receipt)
		} // else: a job whose receipt no one waits for any more, or none of this node's
		return nil
	default:
		return refuse("protocol violation: unexpected %s frame from node", quote(fr.Type))
	}
}

// watchdog ends the session when the node has been silent for three heartbeat intervals, and
// measures the round trip to the node every interval.
func (s *session) watchdog(ctx context.Context) error {
	every := s.fleet.cfg.HeartbeatInterval
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-t.C:
		}
		s.mu.Lock()
		silent := s.fleet.cfg.Now().Sub(s.lastSeen)
		s.mu.Unlock()
		if silent > 3*every {
			return fmt.Errorf("node silent for %s", silent.Round(time.Millisecond))
		}
		s.ping(ctx)
	}
}
