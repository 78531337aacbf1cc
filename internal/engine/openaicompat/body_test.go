package openaicompat

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/shareai/shareai/internal/api"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\n\r\t\x00\x1f\x7f", `"\n\r\t\u0000\u001f` + "\x7f" + `"`},
		{"<b>&amp;</b>", `"<b>&amp;</b>"`},
		{"été ✓ 我", `"été ✓ 我"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"bad \xff\xfe end", `"bad \ufffd\ufffd end"`},
		{"cut \xe6\x88", `"cut \ufffd\ufffd"`},
	}
	for _, tt := range tests {
		if got := string(api.AppendString(nil, tt.in)); got != tt.want {
			t.Errorf("api.AppendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzAppendString checks that appendString means what encoding/json means.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\x00\u2028é\xff", "<>&", "\xe6\x88"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := api.AppendString(nil, s)
		std, _ := json.Marshal(s)
		var a, b string
		if err := json.Unmarshal(ours, &a); err != nil {
			t.Fatalf("api.AppendString(%q) = %s: %v", s, ours, err)
		}
		if err := json.Unmarshal(std, &b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("api.AppendString(%q) decodes to %q, encoding/json's to %q", s, a, b)
		}
	})
}

func TestAppendFloatField(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{0.7, "0.7"},
		{1, "1"},
		{-2.5, "-2.5"},
		{1e-7, "1e-07"},
		{1e21, "1e+21"},
		{123456789, "123456789"},
	}
	for _, tt := range tests {
		got, err := appendFloatField(nil, `,"t":`, tt.f)
		if err != nil || string(got) != `,"t":`+tt.want {
			t.Errorf("appendFloatField(%v) = %s, %v, want ,\"t\":%s", tt.f, got, err, tt.want)
		}
		var back float64
		if err := json.Unmarshal(got[5:], &back); err != nil || back != tt.f {
			t.Errorf("%s decodes to %v, %v, want %v", got[5:], back, err, tt.f)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := appendFloatField(nil, `,"temperature":`, f); err == nil {
			t.Errorf("appendFloatField(%v): no error", f)
		}
	}
}
