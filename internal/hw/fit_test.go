package hw

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// gibBytes converts GiB to bytes.
func gibBytes(g float64) int64 { return int64(g * (1 << 30)) }

// llama31_8B_Q4_K_M is Llama-3.1-8B-Instruct at Q4_K_M: 4.58 GiB on disk (llama.cpp's
// quantize README, in testdata).
func llama31_8B_Q4_K_M(contextLength int) ModelSpec {
	return ModelSpec{Name: "llama3.1:8b", Parameters: 8.03, Quantization: "Q4_K_M",
		SizeBytes: gibBytes(4.58), ContextLength: contextLength}
}

func TestEstimate_Llama31_8B(t *testing.T) {
	got := Estimate(llama31_8B_Q4_K_M(8192))
	want := Need{
		Weights:  gibBytes(4.58),
		KVCache:  1 << 30, // 32 layers × 8 KV heads × 128 × 2 (K and V) × 2 bytes = 128 KiB a token
		Graph:    128256*512*4 + 8192*512*32*4,
		Overhead: 512 << 20,
	}
	want.Total = want.Weights + want.KVCache + want.Graph + want.Overhead
	if got.Weights != want.Weights || got.KVCache != want.KVCache || got.Graph != want.Graph ||
		got.Overhead != want.Overhead || got.Total != want.Total || got.Assumed != nil {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	fa := llama31_8B_Q4_K_M(8192)
	fa.FlashAttention = true
	if got := Estimate(fa).Graph; got != 128256*512*4 {
		t.Errorf("with flash attention: graph %d, want only the logits, %d", got, 128256*512*4)
	}
	q8 := llama31_8B_Q4_K_M(8192)
	q8.KVCacheType = "q8_0"
	if got, want := Estimate(q8).KVCache, int64(1<<30*8.5/16); got != want {
		t.Errorf("q8_0 KV cache: got %d, want %d", got, want)
	}
}

// The VRAM-fit table. The rule of thumb "7B in 8–12 GB, 13B from 16 GB" comes out of the
// estimate: a 7B model fits 8 GiB at 4-bit and 12 GiB at 8-bit; a 13B model needs 16 GiB at 6
// or 8 bits, or with Llama 2's KV cache (no grouped-query attention, 800 KiB a token) at 8k
// context. Today's 13–14B models attend with 8 KV heads and fit 12 GiB at 4-bit.
func TestCheck_VRAMFitTable(t *testing.T) {
	llama2_13B := &Arch{Layers: 40, Heads: 40, KVHeads: 40, HeadDim: 128, Vocab: 32000}
	parallel := llama31_8B_Q4_K_M(8192)
	parallel.Parallel = 4
	tests := []struct {
		name      string
		model     ModelSpec
		fits      []float64 // GiB
		doesNotIn []float64
	}{
		{"Llama-3.1-8B Q4_K_M, 8k", llama31_8B_Q4_K_M(8192), []float64{8, 12}, []float64{6}},
		{"Llama-3.1-8B Q4_K_M, 4k", llama31_8B_Q4_K_M(4096), []float64{8}, []float64{6}},
		{"Llama-3.1-8B Q4_K_M, 4 slots of 8k", parallel, []float64{12}, []float64{8}},
		{"Llama-3.1-8B F16, 8k", ModelSpec{Parameters: 8.03, Quantization: "F16", SizeBytes: gibBytes(14.96), ContextLength: 8192},
			[]float64{24}, []float64{16}},
		{"7B Q4_K_M, 8k", ModelSpec{Parameters: 7, Quantization: "Q4_K_M", ContextLength: 8192}, []float64{8}, []float64{6}},
		{"7B Q8_0, 8k", ModelSpec{Parameters: 7, Quantization: "q8_0", ContextLength: 8192}, []float64{12}, []float64{8}},
		{"13B Q4_K_M, 8k", ModelSpec{Parameters: 13, Quantization: "Q4_K_M", ContextLength: 8192}, []float64{12}, []float64{8}},
		{"13B Q6_K, 8k", ModelSpec{Parameters: 13, Quantization: "Q6_K", ContextLength: 8192}, []float64{16}, []float64{12}},
		{"13B Q8_0, 4k", ModelSpec{Parameters: 13, Quantization: "Q8_0", ContextLength: 4096}, []float64{16}, []float64{12}},
		{"Llama-2-13B Q4_K_M, 4k", ModelSpec{Parameters: 13, Quantization: "Q4_K_M", ContextLength: 4096, Arch: llama2_13B},
			[]float64{12}, []float64{8}},
		{"Llama-2-13B Q4_K_M, 8k", ModelSpec{Parameters: 13, Quantization: "Q4_K_M", ContextLength: 8192, Arch: llama2_13B},
			[]float64{16}, []float64{12}},
		{"32B Q4_K_M, 8k", ModelSpec{Parameters: 32, Quantization: "Q4_K_M", ContextLength: 8192}, []float64{24}, []float64{16}},
		{"70B Q4_K_M, 8k", ModelSpec{Parameters: 70, Quantization: "Q4_K_M", ContextLength: 8192}, []float64{48}, []float64{24, 40}},
		{"70B fp8, 8k", ModelSpec{Parameters: 70, Quantization: "fp8", ContextLength: 8192}, []float64{80}, []float64{48}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total := float64(Estimate(tt.model).Total) / (1 << 30)
			for _, g := range tt.fits {
				if err := Check(tt.model, int64(g*1024)); err != nil {
					t.Errorf("needs %.2f GiB: want it to fit %g GiB, got %v", total, g, err)
				}
			}
			for _, g := range tt.doesNotIn {
				if err := Check(tt.model, int64(g*1024)); err == nil {
					t.Errorf("needs %.2f GiB: want it not to fit %g GiB", total, g)
				}
			}
		})
	}
}

