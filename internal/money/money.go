// Package money holds amounts of money as integer nano-dollars and prices as nano-dollars per
// million tokens, with exact conversions to and from USD decimals at the edges. It imports only
// the standard library.
package money

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Nanos is an amount of money in nano-dollars: 1e-9 USD.
type Nanos int64

// USD is one dollar.
const USD Nanos = 1_000_000_000

// ParseUSD reads a decimal amount of dollars, such as "12", "0.5" or "0.000000001", exactly.
// It refuses more than 9 decimal places, exponents and amounts beyond ±9 billion dollars.
func ParseUSD(s string) (Nanos, error) {
	in := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "$")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || len(frac) > 9 || strings.ContainsAny(whole+frac, "+-eE_ ") {
		return 0, fmt.Errorf("%q is not an amount of USD with at most 9 decimals", in)
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > 9_000_000_000 {
		return 0, fmt.Errorf("%q is not an amount of USD between -9e9 and 9e9", in)
	}
	var f uint64
	if frac != "" {
		f, err = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an amount of USD", in)
		}
	}
	n := Nanos(w)*USD + Nanos(f)
	if neg {
		n = -n
	}
	return n, nil
}

// String formats n as dollars with the decimals it needs: "12.5", "0.000000123", "-3".
func (n Nanos) String() string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	whole, frac := u/uint64(USD), u%uint64(USD)
	if frac == 0 {
		return sign + strconv.FormatUint(whole, 10)
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	return sign + strconv.FormatUint(whole, 10) + "." + f
}

// Float returns n in dollars as a float64, for JSON fields such as usage.cost. Never compute
// with it.
func (n Nanos) Float() float64 { return float64(n) / float64(USD) }

// Price is an ask or a price cap: nano-dollars per million tokens. "$0.15 per 1M tokens" is
// Price(150_000_000).
type Price int64

// MaxPrice bounds prices: $1,000,000 per million tokens.
const MaxPrice = Price(1_000_000) * Price(USD)

// ParsePrice reads a price in USD per million tokens, such as "0.15".
func ParsePrice(s string) (Price, error) {
	n, err := ParseUSD(s)
	if err != nil {
		return 0, err
	}
	if n < 0 || Price(n) > MaxPrice {
		return 0, fmt.Errorf("price %s USD per 1M tokens is out of range", s)
	}
	return Price(n), nil
}

// String formats p as USD per million tokens.
func (p Price) String() string { return Nanos(p).String() }

// ErrOverflow is an amount too large to hold.
var ErrOverflow = errors.New("money: amount overflows")

// Cost is what tokens cost at price p, rounded half up to a nano-dollar.
func (p Price) Cost(tokens int) Nanos {
	if tokens <= 0 || p <= 0 {
		return 0
	}
	return Nanos(mulDivRound(uint64(tokens), uint64(p), 1_000_000))
}

// Fee is a share of an amount in basis points (1/100 of a percent), rounded half up.
func Fee(amount Nanos, basisPoints int) Nanos {
	if amount <= 0 || basisPoints <= 0 {
		return 0
	}
	return Nanos(mulDivRound(uint64(amount), uint64(basisPoints), 10_000))
}

// mulDivRound is a×b/d rounded half up, computed in 128 bits. Callers bound their inputs far
// below overflow (tokens and prices are validated); overflow is a bug, so it panics.
func mulDivRound(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	lo, carry := bits.Add64(lo, d/2, 0)
	hi += carry
	if hi >= d {
		panic(ErrOverflow)
	}
	q, _ := bits.Div64(hi, lo, d)
	if q > 1<<63-1 {
		panic(ErrOverflow)
	}
	return q
}
