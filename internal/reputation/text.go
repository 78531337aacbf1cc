package reputation

import (
	"fmt"
	"math"
	"strconv"
)

// pct writes a value 0..1 as a whole percentage, rounded down so that 100% means all of it.
func pct(v float64) string {
	return fmt.Sprintf("%d%%", int(math.Floor(v*100+1e-9)))
}

// pct1 writes a share 0..1 as a percentage with one decimal, rounded down: 98.4%.
func pct1(v float64) string {
	return strconv.FormatFloat(math.Floor(v*1000+1e-9)/10, 'f', 1, 64) + "%"
}

// count writes n with thousands separators: 1,204.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// plural writes "1 check" or "3 checks".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return count(n) + " " + many
}
