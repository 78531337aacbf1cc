package tier

import (
	"testing"

	"github.com/shareai/shareai/internal/money"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Tier{"": Silver, "auto": Silver, "default": Silver, "priority": Gold, "flex": Bronze, "GOLD": Gold, "bronze": Bronze} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := Parse("scale"); err == nil {
		t.Error(`Parse("scale") succeeded`)
	}
	if Gold.OpenAI() != "priority" || Bronze.OpenAI() != "flex" || Silver.OpenAI() != "default" {
		t.Error("OpenAI names")
	}
	if !(Gold.Rank() < Silver.Rank() && Silver.Rank() < Bronze.Rank()) {
		t.Error("gold must go before silver, silver before bronze")
	}
}

func TestMultipliers(t *testing.T) {
	m, err := ParseMultipliers("gold=2, bronze=0.3333")
	if err != nil {
		t.Fatal(err)
	}
	if m.Of(Gold) != 20000 || m.Of(Bronze) != 3333 || m.Of(Silver) != 10000 {
		t.Fatalf("parsed %v", m)
	}
	if got := m.Price(money.Price(150_000_000), Gold); got != 300_000_000 {
		t.Errorf("gold price %d", got)
	}
	// Exact integer arithmetic, even where p*bp would overflow int64.
	big := money.Price(9_000_000_000_000_000)
	if got := m.Price(big, Bronze); got != 2_999_700_000_000_000 {
		t.Errorf("bronze of a large price %d", got)
	}
	if got := DefaultMultipliers.Price(7, Bronze); got != 3 {
		t.Errorf("rounds down: %d", got)
	}
	back, err := ParseMultipliers(m.String())
	if err != nil || back != m {
		t.Errorf("round trip %q: %v %v", m.String(), back, err)
	}
	for _, bad := range []string{"gold", "gold=0", "gold=-1", "gold=1.00001", "platinum=2", "auto=2", "gold=101", "gold=1e3"} {
		if _, err := ParseMultipliers(bad); err == nil {
			t.Errorf("ParseMultipliers(%q) succeeded", bad)
		}
	}
}