// gguf-parser's estimate for DeepSeek-R1-Distill-Qwen-7B at Q4_K_M over its full 131072
// context, without flash attention (in testdata). Given the model's shape, the estimate is
// within 5% of gguf-parser's.
func TestEstimate_GGUFParser(t *testing.T) {
	text := string(readTestdata(t, "gguf_parser_estimate_DeepSeekR1Distill7B_Q4_K_M.txt"))
	meta := tableRow(t, text, "QUANTIZATION")    // TYPE, NAME, ARCH, QUANTIZATION, ..., SIZE, PARAMETERS, BPW
	arch := tableRow(t, text, "MAX CONTEXT LEN") // MAX CONTEXT LEN, EMBEDDING LEN, ..., HEAD CNT, LAYERS, ..., VOCABULARY LEN
	estimate := lastTableRow(t, text)            // ..., VRAM 0: LAYERS, UMA, NONUMA

	params, ok := ParseParameters(meta[6])
	if !ok {
		t.Fatalf("parameters %q", meta[6])
	}
	heads, layers, vocab, embedding := atoi(t, arch[3]), atoi(t, arch[4]), atoi(t, arch[7]), atoi(t, arch[1])
	m := ModelSpec{
		Name:          meta[1],
		Parameters:    params,
		Quantization:  meta[3],
		SizeBytes:     gibBytes(number(t, meta[5])),
		ContextLength: atoi(t, arch[0]),
		// Qwen2-7B has 4 KV heads (num_key_value_heads in its config.json); the table does not
		// show them.
		Arch: &Arch{Layers: layers, Heads: heads, KVHeads: 4, HeadDim: embedding / heads, Vocab: vocab},
	}
	want := number(t, estimate[len(estimate)-1])
	got := float64(Estimate(m).Total) / (1 << 30)
	t.Logf("gguf-parser %.2f GiB, Estimate %.2f GiB", want, got)
	if math.Abs(got-want)/want > 0.05 {
		t.Errorf("Estimate %.2f GiB, gguf-parser %.2f GiB: more than 5%% apart", got, want)
	}
}

