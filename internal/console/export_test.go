package console

import "github.com/shareai/shareai/internal/money"

// USD is an amount as the English pages write it (locale.usd), for the black-box tests that
// look for an amount in a page.
func USD(n money.Nanos) string {
	cat, err := LoadCatalog()
	if err != nil {
		panic(err)
	}
	return cat.locale("en").usd(int64(n))
}

// MoneyCase is a row of the money rule's table, for the browser test that holds
// static/money.js to it.
type MoneyCase struct {
	Name, Decimal string // Decimal: the amount as the API writes it ("0.000000368")
	Sig           int
	EN, FA        string
}

// MoneyCases is moneyTests, the money rule's table.
func MoneyCases() []MoneyCase {
	var out []MoneyCase
	for _, tt := range moneyTests {
		out = append(out, MoneyCase{Name: tt.name, Decimal: money.Nanos(tt.nanos).String(), Sig: tt.sig, EN: tt.en, FA: tt.fa})
	}
	return out
}
