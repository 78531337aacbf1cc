package hw

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultContext is the context length, in tokens, assumed when a ModelSpec gives none:
// Ollama's default.
const DefaultContext = 4096

// runtimeOverhead is the GPU runtime's own memory, the CUDA context and its kernels: about
// 0.5 GiB.
const runtimeOverhead = 512 << 20

// ubatch is llama.cpp's default physical batch (n_ubatch): the tokens one forward pass of the
// prompt computes at once, which sizes the compute buffers.
const ubatch = 512

// ModelSpec is what is known of a model and how it will be served, for [Estimate] and
// [Check]. A zero field is unknown.
type ModelSpec struct {
	Name         string  // for messages, e.g. "llama3.1:70b"
	Parameters   float64 // in billions; [ParseParameters] reads them from names and from Ollama
	Quantization string  // Q4_K_M, Q8_0, F16, fp8, awq, ..., in any case
	// SizeBytes is the weights' size on disk. When known it is used as the weights' memory
	// instead of Parameters × bits per weight: real files mix quantization types.
	SizeBytes     int64
	ContextLength int // tokens each slot holds; 0 is DefaultContext
	Parallel      int // slots served at once, each with its own context; 0 is 1
	// KVCacheType is how the engine stores keys and values: "" or f16 (the default), q8_0 or
	// q4_0 (llama.cpp's --cache-type-k/v, Ollama's OLLAMA_KV_CACHE_TYPE), fp8 (vLLM).
	KVCacheType string
	// FlashAttention is true when the engine uses flash attention, which needs no buffer of
	// attention scores. False, the default, is the safe guess.
	FlashAttention bool
	// Arch is the model's shape when known (Ollama's /api/show model_info has it); nil means
	// a typical model of its size.
	Arch *Arch
}

// Arch is the shape of a transformer, which sizes its KV cache and compute buffers.
type Arch struct {
	Layers  int // transformer blocks (block_count)
	Heads   int // attention heads (attention.head_count)
	KVHeads int // key/value heads (attention.head_count_kv): fewer than Heads with grouped-query attention
	HeadDim int // dimension of one head: embedding_length / head_count
	Vocab   int // tokens in the vocabulary
}

// Need is the GPU memory, in bytes, a model needs to run entirely on the GPU, and how that adds
// up.
type Need struct {
	Weights int64 // the weights file, or parameters × bits per weight
	KVCache int64 // keys and values for every token of every slot's context
	// Graph is llama.cpp's compute buffer: the logits of a batch and, without flash attention,
	// the attention scores of a batch against the whole context.
	Graph    int64
	Overhead int64 // the GPU runtime's own memory: about 0.5 GiB
	Total    int64 // the sum; 0 when the model's size is unknown
	// Assumed says what Estimate had to guess, for messages: "16-bit weights (quantization
	// IQ3_M is not known)".
	Assumed []string
}

// Estimate returns the GPU memory a model needs, as llama.cpp (and so Ollama) allocates it:
// weights + KV cache + compute buffers + runtime overhead. KV cache = 2 (keys and values) ×
// layers × context × KV heads × head dim × bytes per value × slots: Llama-3.1-8B at f16 needs
// 128 KiB a token, 1 GiB for 8192 tokens. When the shape is not given it is that of a typical
// model of the size (see typical). The result is an estimate, within some percent of what
// llama.cpp reports; Total is 0 when neither the parameters nor the file size is known. vLLM
// allocates differently (it takes a fixed share of the GPU and fills what is left after the
// weights with KV cache), so for vLLM this is the least it needs.
func Estimate(m ModelSpec) Need {
	var n Need
	bpw, ok := bitsPerWeight(m.Quantization)
	if !ok {
		n.Assumed = append(n.Assumed, fmt.Sprintf("16-bit weights (quantization %q is not known)", m.Quantization))
	}
	params := m.Parameters
	switch {
	case m.SizeBytes > 0:
		n.Weights = m.SizeBytes
		if params <= 0 {
			params = float64(m.SizeBytes) * 8 / bpw / 1e9
		}
	case params > 0:
		n.Weights = clampBytes(params * 1e9 * bpw / 8)
	default:
		return Need{}
	}
	arch := typicalArch(params)
	if m.Arch != nil {
		arch = *m.Arch
	}
	kvBits, ok := kvCacheBits(m.KVCacheType)
	if !ok {
		n.Assumed = append(n.Assumed, fmt.Sprintf("an f16 KV cache (type %q is not known)", m.KVCacheType))
	}
	tokens := float64(contextLength(m)) * float64(max(m.Parallel, 1))
	n.KVCache = clampBytes(2 * float64(arch.Layers) * tokens * float64(arch.KVHeads) * float64(arch.HeadDim) * kvBits / 8)
	n.Graph = graphBytes(arch, tokens, m.FlashAttention)
	n.Overhead = runtimeOverhead
	n.Total = clampBytes(float64(n.Weights) + float64(n.KVCache) + float64(n.Graph) + float64(n.Overhead))
	return n
}

// graphBytes is llama.cpp's compute buffer for a batch of ubatch tokens: its logits (f32, one
// per vocabulary token) and, without flash attention, its attention scores against every
// token of the cache (f32, one per head).
func graphBytes(arch Arch, tokens float64, flashAttention bool) int64 {
	logits := float64(arch.Vocab) * ubatch * 4
	scores := tokens * ubatch * float64(arch.Heads) * 4
	if flashAttention {
		scores = 0
	}
	return clampBytes(logits + scores)
}