// llama.cpp's measured bits per weight of Llama-3.1-8B's quantizations (in testdata) are the
// table's, to 0.01.
func TestBitsPerWeight_Recorded(t *testing.T) {
	text := string(readTestdata(t, "llamacpp_quantize_bpw_llama31_8b.md"))
	n := 0
	for line := range strings.Lines(text) {
		cells := cellsOf(line)
		if len(cells) < 2 {
			continue
		}
		measured, ok := parseNumber(cells[1])
		if !ok {
			continue
		}
		n++
		got, known := bitsPerWeight(cells[0])
		if !known || math.Abs(got-measured) > 0.01 {
			t.Errorf("%s: got %v (known %v), llama.cpp measured %v", cells[0], got, known, measured)
		}
	}
	if n != 7 {
		t.Errorf("read %d quantizations, want 7", n)
	}
}

func TestBitsPerWeight(t *testing.T) {
	tests := []struct {
		quant     string
		want      float64
		wantKnown bool
	}{
		{"q4_k_m", 4.89, true},
		{" Q4_0 ", 4.5, true},
		{"bf16", 16, true},
		{"F32", 32, true},
		{"fp8", 8, true},
		{"AWQ", 4.5, true},
		{"gptq", 4.5, true},
		{"int4", 4.5, true},
		{"MXFP4", 4.25, true},
		{"IQ3_XXS", 16, false},
		{"", 16, false},
	}
	for _, tt := range tests {
		got, known := bitsPerWeight(tt.quant)
		if got != tt.want || known != tt.wantKnown {
			t.Errorf("bitsPerWeight(%q) = %v, %v; want %v, %v", tt.quant, got, known, tt.want, tt.wantKnown)
		}
	}
}

