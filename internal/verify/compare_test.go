package verify

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine/sim"
)

const answer = "The capital of Australia is Canberra, not Sydney. When the colonies federated in 1901, " +
	"Sydney and Melbourne both wanted to be the capital, so a compromise was reached: a new city would be " +
	"built between them. Canberra was chosen in 1908 and Parliament first met there in 1927."

func TestAgree(t *testing.T) {
	words := strings.Fields(answer)
	firstWords := func(n int) string { return strings.Join(words[:n], " ") }
	for _, tt := range []struct {
		name      string
		got, want string
		agree     bool
		sim       float64 // checked when not NaN
	}{
		{"identical", answer, answer, true, 1},
		{"both empty", "", "", true, 1},
		{"both blank", " \n", "\t", true, 1},
		{"empty and an answer", "", answer, false, 0},
		{"whitespace", strings.Join(words, "  \n"), answer + "\n", true, 1},
		{"no-break spaces", strings.Join(words, "\u00a0"), answer, true, 1},
		{"decomposed accents", "Le caf\u0065\u0301 est fermé, señor.", "Le café est ferm\u0065\u0301, sen\u0303or.", true, 1},
		{"fullwidth forms", "ＡＢＣ 123 costs ＄5.", "ABC １２３ costs $5.", true, 1},
		{"typographic quotes", "It\u2019s \u201cfine\u201d.", `It's "fine".`, true, 1},
		{"detokenised spacing", "Hello , world ! It ' s me .", "Hello, world! It's me.", true, 1},
		{"case", strings.ToUpper(answer), answer, true, 1},
		{"cut at 16 words", firstWords(16), answer, true, 1},
		{"cut mid-word", answer[:strings.Index(answer, "compromise")+4], answer, true, math.NaN()},
		{"cut at 3 words: too little to tell", firstWords(3), answer, false, math.NaN()},
		{"a cheater's one word", "The", answer, false, math.NaN()},
		{"short and the same", "Canberra.", "Canberra.", true, 1},
		{"short and different", "Canberra.", "Sydney.", false, 0},
		{"parts late", firstWords(30) + " and the rest is another story entirely, told by somebody else with other words.", answer, true, math.NaN()},
		{"parts early", firstWords(5) + " a city in the south east, home to about four hundred thousand people and to the national institutions of the country.", answer, false, math.NaN()},
		{"another model", "Canberra is Australia's capital. It was purpose-built as a compromise between Sydney and Melbourne, " +
			"the two largest cities, which were rivals. The site was selected in 1908.", answer, false, math.NaN()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agree, s := Agree(tt.got, tt.want)
			if agree != tt.agree || (!math.IsNaN(tt.sim) && math.Abs(s-tt.sim) > 1e-9) {
				t.Errorf("Agree = %v, %.3f; want %v, %.3f", agree, s, tt.agree, tt.sim)
			}
			if agree2, s2 := Agree(tt.want, tt.got); agree2 != agree || s2 != s {
				t.Errorf("Agree(want, got) = %v, %.3f; want what Agree(got, want) gives, %v, %.3f", agree2, s2, agree, s)
			}
		})
	}
}

func TestAgreeExact(t *testing.T) {
	if !AgreeExact(answer, answer) || AgreeExact(answer, answer+" ") || AgreeExact(answer[:10], answer) {
		t.Error("AgreeExact is not byte equality")
	}
}

// simAnswers returns, for every probe and sim model, the honest answer and the answers of sim
// nodes with other salts (cheaters).
func simAnswers(t *testing.T, salts ...string) (honest []string, salted [][]string) {
	t.Helper()
	h := sim.New(sim.Config{})
	cheats := make([]*sim.Engine, len(salts))
	for i, s := range salts {
		cheats[i] = sim.New(sim.Config{Salt: s})
	}
	for _, m := range sim.DefaultModels {
		for i := range NumProbes {
			req := Probe(i, m.Name)
			honest = append(honest, run(t, h, req))
			var s []string
			for _, c := range cheats {
				s = append(s, run(t, c, req))
			}
			salted = append(salted, s)
		}
	}
	return honest, salted
}

// TestAgree_SaltedSim: a sim node with another salt, which plays a node serving another
// model under the same name, clearly disagrees on every probe.
func TestAgree_SaltedSim(t *testing.T) {
	honest, salted := simAnswers(t, "cheat", "other-model", "x", "quantized?")
	var worst, sum float64
	n := 0
	for i, want := range honest {
		for _, got := range salted[i] {
			agree, s := Agree(got, want)
			if agree || s > 0.25 {
				t.Errorf("answer %d: a salted sim's answer has similarity %.3f; want it well below %.2f\n got %q\nwant %q", i, s, AgreeThreshold, got, want)
			}
			worst = max(worst, s)
			sum += s
			n++
		}
	}
	t.Logf("honest vs salted sim, %d pairs (%d probes × %d models × 4 salts): max similarity %.3f, mean %.4f",
		n, NumProbes, len(sim.DefaultModels), worst, sum/float64(n))
}

