package money

import "testing"

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in   string
		want Nanos
		ok   bool
	}{
		{"12", 12 * USD, true},
		{"0.5", USD / 2, true},
		{".25", USD / 4, true},
		{"0.000000001", 1, true},
		{"$3.10", 3*USD + USD/10, true},
		{"-2.5", -(2*USD + USD/2), true},
		{"0.0000000001", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"10000000000", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseUSD(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok {
			if back, _ := ParseUSD(got.String()); back != got {
				t.Errorf("round trip %q → %q → %d", tt.in, got.String(), back)
			}
		}
	}
}

func TestString(t *testing.T) {
	for n, want := range map[Nanos]string{0: "0", USD: "1", 1: "0.000000001", -USD / 2: "-0.5", 1234 * USD / 1000: "1.234"} {
		if got := n.String(); got != want {
			t.Errorf("Nanos(%d).String() = %q, want %q", int64(n), got, want)
		}
	}
}

func TestCost(t *testing.T) {
	tests := []struct {
		price  Price
		tokens int
		want   Nanos
	}{
		{Price(150_000_000), 1_000_000, 150_000_000}, // $0.15/M × 1M = $0.15
		{Price(150_000_000), 1, 150},                 // 150 nano-dollars a token
		{Price(1), 499_999, 0},                       // rounds half up
		{Price(1), 500_000, 1},
		{Price(3), 1_000_000, 3},
		{0, 100, 0},
		{MaxPrice, 1 << 30, Nanos(int64(1<<30) * int64(USD))},
	}
	for _, tt := range tests {
		if got := tt.price.Cost(tt.tokens); got != tt.want {
			t.Errorf("Price(%d).Cost(%d) = %d, want %d", tt.price, tt.tokens, got, tt.want)
		}
	}
}

func TestFee(t *testing.T) {
	tests := []struct {
		amount Nanos
		bp     int
		want   Nanos
	}{
		{1000, 500, 50}, // 5%
		{1, 500, 0},     // 0.05 rounds down
		{10, 500, 1},    // 0.5 rounds up
		{USD, 1000, USD / 10},
		{USD, 0, 0},
	}
	for _, tt := range tests {
		if got := Fee(tt.amount, tt.bp); got != tt.want {
			t.Errorf("Fee(%d, %d) = %d, want %d", tt.amount, tt.bp, got, tt.want)
		}
	}
}

func FuzzParseUSD(f *testing.F) {
	f.Add("1.5")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseUSD(s)
		if err != nil {
			return
		}
		if back, err := ParseUSD(n.String()); err != nil || back != n {
			t.Fatalf("%q → %d → %q → %d, %v", s, n, n.String(), back, err)
		}
	})
}
