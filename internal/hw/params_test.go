package hw

import "testing"

func TestParseParameters(t *testing.T) {
	tests := []struct {
		in     string
		want   float64
		wantOK bool
	}{
		// Ollama's parameter_size.
		{"8.0B", 8, true},
		{"70.6B", 70.6, true},
		{"494.03M", 0.49403, true},
		{"7.62 B", 7.62, true}, // gguf-parser
		// Model names.
		{"llama3.1:8b", 8, true},
		{"qwen2.5-72b-instruct", 72, true},
		{"Llama-3.1-8B-Instruct", 8, true},
		{"qwen2.5:0.5b", 0.5, true},
		{"deepseek-r1:1.5b", 1.5, true},
		{"smollm:135m", 0.135, true},
		{"gemma3:27b-it-qat", 27, true},
		{"Qwen3-30B-A3B", 30, true},
		{"hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", 3, true},
		{"Meta-Llama-3.1-405B-Instruct-FP8", 405, true},
		{"Qwen2.5-7B-Instruct-1M", 7, true}, // the first count: the 1M is its context
		// Mixtures of experts: experts × size, an upper bound.
		{"mixtral:8x7b", 56, true},
		{"Mixtral-8x22B-Instruct-v0.1", 176, true},
		// No count.
		{"phi4-mini", 0, false},
		{"llama3.1", 0, false},
		{"", 0, false},
		{"0b", 0, false},
		{"B", 0, false},
		{"q4_K_M", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseParameters(tt.in)
		if ok != tt.wantOK || (ok && !near(got, tt.want)) {
			t.Errorf("ParseParameters(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// near reports whether a and b agree to a millionth.
func near(a, b float64) bool {
	d := a - b
	return d < 1e-6 && d > -1e-6
}
