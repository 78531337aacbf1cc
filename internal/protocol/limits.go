package protocol

import (
	"strings"
	"unicode/utf8"
)

// Limits of what a node may send. Nodes are strangers, so the coordinator takes every frame
// from one as untrusted input and holds it to these bounds (since 2026-12-01). Each bound is
// either a refusal or a clamp:
//
//   - A refusal closes the connection with WebSocket status 1008 (policy violation), or 1009
//     (message too big) for a message over the size limit, and a short reason that names the
//     limit, such as "too many offers: 5000 > 64". Nothing the node sent is echoed but a
//     short, clipped prefix. A refusal of the register frame is a refusal of the node's
//     configuration: reconnecting cannot fix it, and the agent exits saying why.
//   - A clamp keeps the frame and cuts the field down to its bound: free text the node's own
//     state produces (a pause reason, an engine's error, a GPU process's name) and lists that
//     can be long on an honest machine (the processes using its GPUs).
//
// Byte lengths are of the decoded strings (UTF-8), not of their JSON.
const (
	// MaxMessageBytes bounds one WebSocket message from an agent, all its frames together
	// (refused: 1009). The largest frame an honest agent sends is a delta of at most
	// MaxDeltaBytes, whose JSON is at most six times as long (a control character is escaped
	// as \u00XX), and a batch takes no more frames once it holds MaxBatchBytes: so an honest
	// agent's message is under 2.6 MiB.
	MaxMessageBytes = 4 << 20
	// MaxRegisterBytes bounds the first message, the register frame (refused: 1009). A
	// register at every limit below is under 400 KiB of JSON.
	MaxRegisterBytes = 1 << 20

	// MaxOffers bounds the offers of one node (refused). An agent that would offer more of the
	// engine's models by default offers the first MaxOffers; one told to offer more refuses
	// to start.
	MaxOffers = 64
	// MaxModelBytes bounds an offer's model id (refused), such as
	// "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M".
	MaxModelBytes = 256
	// MaxOfferConcurrent bounds an offer's max_concurrent (refused).
	MaxOfferConcurrent = 1024
	// MaxContextLength bounds an offer's context_length, and each of an end's usage counts
	// (refused).
	MaxContextLength = 1 << 24
	// MaxNameBytes bounds the node's display name (refused); the default, the host name, is
	// at most 64 bytes on Linux.
	MaxNameBytes = 128
	// MaxRegionBytes bounds the node's region (refused); see [ValidRegion].
	MaxRegionBytes = 32
	// MaxTagBytes bounds the short identifiers a register carries (refused): the agent's
	// version, the engine's name, an offer's quantization, the time zone, the hardware's
	// fingerprint, OS and architecture, and a GPU's vendor, UUID, driver and CUDA version.
	MaxTagBytes = 64
	// MaxHardwareNameBytes bounds the name of the CPU and of each GPU (refused).
	MaxHardwareNameBytes = 128
	// MaxWindowsBytes bounds the node's availability windows (refused).
	MaxWindowsBytes = 512
	// MaxGPUs bounds the GPUs of the hardware a node registers and of a heartbeat's reading
	// (refused): the largest machines have 8 to 16, and MIG splits an H100 in at most 7.
	MaxGPUs = 64
	// MaxAskWindows bounds the windows of an offer's ask schedule (refused), and
	// MaxAskWindowNameBytes each window's name (refused): a name such as "peak" or
	// "off-peak", letters, digits, "-" and "_". A window's time spec is bounded by
	// MaxWindowsBytes, and its zone by MaxTagBytes.
	MaxAskWindows         = 16
	MaxAskWindowNameBytes = 32

	// MaxLoaded bounds a heartbeat's list of loaded models (refused).
	MaxLoaded = 4 * MaxOffers
	// MaxGPUProcesses bounds the processes a heartbeat's reading lists (clamped: the
	// coordinator keeps those that use the most GPU memory).
	MaxGPUProcesses = 256
	// MaxProcessNameBytes bounds a GPU process's name (clamped).
	MaxProcessNameBytes = 128
	// MaxPauseReasonBytes bounds a heartbeat's pause reason (clamped): it may quote the
	// node's windows and one reason per GPU.
	MaxPauseReasonBytes = 512

	// MaxDeltaBytes bounds a delta's text, reasoning and tool calls together (refused). The
	// agent cuts a longer piece of text into several deltas, and fails a job whose engine
	// sends tool calls longer than this in one piece. A job's buffer at the coordinator holds
	// up to Window deltas: 64 MiB at most.
	MaxDeltaBytes = 256 << 10
	// MaxDeltaPieces bounds a delta's count of the engine's pieces (refused): the agent merges
	// at most this many into one delta.
	MaxDeltaPieces = 64
	// MaxFinishReasonBytes bounds an end's finish reason (refused).
	MaxFinishReasonBytes = 32
	// MaxErrorBytes bounds an end's error message (clamped), which reaches the buyer.
	MaxErrorBytes = 1024
	// MaxReceiptBytes bounds an end's receipt (refused); a receipt is under 2 KiB.
	MaxReceiptBytes = 4096
)

// ValidRegion reports whether region is a region as a node declares it: empty (unknown), or
// up to MaxRegionBytes of lower-case ASCII letters and digits, in words joined by single
// hyphens, beginning with a letter. That is an ISO 3166-1 alpha-2 country code such as "de",
// which buyers' region rules match, a group such as "eu", or the provider's own name for an
// area, such as "eu-west" or "us-east-1". The coordinator lower-cases a region's ASCII letters
// before it checks it, so "DE" is taken as "de".
func ValidRegion(region string) bool {
	if len(region) > MaxRegionBytes {
		return false
	}
	for i := 0; i < len(region); i++ {
		c := region[i]
		switch {
		case 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		case c == '-' && i > 0 && i < len(region)-1 && region[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// NormalRegion is region as the coordinator takes it: its ASCII letters lower-cased, and
// nothing else (strings.ToLower would turn the Kelvin sign into a k, a valid region).
func NormalRegion(region string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, region)
}

// Clip returns s cut to at most n bytes between two characters, ending in "…" when cut, for
// quoting what a node sent in an error, a log line or a clamped field.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	if n < len(ellipsis) {
		return ""
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
