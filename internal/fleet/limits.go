package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode"

	"github.com/coder/websocket"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
)

// What a node sends is held to the protocol's limits (protocol.MaxMessageBytes and the
// constants after it): a frame over one is refused, and the session closes with
// StatusPolicyViolation and a short reason that names the limit; a field the limits clamp is
// cut down, and the first clamp of each field is logged, once per connection.

// limitError refuses what a node sent: a frame over one of the protocol's limits, or one that
// breaks its rules. Its text is the close reason: it names the limit and quotes nothing the
// node sent but a clipped prefix.
type limitError struct{ reason string }

func (e *limitError) Error() string { return e.reason }

func refuse(format string, args ...any) error {
	return &limitError{reason: fmt.Sprintf(format, args...)}
}

// overLimit reports whether err refuses the node for what it sent: a limitError, or a message
// over the read limit (which the WebSocket library refuses itself, with StatusMessageTooBig).
func overLimit(err error) bool {
	var le *limitError
	return errors.As(err, &le) || errors.Is(err, websocket.ErrMessageTooBig)
}

// quote quotes a short prefix of a string a node sent, for a refusal's reason.
func quote(s string) string { return strconv.Quote(protocol.Clip(s, 24)) }

// textProblem says what is wrong with a string a node sent, bounded to max bytes: too long, or
// holding a control character (a newline, an escape, a bidirectional override), which no
// name or identifier needs and which would garble logs and the console; "" when nothing is.
func textProblem(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("too long: %d > %d bytes", len(s), max)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return "holds a control character"
		}
	}
	return ""
}

// boundedText is a string a node sent, what it is, and the most bytes it may hold.
type boundedText struct {
	what string
	s    string
	max  int
}

// checkRegister refuses a registration over the protocol's limits, or with an offer that makes
// no sense. It lower-cases the region's ASCII letters.
func checkRegister(reg *protocol.Register) error {
	hw := &reg.Hardware
	if n := len(reg.Offers); n > protocol.MaxOffers {
		return refuse("too many offers: %d > %d", n, protocol.MaxOffers)
	}
	if n := len(hw.GPUs); n > protocol.MaxGPUs {
		return refuse("too many GPUs: %d > %d", n, protocol.MaxGPUs)
	}
	if n := len(reg.Region); n > protocol.MaxRegionBytes {
		return refuse("region too long: %d > %d bytes", n, protocol.MaxRegionBytes)
	}
	reg.Region = protocol.NormalRegion(reg.Region)
	if !protocol.ValidRegion(reg.Region) {
		return refuse("invalid region %s: want a code such as de, eu or eu-west", quote(reg.Region))
	}
	texts := []boundedText{
		{"name", reg.Name, protocol.MaxNameBytes},
		{"agent version", reg.Agent, protocol.MaxTagBytes},
		{"engine", reg.Engine, protocol.MaxTagBytes},
		{"windows", reg.Windows, protocol.MaxWindowsBytes},
		{"timezone", reg.Timezone, protocol.MaxTagBytes},
		{"hardware os", hw.OS, protocol.MaxTagBytes},
		{"hardware arch", hw.Arch, protocol.MaxTagBytes},
		{"hardware fingerprint", hw.Fingerprint, protocol.MaxTagBytes},
		{"cpu name", hw.CPU, protocol.MaxHardwareNameBytes},
	}
	for _, t := range texts {
		if p := textProblem(t.s, t.max); p != "" {
			return refuse("%s %s", t.what, p)
		}
	}
	if hw.CPUs < 0 || hw.MemoryMiB < 0 {
		return refuse("hardware: negative cpus or memory")
	}
	for i, g := range hw.GPUs {
		if g.VRAMMiB < 0 {
			return refuse("gpu %d: negative vram", i)
		}
		for _, t := range [...]boundedText{
			{"name", g.Name, protocol.MaxHardwareNameBytes},
			{"vendor", g.Vendor, protocol.MaxTagBytes},
			{"uuid", g.UUID, protocol.MaxTagBytes},
			{"driver", g.Driver, protocol.MaxTagBytes},
			{"cuda", g.CUDA, protocol.MaxTagBytes},
		} {
			if p := textProblem(t.s, t.max); p != "" {
				return refuse("gpu %d %s %s", i, t.what, p)
			}
		}
	}
	return checkOffers(reg.Offers)
}

