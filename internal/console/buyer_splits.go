package console

import (
	"net/http"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/roulette"
	"github.com/shareai/shareai/internal/store"
)

// splitsPage is /buyer/splits's data: the arms of each model roulette the account's requests
// used over the last days, as GET /v1/splits compares them.
type splitsPage struct {
	Days   int
	Sample int // the most recent whole answers per arm whose latencies are ranked
	Splits []splitTable
}

// splitTable is one split's arms.
type splitTable struct {
	Split    string
	Requests int
	Arms     []armRow
}

// armRow is one arm as the table shows it: what templates cannot compute from roulette.Arm.
type armRow struct {
	Model            string
	Weight           string // "" for a model outside the split, which served in an arm's stead
	Requests, Errors int
	ErrorRate        float64
	Tokens           int64
	Cost, CostPer1K  money.Nanos
	HasCost          bool    // CostPer1K is known: the arm has tokens
	LatencyP50, P95  float64 // ms, of Sampled whole answers
	Sampled          int
	TTFTP50, TTFTP95 float64 // ms, of TTFTSampled streamed whole answers
	TTFTSampled      int
	Feedback         int
	MeanScore        float64
	HasScore         bool
}

func (c *Console) buyerSplits(w http.ResponseWriter, r *http.Request) error {
	acct := sessionOf(r).user.AccountID
	since := store.WindowStart(store.Daily, c.cfg.Now()).AddDate(0, 0, -(usageDays - 1))
	rows, err := c.cfg.Store.SplitArms(r.Context(), acct, since)
	if err != nil {
		return err
	}
	p := splitsPage{Days: usageDays, Sample: store.ArmSample}
	for _, s := range roulette.Compare(rows) {
		t := splitTable{Split: s.Split, Requests: s.Requests}
		for _, a := range s.Arms {
			row := armRow{Model: a.Model, Requests: a.Requests, Errors: a.Errors, ErrorRate: a.ErrorRate(),
				Tokens: a.PromptTokens + a.CompletionTokens, Cost: a.Cost, Feedback: a.Feedback,
				LatencyP50: ms(a.Latency.P50), P95: ms(a.Latency.P95), Sampled: a.Sampled,
				TTFTP50: ms(a.TTFT.P50), TTFTP95: ms(a.TTFT.P95), TTFTSampled: a.TTFTSampled}
			if a.Share > 0 {
				row.Weight = a.Weight()
			}
			row.CostPer1K, row.HasCost = a.CostPer1K()
			row.MeanScore, row.HasScore = a.MeanScore()
			t.Arms = append(t.Arms, row)
		}
		p.Splits = append(p.Splits, t)
	}
	c.render(w, r, http.StatusOK, "buyer_splits", p)
	return nil
}

// ms is a duration in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
