package console

import (
	"math"
	"testing"
)

// moneyTests is the money rule's table: funcs.go's locale.money, and static/money.js, which
// the browser tests hold to the same rows.
var moneyTests = []struct {
	name   string
	nanos  int64
	sig    int // amountDigits or priceDigits
	en, fa string
}{
	{"zero", 0, amountDigits, "$0.00", "$۰٫۰۰"},
	{"one nano-dollar", 1, amountDigits, "$0.000000001", "$۰٫۰۰۰۰۰۰۰۰۱"},
	{"sub-cent, two significant digits", 368, amountDigits, "$0.00000037", "$۰٫۰۰۰۰۰۰۳۷"},
	{"sub-cent, half rounds away from zero", 1_250_000, amountDigits, "$0.0013", "$۰٫۰۰۱۳"},
	{"sub-cent, trailing zero trimmed", 5_000_000, amountDigits, "$0.005", "$۰٫۰۰۵"},
	{"just under a cent carries to it", 9_990_000, amountDigits, "$0.01", "$۰٫۰۱"},
	{"a cent", 10_000_000, amountDigits, "$0.01", "$۰٫۰۱"},
	{"cents below a dime keep two digits", 12_345_678, amountDigits, "$0.012", "$۰٫۰۱۲"},
	{"cents", 500_000_000, amountDigits, "$0.50", "$۰٫۵۰"},
	{"dollars round to the cent", 9_999_999_632, amountDigits, "$10.00", "$۱۰٫۰۰"},
	{"half a cent rounds up", 12_345_000_000, amountDigits, "$12.35", "$۱۲٫۳۵"},
	{"large, grouped", 1_234_567_890_000_000, amountDigits, "$1,234,567.89", "$۱٬۲۳۴٬۵۶۷٫۸۹"},
	{"negative", -1_250_000_000, amountDigits, "-$1.25", "-$۱٫۲۵"},
	{"negative sub-cent", -368, amountDigits, "-$0.00000037", "-$۰٫۰۰۰۰۰۰۳۷"},
	{"most negative", math.MinInt64, amountDigits, "-$9,223,372,036.85", "-$۹٬۲۲۳٬۳۷۲٬۰۳۶٫۸۵"},
	{"price in cents", 150_000_000, priceDigits, "$0.15", "$۰٫۱۵"},
	{"price below a dime", 75_000_000, priceDigits, "$0.075", "$۰٫۰۷۵"},
	{"price of four digits", 172_500_000, priceDigits, "$0.1725", "$۰٫۱۷۲۵"},
	{"price rounded to four digits", 123_456_789, priceDigits, "$0.1235", "$۰٫۱۲۳۵"},
	{"price in dollars", 12_345_000_000, priceDigits, "$12.35", "$۱۲٫۳۵"},
	{"price of zero", 0, priceDigits, "$0.00", "$۰٫۰۰"},
}

func TestMoney(t *testing.T) {
	c := uiConsole(t)
	for _, tt := range moneyTests {
		t.Run(tt.name, func(t *testing.T) {
			for lang, want := range map[string]string{"en": tt.en, "fa": tt.fa} {
				if got := c.i18n.locale(lang).money(tt.nanos, tt.sig); got != want {
					t.Errorf("%s money(%d, %d) = %q, want %q", lang, tt.nanos, tt.sig, got, want)
				}
			}
		})
	}
}

// No amount but zero reads as zero, whatever its size.
func TestMoney_NeverZero(t *testing.T) {
	l := uiConsole(t).i18n.locale("en")
	for n := int64(1); n < 1e12; n = n*3 + 1 {
		for _, v := range []int64{n, -n} {
			if got := l.usd(v); got == "$0.00" || got == "-$0.00" {
				t.Errorf("usd(%d) = %q", v, got)
			}
		}
	}
}
