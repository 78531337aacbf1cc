package simulate

import _ "embed"

// The built-in market: what `shareai simulate` runs without a fleet or demand file, and the
// market a provider's node joins for a forecast.
var (
	//go:embed market/fleet.yaml
	defaultFleet []byte
	//go:embed market/demand.yaml
	defaultDemand []byte
)

// DefaultFleet returns the built-in market's fleet.
func DefaultFleet() *Fleet {
	var f Fleet
	if err := parseYAML("the built-in fleet", defaultFleet, &f); err != nil {
		panic(err) // tested
	}
	return &f
}

// DefaultDemand returns the built-in market's demand.
func DefaultDemand() *Demand {
	var d Demand
	if err := parseYAML("the built-in demand", defaultDemand, &d); err != nil {
		panic(err) // tested
	}
	return &d
}
