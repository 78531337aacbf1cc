package hw

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// paramCount matches a parameter count: "8b", "8.0B", "494.03M", "7.62 B", "1T", and a mixture
// of experts "8x7b".
var paramCount = regexp.MustCompile(`(?i)^(?:(\d+)x)?(\d+(?:\.\d+)?) ?([mbt])$`)

// ParseParameters reads a model's parameter count, in billions, from Ollama's parameter_size
// ("8.0B", "70.6B", "494.03M") or from a model name ("llama3.1:8b", "qwen2.5-72b-instruct",
// "Llama-3.1-8B-Instruct"): the first part of the name, between ':', '-', '_', '/' or spaces,
// that is a count. A mixture of experts "8x7b" counts 8 × 7 = 56: an upper bound, since the
// experts share their attention layers (Mixtral 8x7B has 46.7B), so a weights file size, when
// known, is better. It is false when there is no count.
func ParseParameters(s string) (float64, bool) {
	if b, ok := parseCount(strings.TrimSpace(s)); ok {
		return b, true
	}
	parts := strings.FieldsFunc(s, func(r rune) bool {
		return r == ':' || r == '-' || r == '_' || r == '/' || r == ' ' || r == '\t'
	})
	for _, part := range parts {
		if b, ok := parseCount(part); ok {
			return b, true
		}
	}
	return 0, false
}

// parseCount reads one count, in billions.
func parseCount(s string) (float64, bool) {
	m := paramCount.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0, false
	}
	if m[1] != "" {
		experts, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		n *= experts
	}
	switch strings.ToLower(m[3]) {
	case "m":
		n /= 1000
	case "t":
		n *= 1000
	}
	if n <= 0 || n > 1e6 || math.IsInf(n, 0) {
		return 0, false
	}
	return n, true
}
