package sim

import (
	"slices"
	"strings"
	"testing"
)

func TestRun_MaxTokensAndStop(t *testing.T) {
	e := New(Config{})
	base := user("Limit me.", 5)
	full, _ := stream(t, e, base)
	if len(full) < 30 {
		t.Fatalf("answer of %d tokens, want 30 or more", len(full))
	}
	join := func(d []string) string { return strings.Join(d, "") }
	across := full[10][len(full[10])-2:] + full[11][:3] // ends token 10, starts token 11
	tests := []struct {
		name      string
		prefix    *int // continue after this many tokens
		maxTokens int
		stop      []string
		want      []string
		finish    string
	}{
		{name: "max tokens", maxTokens: 5, want: full[:5], finish: "length"},
		{name: "max tokens is the length", maxTokens: len(full), want: full, finish: "stop"},
		{name: "max tokens above the length", maxTokens: len(full) + 1, want: full, finish: "stop"},
		{name: "stop at a token", stop: []string{full[7]}, want: full[:7], finish: "stop"},
		{name: "stop inside a token", stop: []string{full[7][2:]}, want: append(slices.Clone(full[:7]), full[7][:2]), finish: "stop"},
		{name: "stop across tokens", stop: []string{across}, want: append(slices.Clone(full[:10]), full[10][:len(full[10])-2]), finish: "stop"},
		{name: "first of several stops", stop: []string{"never there", full[12], full[9]}, want: full[:9], finish: "stop"},
		{name: "stop at the start", stop: []string{full[0]}, want: nil, finish: "stop"},
		{name: "stop not found", stop: []string{"never there", ""}, want: full, finish: "stop"},
		{name: "stop after max tokens", maxTokens: 4, stop: []string{full[9]}, want: full[:4], finish: "length"},
		{name: "stop before max tokens", maxTokens: 9, stop: []string{full[3]}, want: full[:3], finish: "stop"},
		{name: "stop right after max tokens", maxTokens: 3, stop: []string{full[3]}, want: full[:3], finish: "stop"},
		{name: "continued max tokens", prefix: ptr(6), maxTokens: 5, want: full[6:11], finish: "length"},
		{name: "stop in the prefix only", prefix: ptr(6), stop: []string{join(full[2:4])}, want: full[6:], finish: "stop"},
		{name: "stop across the prefix", prefix: ptr(6), stop: []string{full[5] + full[6]}, want: full[6:], finish: "stop"},
		{name: "continued stop", prefix: ptr(6), stop: []string{full[8]}, want: full[6:8], finish: "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := *base
			if tt.prefix != nil {
				req = *withPrefix(t, base, join(full[:*tt.prefix]))
			}
			req.MaxTokens, req.Stop = tt.maxTokens, tt.stop
			got, res := stream(t, e, &req)
			if !slices.Equal(got, tt.want) {
				t.Errorf("deltas =\n%q\nwant\n%q", got, tt.want)
			}
			if res.FinishReason != tt.finish || res.Usage.CompletionTokens != len(tt.want) {
				t.Errorf("finish %q with %d completion tokens, want %q with %d", res.FinishReason, res.Usage.CompletionTokens, tt.finish, len(tt.want))
			}
			for _, s := range tt.stop {
				if s != "" && strings.Contains(join(got), s) {
					t.Errorf("output contains stop string %q", s)
				}
			}
		})
	}
}

func TestRun_StopInsideCharacter(t *testing.T) {
	e := New(Config{})
	for seed := range int64(50) {
		req := user("Multibyte.", seed)
		answer := e.Answer(req)
		i := strings.Index(answer, "東京")
		if i < 0 {
			continue
		}
		req.Stop = []string{"\x9d\xb1"} // the last two bytes of 東
		got, _ := stream(t, e, req)
		if want := answer[:i]; strings.Join(got, "") != want {
			t.Errorf("stream = %q, want %q", strings.Join(got, ""), want)
		}
		return
	}
	t.Fatal("no answer has 東京")
}

func ptr[T any](v T) *T { return &v }