func TestCheck_Message(t *testing.T) {
	tests := []struct {
		name    string
		model   ModelSpec
		vramMiB int64
		want    string
	}{
		{
			name:    "too large",
			model:   ModelSpec{Name: "llama3.1:70b", Parameters: 70, Quantization: "Q4_K_M", ContextLength: 8192},
			vramMiB: 24 << 10,
			want: "llama3.1:70b (70B at Q4_K_M, 8192 context) needs about 44.1 GiB of GPU memory; " +
				"this node has 24.0 GiB. In 24 GiB fit models up to about 32B at Q4_K_M or 14B at Q8_0.",
		},
		{
			name:    "unknown quantization, slots and a file size",
			model:   ModelSpec{Name: "m", Parameters: 7, Quantization: "IQ3_XXS", SizeBytes: gibBytes(2.9), ContextLength: 32768, Parallel: 2},
			vramMiB: 6 << 10,
			want: "m (7B at IQ3_XXS, 2.9 GiB of weights, 2 slots of 32768 context) needs about 15.6 GiB of GPU memory; " +
				"this node has 6.0 GiB. In 6 GiB fit models up to about 0.5B, at Q4_K_M or Q8_0. " +
				`Assumed 16-bit weights (quantization "IQ3_XXS" is not known).`,
		},
		{
			name:    "nothing fits",
			model:   ModelSpec{Parameters: 1, Quantization: "F16", ContextLength: 131072},
			vramMiB: 4 << 10,
			want: "the model (1B at F16, 131072 context) needs about 14.6 GiB of GPU memory; " +
				"this node has 4.0 GiB. In 4 GiB no common model fits at 131072 context.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.model, tt.vramMiB)
			var fit *FitError
			if !errors.As(err, &fit) {
				t.Fatalf("got %v, want a *FitError", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if fit.VRAMMiB != tt.vramMiB || fit.Need.Total <= tt.vramMiB<<20 {
				t.Errorf("FitError %+v: want the node's %d MiB and a larger need", fit, tt.vramMiB)
			}
		})
	}
}

func TestCheck_CannotTell(t *testing.T) {
	tests := []struct {
		name    string
		model   ModelSpec
		vramMiB int64
	}{
		{"node memory unknown", ModelSpec{Parameters: 405, Quantization: "F16"}, 0},
		{"model size unknown", ModelSpec{Name: "mystery", Quantization: "Q4_K_M"}, 1024},
		{"absurd node memory", ModelSpec{Parameters: 405}, math.MaxInt64},
	}
	for _, tt := range tests {
		if err := Check(tt.model, tt.vramMiB); err != nil {
			t.Errorf("%s: got %v, want nil", tt.name, err)
		}
	}
}

func TestEstimate_Unknown(t *testing.T) {
	if got := Estimate(ModelSpec{Name: "mystery"}); got.Total != 0 {
		t.Errorf("without parameters or size: got %+v, want zero", got)
	}
	// From the file size alone: a 4.58 GiB Q4_K_M file is an 8B model, with 8B's KV cache.
	got := Estimate(ModelSpec{Quantization: "Q4_K_M", SizeBytes: gibBytes(4.58), ContextLength: 8192})
	if got.KVCache != 1<<30 {
		t.Errorf("KV cache from the file size: got %d, want 1 GiB", got.KVCache)
	}
	// Absurd shapes clamp rather than wrap around.
	huge := Estimate(ModelSpec{Parameters: 1, ContextLength: math.MaxInt, Parallel: math.MaxInt,
		Arch: &Arch{Layers: math.MaxInt, Heads: math.MaxInt, KVHeads: math.MaxInt, HeadDim: math.MaxInt, Vocab: math.MaxInt}})
	if huge.Total != math.MaxInt64 || huge.KVCache != math.MaxInt64 {
		t.Errorf("absurd shape: got %+v, want totals clamped to MaxInt64", huge)
	}
	neg := Estimate(ModelSpec{Parameters: 8, ContextLength: -5, Parallel: -2, Arch: &Arch{Layers: -1}})
	if neg.KVCache != 0 || neg.Total <= 0 {
		t.Errorf("negative shape: got %+v, want no KV cache and a positive total", neg)
	}
}

func TestMaxParameters(t *testing.T) {
	tests := []struct {
		vramGiB int64
		quant   string
		want    float64
	}{
		{4, "Q4_K_M", 3},
		{8, "Q4_K_M", 8},
		{12, "Q4_K_M", 14},
		{24, "Q4_K_M", 32},
		{24, "Q8_0", 14},
		{48, "Q4_K_M", 72},
		{1, "Q4_K_M", 0},
	}
	for _, tt := range tests {
		got := MaxParameters(tt.vramGiB<<10, ModelSpec{Quantization: tt.quant, ContextLength: 8192})
		if got != tt.want {
			t.Errorf("%d GiB at %s, 8k: got %vB, want %vB", tt.vramGiB, tt.quant, got, tt.want)
		}
	}
}

// tableRow returns the cells of the data row of gguf-parser's table whose header has the
// column: two lines below it.
func tableRow(t *testing.T, text, column string) []string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.Contains(line, column) && i+2 < len(lines) {
			return cellsOf(lines[i+2])
		}
	}
	t.Fatalf("no table with column %q", column)
	return nil
}

// lastTableRow returns the cells of the text's last table row.
func lastTableRow(t *testing.T, text string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return cellsOf(lines[len(lines)-1])
}

// cellsOf returns the trimmed cells of a "| a | b |" row.
func cellsOf(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	cells := strings.Split(strings.Trim(line, "|"), "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}

func number(t *testing.T, s string) float64 {
	t.Helper()
	f, ok := parseNumber(s)
	if !ok {
		t.Fatalf("not a number: %q", s)
	}
	return f
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	return int(number(t, s))
}
