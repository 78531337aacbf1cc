package roulette

import (
	"testing"

	"github.com/shareai/shareai/internal/store"
)

// Each split lists every arm it names, those with no request too, then the fallbacks; the
// derived figures are exact.
func TestCompare(t *testing.T) {
	rows := []store.SplitArm{
		{Split: "a=0.8,b=0.2", Model: "a", Requests: 8, Errors: 2, PromptTokens: 600, CompletionTokens: 400, Cost: 1001, Feedback: 2, ScoreSum: 1.5},
		{Split: "a=0.8,b=0.2", Model: "z", Requests: 1},
		{Split: "c=1", Model: "c", Requests: 20},
	}
	got := Compare(rows)
	if len(got) != 2 || got[0].Split != "c=1" || got[1].Requests != 9 {
		t.Fatalf("splits %+v; want c=1 (20 requests) then a=0.8,b=0.2 (9)", got)
	}
	arms := got[1].Arms
	if len(arms) != 3 || arms[0].Model != "a" || arms[1].Model != "b" || arms[2].Model != "z" || arms[1].Requests != 0 || arms[2].Share != 0 {
		t.Fatalf("arms %+v; want a, b (no requests), then the fallback z", arms)
	}
	a := arms[0]
	if a.Weight() != "0.8" || a.ErrorRate() != 0.25 {
		t.Errorf("arm a: weight %s, error rate %v", a.Weight(), a.ErrorRate())
	}
	if c, ok := a.CostPer1K(); !ok || c != 1001 {
		t.Errorf("cost per 1k tokens %v %v; want 1001 nano-dollars (1001 for 1000 tokens)", c, ok)
	}
	if m, ok := a.MeanScore(); !ok || m != 0.75 {
		t.Errorf("mean score %v %v", m, ok)
	}
	if _, ok := arms[1].CostPer1K(); ok {
		t.Error("an arm without tokens has a cost per 1k tokens")
	}
	if _, ok := arms[1].MeanScore(); ok {
		t.Error("an arm without ratings has a mean score")
	}
}
