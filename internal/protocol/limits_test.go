package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidRegion(t *testing.T) {
	tests := []struct {
		region string
		want   bool
	}{
		{"", true},
		{"de", true},
		{"eu", true},
		{"eu-west", true},
		{"us-east-1", true},
		{strings.Repeat("a", MaxRegionBytes), true},
		{strings.Repeat("a", MaxRegionBytes+1), false},
		{"DE", false}, // the coordinator lower-cases it first
		{"eu west", false},
		{"eu_west", false},
		{"-eu", false},
		{"eu-", false},
		{"eu--west", false},
		{"1eu", false},
		{"dé", false},
		{"de\n", false},
		{`de"}`, false},
	}
	for _, tt := range tests {
		if got := ValidRegion(tt.region); got != tt.want {
			t.Errorf("ValidRegion(%q) = %v, want %v", tt.region, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer string", 10, "a longe…"},
		{"東京東京", 8, "東…"}, // never half a character
		{"abc", 2, ""},
	}
	for _, tt := range tests {
		got := Clip(tt.s, tt.n)
		if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
