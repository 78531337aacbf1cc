package hw

import (
	"math"
	"strings"
)

// weightBits is the bits per weight of a whole model file at each quantization. The GGUF
// K-quants mix types (the embeddings and output stay larger), so their numbers are llama.cpp's
// measured Llama-3.1-8B files (tools/quantize/README.md), not the block sizes; Q4_0 is its
// block size, 4.5. MXFP4 (gpt-oss) is 4 bits and a shared 8-bit scale per 32. vLLM's 4-bit
// formats (int4, AWQ, GPTQ) count 4.5: group scales, and layers left at 16 bits.
var weightBits = map[string]float64{
	"Q4_0":   4.5,
	"Q4_K_S": 4.67,
	"Q4_K_M": 4.89,
	"Q5_K_S": 5.57,
	"Q5_K_M": 5.70,
	"Q6_K":   6.56,
	"Q8_0":   8.5,
	"MXFP4":  4.25,
	"F16":    16,
	"BF16":   16,
	"F32":    32,

	"FP16":     16,
	"FLOAT16":  16,
	"HALF":     16,
	"BFLOAT16": 16,
	"FP8":      8,
	"INT8":     8,
	"INT4":     4.5,
	"AWQ":      4.5,
	"GPTQ":     4.5,
}

// bitsPerWeight returns the bits per weight of a quantization, named in any case; unknown (or
// empty) is 16 bits and false.
func bitsPerWeight(quantization string) (float64, bool) {
	if b, ok := weightBits[strings.ToUpper(strings.TrimSpace(quantization))]; ok {
		return b, true
	}
	return 16, false
}

// kvCacheBits returns the bits a KV cache of the type stores a value in: q8_0 and q4_0 are
// llama.cpp blocks of 32 values with a 16-bit scale. Empty is f16; unknown is 16 bits and false.
func kvCacheBits(cacheType string) (float64, bool) {
	switch strings.ToLower(strings.TrimSpace(cacheType)) {
	case "", "f16", "fp16", "bf16", "auto":
		return 16, true
	case "f32":
		return 32, true
	case "q8_0":
		return 8.5, true
	case "q4_0":
		return 4.5, true
	case "fp8", "fp8_e4m3", "fp8_e5m2":
		return 8, true
	}
	return 16, false
}

// typical is the shape of a common model in each size class, for models whose shape is not
// known, from the models' config.json. Each class covers sizes up to upTo billion parameters;
// the last covers everything larger. Older or unusual models can need more KV cache than their
// class says: Llama-2-13B has no grouped-query attention (40 KV heads, 800 KiB a token at f16),
// Gemma-2-9B has a head dimension of 256. Mixtures of experts count all their parameters for
// the weights, but attend like the smaller model they are built on, so their class overstates
// their KV cache.
var typical = []struct {
	upTo  float64
	model string
	arch  Arch
}{
	{0.8, "Qwen2.5-0.5B", Arch{Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, Vocab: 151936}},
	{2, "Llama-3.2-1B", Arch{Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256}},
	{5, "Llama-3.2-3B", Arch{Layers: 28, Heads: 24, KVHeads: 8, HeadDim: 128, Vocab: 128256}},
	{10, "Llama-3.1-8B", Arch{Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256}},
	{20, "Qwen2.5-14B", Arch{Layers: 48, Heads: 40, KVHeads: 8, HeadDim: 128, Vocab: 152064}},
	{45, "Qwen2.5-32B", Arch{Layers: 64, Heads: 40, KVHeads: 8, HeadDim: 128, Vocab: 152064}},
	{150, "Llama-3.1-70B", Arch{Layers: 80, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256}},
	{math.Inf(1), "Llama-3.1-405B", Arch{Layers: 126, Heads: 128, KVHeads: 8, HeadDim: 128, Vocab: 128256}},
}

// typicalArch returns the shape of a typical model with that many billion parameters.
func typicalArch(params float64) Arch {
	for _, t := range typical {
		if params <= t.upTo {
			return t.arch
		}
	}
	return typical[len(typical)-1].arch // NaN compares false with every class
}
