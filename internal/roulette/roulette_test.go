package roulette

import (
	"fmt"
	"testing"

	"github.com/shareai/shareai/internal/api"
)

func mustSplit(t *testing.T, js, model string) api.Split {
	t.Helper()
	s, err := api.ParseSplit([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s.With(model)
}

// The rotation gives each arm its share exactly, spread: in every prefix of the draws, each
// arm is within one request of its share.
func TestRoulette_SharesAreExact(t *testing.T) {
	for _, tt := range []struct {
		split, model string
		n            int
		want         map[string]int
	}{
		{`{"b":0.1}`, "a", 1000, map[string]int{"a": 900, "b": 100}},
		{`{"b":0.25,"c":0.25}`, "a", 400, map[string]int{"a": 200, "b": 100, "c": 100}},
		{`{"a":0.1,"b":0.2,"c":0.7}`, "a", 1000, map[string]int{"a": 100, "b": 200, "c": 700}},
		{`{"b":0.333333333}`, "a", 3000, map[string]int{"a": 2000, "b": 1000}},
	} {
		t.Run(tt.split, func(t *testing.T) {
			s := mustSplit(t, tt.split, tt.model)
			var rl Rotations
			got := map[string]int{}
			for i := 1; i <= tt.n; i++ {
				got[rl.Draw("acct\x00"+s.String(), s)]++
				for _, a := range s {
					share := float64(i) * float64(a.Share) / api.ShareUnit
					if d := float64(got[a.Model]) - share; d > 1 || d < -1 {
						t.Fatalf("after %d draws, %s has %d; want %.1f within 1", i, a.Model, got[a.Model], share)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("after %d draws: %v; want %v", tt.n, got, tt.want)
			}
		})
	}
}

// Each account's rotation of a split is its own.
func TestRoulette_RotationsPerKey(t *testing.T) {
	s := mustSplit(t, `{"b":0.5}`, "a")
	var rl Rotations
	first := rl.Draw("one", s)
	if other := rl.Draw("two", s); other != first {
		t.Errorf("a second account's first draw %s; want %s, as the first account's: its own rotation", other, first)
	}
	if again := rl.Draw("one", s); again == first {
		t.Errorf("the first account's second draw is %s again; want the other arm", again)
	}
}

// A session keeps its arm; sessions spread over the arms by their shares.
func TestRoulette_SessionSticks(t *testing.T) {
	s := mustSplit(t, `{"b":0.5}`, "a")
	got := map[string]int{}
	for i := range 1000 {
		session := fmt.Sprintf("acct\x00chat-%d\x00%s", i, s)
		arm := Sticky(session, s)
		for range 5 {
			if again := Sticky(session, s); again != arm {
				t.Fatalf("session %d moved from %s to %s", i, arm, again)
			}
		}
		got[arm]++
	}
	if got["a"] < 400 || got["b"] < 400 {
		t.Errorf("1000 sessions over a 50/50 split: %v", got)
	}
}