// TestAgree_Truncated: an honest answer agrees with itself cut at any length of at least
// minEvidence/2 units, at a word boundary (a node that stopped earlier) or inside a word (a
// token that ends inside one).
func TestAgree_Truncated(t *testing.T) {
	honest, _ := simAnswers(t)
	r := rand.New(rand.NewPCG(1, 2))
	lowest, lowestShort, lowestLong := 1.0, 1.0, 1.0
	cuts := 0
	for i, want := range honest {
		for range 50 {
			cut := want[:randomBoundary(r, want)]
			agree, s := Agree(cut, want)
			if n := len(units(cut)); n*2 >= minEvidence+2 { // an extra unit for a cut inside a word
				lowest = min(lowest, s)
				if n > minEvidence {
					lowestLong = min(lowestLong, s)
				}
				if !agree {
					t.Errorf("answer %d cut to %d units: similarity %.3f; want agreement\n cut %q\nwant %q", i, n, s, cut, want)
				}
			} else {
				lowestShort = min(lowestShort, s)
			}
			cuts++
		}
	}
	t.Logf("honest sim answers vs themselves cut at %d random points: min similarity %.3f for cuts of more than %d units, %.3f for 9 or more, %.3f below",
		cuts, lowestLong, minEvidence, lowest, lowestShort)
}

// randomBoundary returns a random rune boundary of s, after at least one byte.
func randomBoundary(r *rand.Rand, s string) int {
	i := 1 + r.IntN(len(s))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// TestAgree_Parting: an honest answer that parts from the reference after some of its words
// (a near tie decided the other way) and goes on like another model's agrees when it kept
// well over half the answer, and disagrees when it kept well under half (as counted in words
// here, in units by Agree, so the test stays clear of the threshold).
func TestAgree_Parting(t *testing.T) {
	honest, salted := simAnswers(t, "parted")
	fracs := []float64{0.1, 0.3, 0.7, 0.9}
	lo, hi := make([]float64, len(fracs)), make([]float64, len(fracs))
	for j := range fracs {
		lo[j] = 1
	}
	for i, want := range honest {
		w := strings.Fields(want)
		other := strings.Fields(salted[i][0])
		for j, frac := range fracs {
			k := int(frac * float64(len(w)))
			got := strings.Join(append(w[:k:k], other[:min(len(w)-k, len(other))]...), " ")
			agree, s := Agree(got, want)
			lo[j], hi[j] = min(lo[j], s), max(hi[j], s)
			if frac > 0.5 && !agree || frac < 0.5 && agree {
				t.Errorf("answer %d parting after %.0f%% of its words: Agree = %v, %.3f", i, frac*100, agree, s)
			}
		}
	}
	for j, frac := range fracs {
		t.Logf("parting after %.0f%% of the words: similarity %.3f to %.3f", frac*100, lo[j], hi[j])
	}
}

func TestAgree_Properties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "the", " ", "  ", "\n", ",", ".", "é", "e\u0301", "東", "🙂", "\u2019", "'", "ﬁ", "\xff", "A", "-"}
	for range 5000 {
		a, b := randomText(r, alphabet), randomText(r, alphabet)
		checkProperties(t, a, b)
	}
}

func FuzzAgree(f *testing.F) {
	f.Add(answer, answer[:40])
	f.Add("", "x")
	f.Add("\xff\xfe", "e\u0301 東京 🙂")
	f.Add("a a a a a a a a a a a a a a a a a a", "a a a a")
	f.Fuzz(func(t *testing.T, a, b string) {
		checkProperties(t, a, b)
	})
}

// checkProperties checks what holds for any two strings: the similarity is in [0, 1], the same
// both ways, 1 for a string with itself, and Agree says whether it reaches the threshold.
func checkProperties(t *testing.T, a, b string) {
	t.Helper()
	agree, s := Agree(a, b)
	if s < 0 || s > 1 || math.IsNaN(s) {
		t.Fatalf("Agree(%q, %q): similarity %v, out of [0, 1]", a, b, s)
	}
	if agree != (s >= AgreeThreshold) {
		t.Fatalf("Agree(%q, %q) = %v, %v: agreement does not follow the threshold", a, b, agree, s)
	}
	if agree2, s2 := Agree(b, a); agree2 != agree || s2 != s {
		t.Fatalf("Agree(%q, %q) = %v, %v; but Agree the other way = %v, %v", a, b, agree, s, agree2, s2)
	}
	if agree, s := Agree(a, a); !agree || s != 1 {
		t.Fatalf("Agree(%q, itself) = %v, %v; want true, 1", a, agree, s)
	}
}

func randomText(r *rand.Rand, alphabet []string) string {
	var b strings.Builder
	for range r.IntN(40) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func BenchmarkAgree(b *testing.B) {
	long := strings.Repeat(answer+" ", 3)
	for b.Loop() {
		Agree(long, long[:len(long)/2])
	}
}