// contextLength returns the context each slot holds.
func contextLength(m ModelSpec) int {
	if m.ContextLength > 0 {
		return m.ContextLength
	}
	return DefaultContext
}

// clampBytes converts a size in bytes to int64, within [0, MaxInt64]: no input makes it wrap.
func clampBytes(b float64) int64 {
	switch {
	case math.IsNaN(b) || b <= 0:
		return 0
	case b >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(b)
}

// FitError is [Check]'s answer when a model does not fit: what it needs and what the node has.
type FitError struct {
	Model   ModelSpec // the model that was checked
	Need    Need      // what it needs
	VRAMMiB int64     // what the node has
}

// Error says what the model needs, what the node has, and what would fit, as in "llama3.1:70b
// (70B at Q4_K_M, 8192 context) needs about 44.5 GiB of GPU memory; this node has 24.0 GiB.
// In 24 GiB fit models up to about 32B at Q4_K_M or 14B at Q8_0."
func (e *FitError) Error() string {
	name := e.Model.Name
	if name == "" {
		name = "the model"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) needs about %s of GPU memory; this node has %s.",
		name, describe(e.Model), gib(e.Need.Total), gib(e.VRAMMiB<<20))
	if s := suggest(e.VRAMMiB, e.Model); s != "" {
		b.WriteString(" " + s)
	}
	if len(e.Need.Assumed) > 0 {
		b.WriteString(" Assumed " + strings.Join(e.Need.Assumed, " and ") + ".")
	}
	return b.String()
}

// Check returns a *FitError when the model does not fit in vramMiB of GPU memory (one GPU's,
// or the sum of those a model is split over), and nil when it fits. When it cannot tell (the
// node's memory or the model's size is unknown) it returns nil: the engine will say.
func Check(m ModelSpec, vramMiB int64) error {
	if vramMiB <= 0 || vramMiB > math.MaxInt64>>20 {
		return nil
	}
	need := Estimate(m)
	if need.Total == 0 || need.Total <= vramMiB<<20 {
		return nil
	}
	return &FitError{Model: m, Need: need, VRAMMiB: vramMiB}
}

// commonSizes are the parameter counts, in billions, that models commonly come in.
var commonSizes = []float64{0.5, 1, 1.5, 3, 4, 7, 8, 12, 14, 24, 27, 32, 70, 72, 123, 405}

// MaxParameters returns the largest common model size, in billions of parameters, that fits
// in vramMiB served as m is: at its quantization, context length, slots, KV cache type and
// flash attention; m's own size and shape are ignored. It tells a provider what their GPU can
// serve; 0 when nothing fits.
func MaxParameters(vramMiB int64, m ModelSpec) float64 {
	m.SizeBytes, m.Arch = 0, nil
	for i := len(commonSizes) - 1; i >= 0; i-- {
		m.Parameters = commonSizes[i]
		if Check(m, vramMiB) == nil {
			return commonSizes[i]
		}
	}
	return 0
}

// suggest says what fits in vramMiB served as m is, at Q4_K_M and Q8_0: "In 24 GiB fit models
// up to about 32B at Q4_K_M or 14B at Q8_0."
func suggest(vramMiB int64, m ModelSpec) string {
	m.Quantization = "Q4_K_M"
	q4 := MaxParameters(vramMiB, m)
	m.Quantization = "Q8_0"
	q8 := MaxParameters(vramMiB, m)
	in := "In " + shortGiB(vramMiB<<20)
	switch {
	case q4 == 0:
		return fmt.Sprintf("%s no common model fits at %d context.", in, contextLength(m))
	case q8 == 0:
		return fmt.Sprintf("%s fit models up to about %sB at Q4_K_M.", in, billions(q4))
	case q8 == q4:
		return fmt.Sprintf("%s fit models up to about %sB, at Q4_K_M or Q8_0.", in, billions(q4))
	}
	return fmt.Sprintf("%s fit models up to about %sB at Q4_K_M or %sB at Q8_0.", in, billions(q4), billions(q8))
}

// describe says what Estimate was told of a model: "70B at Q4_K_M, 8192 context".
func describe(m ModelSpec) string {
	var parts []string
	switch {
	case m.Parameters > 0 && m.Quantization != "":
		parts = append(parts, billions(m.Parameters)+"B at "+m.Quantization)
	case m.Parameters > 0:
		parts = append(parts, billions(m.Parameters)+"B")
	case m.Quantization != "":
		parts = append(parts, m.Quantization)
	}
	if m.SizeBytes > 0 {
		parts = append(parts, gib(m.SizeBytes)+" of weights")
	}
	context := strconv.Itoa(contextLength(m)) + " context"
	if m.Parallel > 1 {
		context = fmt.Sprintf("%d slots of %s", m.Parallel, context)
	}
	return strings.Join(append(parts, context), ", ")
}

// gib formats bytes in GiB with one decimal: "43.1 GiB".
func gib(b int64) string {
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// shortGiB formats bytes in GiB with at most one decimal: "24 GiB", "23.5 GiB".
func shortGiB(b int64) string {
	return strconv.FormatFloat(math.Round(float64(b)/(1<<30)*10)/10, 'f', -1, 64) + " GiB"
}

// billions formats a parameter count without trailing zeros: 70, 0.5, 7.62.
func billions(p float64) string {
	return strconv.FormatFloat(math.Round(p*100)/100, 'f', -1, 64)
}
