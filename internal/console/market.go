package console

import (
	"net/http"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// marketModel is one row of /models: a model served now, as GET /v1/models describes it.
type marketModel struct {
	ID            string
	Nodes         int
	ContextLength int
	Simulated     bool
	// The range of the nodes' asks per 1M tokens.
	MinInput, MaxInput, MinOutput, MaxOutput money.Price
	Regions                                  []string // "" when a node did not say, left out
	TTFTMillis                               int64    // median time to first token; 0 unmeasured
	TokensPerSecond                          int64    // median throughput; 0 unmeasured
}

// marketPage is /models's data.
type marketPage struct {
	Models []marketModel
}

// models serves GET /models, the marketplace: every model served now, with its nodes, prices,
// regions and speed. Any logged-in user may see it.
func (c *Console) models(w http.ResponseWriter, r *http.Request) {
	var p marketPage
	if c.cfg.Fleet != nil {
		for _, mi := range c.cfg.Fleet.Models() {
			m := marketModel{ID: mi.ID, Nodes: mi.Nodes, ContextLength: mi.ContextLength, Simulated: mi.Simulated,
				MinInput: money.Price(mi.MinInput), MaxInput: money.Price(mi.MaxInput),
				MinOutput: money.Price(mi.MinOutput), MaxOutput: money.Price(mi.MaxOutput),
				TTFTMillis: mi.TTFT.Round(time.Millisecond).Milliseconds(), TokensPerSecond: int64(mi.TokensPerSecond + 0.5)}
			for _, reg := range mi.Regions {
				if reg != "" {
					m.Regions = append(m.Regions, reg)
				}
			}
			p.Models = append(p.Models, m)
		}
	}
	c.render(w, r, http.StatusOK, "models", p)
}
