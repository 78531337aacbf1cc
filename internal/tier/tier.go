// Package tier names the service tiers a request runs at and prices them.
//
// Gold (OpenAI's service_tier "priority") goes first in every queue and may preempt bronze;
// silver ("default", "auto") is on-demand; bronze ("flex") is interruptible and cheapest: a
// bronze answer preempted by gold pauses and continues exactly once a slot frees.
package tier

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/money"
)

// Tier is a request's service tier. The zero value is Silver.
type Tier uint8

const (
	Silver Tier = iota
	Gold
	Bronze
	count
)

// All lists the tiers, first served first.
var All = [count]Tier{Gold, Silver, Bronze}

var (
	names  = [count]string{Silver: "silver", Gold: "gold", Bronze: "bronze"}
	openai = [count]string{Silver: "default", Gold: "priority", Bronze: "flex"}
)

// Parse reads a tier by OpenAI's service_tier name ("priority", "default", "auto", "flex")
// or ShareAI's ("gold", "silver", "bronze"). "" is Silver.
func Parse(s string) (Tier, error) {
	switch strings.ToLower(s) {
	case "", "default", "auto", "silver":
		return Silver, nil
	case "priority", "gold":
		return Gold, nil
	case "flex", "bronze":
		return Bronze, nil
	}
	return Silver, fmt.Errorf("unknown service tier %q: want priority (gold), default or auto (silver), or flex (bronze)", s)
}

// String is ShareAI's name: gold, silver or bronze.
func (t Tier) String() string {
	if t < count {
		return names[t]
	}
	return "tier(" + strconv.Itoa(int(t)) + ")"
}

// OpenAI is the service_tier an OpenAI response names: priority, default or flex.
func (t Tier) OpenAI() string {
	if t < count {
		return openai[t]
	}
	return openai[Silver]
}

// Rank orders tiers in a queue: lower goes first.
func (t Tier) Rank() int {
	switch t {
	case Gold:
		return 0
	case Bronze:
		return 2
	}
	return 1
}

// Slots is how many of a node's slots (all of them, gold of them kept for gold) jobs of tier t
// may fill: all for gold, all but the gold ones for silver, and for bronze the same, or none
// when the node refuses bronze.
func Slots(all, gold int, noBronze bool, t Tier) int {
	switch {
	case t == Gold:
		return all
	case t == Bronze && noBronze:
		return 0
	}
	return max(all-gold, 0)
}

// Multipliers are the operator's price multipliers of the tiers on a provider's ask, in basis
// points (15000 is ×1.5). Buyers pay, and providers earn, the ask times their tier's
// multiplier; the platform's fee comes on top as for any price.
type Multipliers [count]int64

// DefaultMultipliers: gold ×1.5, silver ×1, bronze ×0.5.
var DefaultMultipliers = Multipliers{Gold: 15000, Silver: 10000, Bronze: 5000}

// Of returns a tier's multiplier in basis points; 10000 for one not set.
func (m Multipliers) Of(t Tier) int64 {
	if t < count && m[t] > 0 {
		return m[t]
	}
	return 10000
}

// Price is an ask per million tokens at tier t, rounded down to the nano-dollar.
func (m Multipliers) Price(p money.Price, t Tier) money.Price { return Scale(p, m.Of(t)) }

// Scale is p times bp basis points, rounded down, without overflow for any price within
// money.MaxPrice and a multiplier within 100.
func Scale(p money.Price, bp int64) money.Price {
	if bp == 10000 {
		return p
	}
	return money.Price(int64(p)/10000*bp + int64(p)%10000*bp/10000)
}

// Factor is a tier's multiplier as a number, for display.
func (m Multipliers) Factor(t Tier) float64 { return float64(m.Of(t)) / 10000 }

// ParseMultipliers reads "gold=1.5,silver=1,bronze=0.5" (any subset; the others keep their
// defaults). A multiplier is at most 100 with at most four decimals.
func ParseMultipliers(s string) (Multipliers, error) {
	m := DefaultMultipliers
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return m, fmt.Errorf("tier multiplier %q: want tier=factor, as gold=1.5", part)
		}
		t, err := Parse(name)
		if err != nil || strings.EqualFold(name, "auto") || strings.EqualFold(name, "default") || name == "" {
			return m, fmt.Errorf("tier multiplier %q: the tier is gold, silver or bronze", part)
		}
		bp, err := basisPoints(val)
		if err != nil {
			return m, fmt.Errorf("tier multiplier %q: %v", part, err)
		}
		m[t] = bp
	}
	return m, nil
}

// basisPoints reads a decimal factor such as "1.5" exactly: 15000.
// ParseFactor reads a price multiplier written as a factor ("0.5", at most four decimals,
// above 0 and at most 100) as basis points.
func ParseFactor(s string) (int64, error) { return basisPoints(s) }

func basisPoints(s string) (int64, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" || len(frac) > 4 || strings.ContainsAny(whole+frac, "+-") {
		return 0, fmt.Errorf("want a factor such as 1.5, with at most four decimals")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a factor such as 1.5")
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 4-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("want a factor such as 1.5")
		}
	}
	bp := w*10000 + f
	if bp <= 0 || bp > 100*10000 {
		return 0, fmt.Errorf("a factor is above 0 and at most 100")
	}
	return bp, nil
}

// String writes the multipliers as ParseMultipliers reads them.
func (m Multipliers) String() string {
	var b strings.Builder
	for i, t := range All {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", t, strconv.FormatFloat(m.Factor(t), 'f', -1, 64))
	}
	return b.String()
}