func checkOffers(offers []protocol.Offer) error {
	if len(offers) == 0 {
		return refuse("the node offers no model")
	}
	seen := make(map[string]bool, len(offers))
	for i, o := range offers {
		if o.Model == "" {
			return refuse("offer %d has no model", i)
		}
		if p := textProblem(o.Model, protocol.MaxModelBytes); p != "" {
			return refuse("offer %d: model id %s", i, p)
		}
		if p := textProblem(o.Quantization, protocol.MaxTagBytes); p != "" {
			return refuse("offer %s: quantization %s", quote(o.Model), p)
		}
		switch {
		case seen[o.Model]:
			return refuse("model %s offered twice", quote(o.Model))
		case o.MaxConcurrent < 1 || o.MaxConcurrent > protocol.MaxOfferConcurrent:
			return refuse("offer %s: max_concurrent %d not in 1..%d", quote(o.Model), o.MaxConcurrent, protocol.MaxOfferConcurrent)
		case o.GoldSlots < 0 || o.GoldSlots > o.MaxConcurrent:
			return refuse("offer %s: gold_slots %d not in 0..%d (max_concurrent)", quote(o.Model), o.GoldSlots, o.MaxConcurrent)
		case o.ContextLength < 0 || o.ContextLength > protocol.MaxContextLength:
			return refuse("offer %s: context_length %d not in 0..%d", quote(o.Model), o.ContextLength, protocol.MaxContextLength)
		case o.InputPrice < 0 || o.OutputPrice < 0 || money.Price(o.InputPrice) > money.MaxPrice || money.Price(o.OutputPrice) > money.MaxPrice:
			return refuse("offer %s: prices must be between 0 and %s USD per 1M tokens", quote(o.Model), money.MaxPrice)
		}
		if _, err := pricing.Compile(o.AskSchedule); err != nil {
			return refuse("offer %s: ask schedule: %v", quote(o.Model), err)
		}
		seen[o.Model] = true
	}
	return nil
}

// checkHeartbeat refuses a heartbeat over the limits, and clamps its pause reason and its
// reading's processes: free text the node's own state produces, and a list that can be long on
// an honest machine, of which those using the most GPU memory are kept.
func (s *session) checkHeartbeat(hb *protocol.Heartbeat) error {
	if n := len(hb.Loaded); n > protocol.MaxLoaded {
		return refuse("too many loaded models in a heartbeat: %d > %d", n, protocol.MaxLoaded)
	}
	if n := len(hb.Paused); n > protocol.MaxPauseReasonBytes {
		hb.Paused = protocol.Clip(hb.Paused, protocol.MaxPauseReasonBytes)
		s.clamped("pause reason", n, protocol.MaxPauseReasonBytes)
	}
	t := hb.Telemetry
	if t == nil {
		return nil
	}
	if n := len(t.GPUs); n > protocol.MaxGPUs {
		return refuse("too many GPUs in a heartbeat: %d > %d", n, protocol.MaxGPUs)
	}
	if n := len(t.Processes); n > protocol.MaxGPUProcesses {
		slices.SortStableFunc(t.Processes, func(a, b protocol.GPUProcess) int { return cmp.Compare(b.UsedMiB, a.UsedMiB) })
		t.Processes = slices.Clone(t.Processes[:protocol.MaxGPUProcesses]) // lets the rest go
		s.clamped("gpu processes", n, protocol.MaxGPUProcesses)
	}
	for i := range t.Processes {
		if p := &t.Processes[i]; len(p.Name) > protocol.MaxProcessNameBytes {
			s.clamped("gpu process name", len(p.Name), protocol.MaxProcessNameBytes)
			p.Name = protocol.Clip(p.Name, protocol.MaxProcessNameBytes)
		}
	}
	return nil
}

// checkDelta refuses a delta over the limits.
func checkDelta(d *protocol.Delta) error {
	if n := len(d.Text) + len(d.Reasoning) + len(d.ToolCalls); n > protocol.MaxDeltaBytes {
		return refuse("delta too large: %d > %d bytes", n, protocol.MaxDeltaBytes)
	}
	if d.Pieces < 0 || d.Pieces > protocol.MaxDeltaPieces {
		return refuse("delta pieces %d not in 0..%d", d.Pieces, protocol.MaxDeltaPieces)
	}
	return nil
}

// checkEnd refuses an end over the limits, and clamps its error message: an engine's errors
// can be long, and the message reaches the buyer.
func (s *session) checkEnd(e *protocol.End) error {
	if n := len(e.FinishReason); n > protocol.MaxFinishReasonBytes {
		return refuse("finish reason too long: %d > %d bytes", n, protocol.MaxFinishReasonBytes)
	}
	if u := e.Usage; u.PromptTokens < 0 || u.CompletionTokens < 0 || u.PromptTokens > protocol.MaxContextLength || u.CompletionTokens > protocol.MaxContextLength {
		return refuse("usage of %d prompt and %d completion tokens not in 0..%d", u.PromptTokens, u.CompletionTokens, protocol.MaxContextLength)
	}
	if n := len(e.Receipt); n > protocol.MaxReceiptBytes {
		return refuse("receipt too large: %d > %d bytes", n, protocol.MaxReceiptBytes)
	}
	if e.Error != nil {
		if n := len(e.Error.Message); n > protocol.MaxErrorBytes {
			e.Error.Message = protocol.Clip(e.Error.Message, protocol.MaxErrorBytes)
			s.clamped("error message", n, protocol.MaxErrorBytes)
		}
	}
	return nil
}

// clamped logs that a field the node sent was cut down to its limit: the first time for each
// field on this connection. Only the session's reader calls it.
func (s *session) clamped(field string, got, limit int) {
	if s.clamps[field] {
		return
	}
	if s.clamps == nil {
		s.clamps = make(map[string]bool)
	}
	s.clamps[field] = true
	s.fleet.log.Warn("clamped what a node sent to the protocol's limit (logged once per connection)",
		logNode, s.nodeID(), "field", field, "got", got, "limit", limit)
}
