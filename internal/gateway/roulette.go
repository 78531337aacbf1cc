package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/roulette"
	"github.com/shareai/shareai/internal/store"
)

// The model roulette's endpoints (a request's split is drawn by the core: core/roulette.go):
//
//	POST /v1/feedback   rate one of the caller's generations: {"id", "score" 0..1, "comment"}
//	GET  /v1/splits     compare the arms of each split the caller's requests used (?days=N)
func (g *Gateway) registerRoulette(mux *http.ServeMux) {
	mux.Handle("POST /v1/feedback", g.handle(g.feedback))
	mux.Handle("GET /v1/splits", g.handle(g.splits))
}

// maxComment bounds a rating's comment, in characters.
const maxComment = 1000

// feedbackRequest is POST /v1/feedback's body.
type feedbackRequest struct {
	ID      string   `json:"id"` // the completion's id (chatcmpl-…, cmpl-…) or its request id (req_…)
	Score   *float64 `json:"score"`
	Comment string   `json:"comment"`
}

// Feedback is a rating as recorded.
type Feedback struct {
	ID        string  `json:"id"` // the completion's id
	RequestID string  `json:"request_id"`
	Model     string  `json:"model"` // the model that served it
	Split     *string `json:"split"` // the split it was drawn under; null for none
	Score     float64 `json:"score"`
	Comment   string  `json:"comment"`
	RatedAt   string  `json:"rated_at"` // RFC 3339, UTC
}

// feedback records the caller's rating of one of its generations; a second rating replaces the
// first. Another account's generation answers 404, as an unknown one.
func (g *Gateway) feedback(w http.ResponseWriter, r *http.Request, c *call) error {
	var body feedbackRequest
	if err := api.Decode(r.Body, &body); err != nil {
		return err
	}
	switch {
	case body.ID == "":
		return api.BadRequest("id", api.CodeInvalidValue, "Missing required parameter: 'id', the id of the completion to rate (chatcmpl-…, cmpl-…).")
	case body.Score == nil:
		return api.BadRequest("score", api.CodeInvalidValue, "Missing required parameter: 'score', a number from 0 (worst) to 1 (best).")
	case *body.Score < 0 || *body.Score > 1:
		return api.BadRequest("score", api.CodeInvalidValue, "Invalid 'score': expected a number between 0 and 1, but got %g instead.", *body.Score)
	case !utf8.ValidString(body.Comment):
		return api.BadRequest("comment", api.CodeInvalidValue, "Invalid 'comment': not valid UTF-8.")
	case utf8.RuneCountInString(body.Comment) > maxComment:
		return api.BadRequest("comment", api.CodeInvalidValue, "Invalid 'comment': at most %d characters, got %d.", maxComment, utf8.RuneCountInString(body.Comment))
	}
	u, err := g.usageOf(r, c, body.ID)
	if err != nil {
		return err
	}
	now := g.cfg.Now()
	f := &store.Feedback{RequestID: u.RequestID, AccountID: u.AccountID, Score: *body.Score, Comment: strings.TrimSpace(body.Comment),
		CreatedAt: now, UpdatedAt: now}
	if err := g.cfg.Store.SetFeedback(r.Context(), f); err != nil {
		return err
	}
	return writeJSON(w, data[Feedback]{Feedback{ID: completionID(u), RequestID: u.RequestID, Model: u.Model, Split: nullable(u.Split),
		Score: f.Score, Comment: f.Comment, RatedAt: now.UTC().Format(time.RFC3339Nano)}})
}

// SplitComparison is GET /v1/splits: the arms of each split the account's requests were drawn
// under, over the last days.
type SplitComparison struct {
	Since  string        `json:"since"` // the first day counted, YYYY-MM-DD (UTC)
	Days   int           `json:"days"`
	Sample int           `json:"sample"` // the most recent answers per arm whose latencies are ranked
	Splits []SplitReport `json:"splits"` // the splits with the most requests first
}

// SplitReport is one split's arms.
type SplitReport struct {
	Split    string      `json:"split"` // its written form: "model=weight,…"
	Requests int         `json:"requests"`
	Arms     []ArmReport `json:"arms"`
}

// ArmReport is one model of a split: an arm (weight > 0), or a model that served requests whose
// arm had no node (weight 0).
type ArmReport struct {
	Model            string      `json:"model"`
	Weight           json.Number `json:"weight"`
	Requests         int         `json:"requests"`
	Errors           int         `json:"errors"`
	ErrorRate        float64     `json:"error_rate"`
	PromptTokens     int64       `json:"prompt_tokens"`
	CompletionTokens int64       `json:"completion_tokens"`
	Cost             usd         `json:"cost"`
	CostPer1K        *usd        `json:"cost_per_1k_tokens"` // null without tokens
	LatencyMS        *Quantiles  `json:"latency_ms"`         // of whole answers; null for none
	TTFTMS           *Quantiles  `json:"ttft_ms"`            // of streamed whole answers; null for none
	FeedbackCount    int         `json:"feedback_count"`
	MeanScore        *float64    `json:"mean_score"` // null without feedback
}

// Quantiles are exact percentiles of a sample, in milliseconds.
type Quantiles struct {
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
	Sample int     `json:"sample"`
}

func (g *Gateway) splits(w http.ResponseWriter, r *http.Request, c *call) error {
	days, err := daysParam(r, 30)
	if err != nil {
		return err
	}
	since := store.WindowStart(store.Daily, g.cfg.Now()).AddDate(0, 0, -(days - 1))
	rows, err := g.cfg.Store.SplitArms(r.Context(), c.key.AccountID, since)
	if err != nil {
		return fmt.Errorf("compare splits: %w", err)
	}
	out := SplitComparison{Since: since.Format(time.DateOnly), Days: days, Sample: store.ArmSample, Splits: []SplitReport{}}
	for _, s := range roulette.Compare(rows) {
		rep := SplitReport{Split: s.Split, Requests: s.Requests, Arms: make([]ArmReport, 0, len(s.Arms))}
		for _, a := range s.Arms {
			rep.Arms = append(rep.Arms, armReport(a))
		}
		out.Splits = append(out.Splits, rep)
	}
	return writeJSON(w, data[SplitComparison]{out})
}

func armReport(a roulette.Arm) ArmReport {
	rep := ArmReport{Model: a.Model, Weight: json.Number(a.Weight()), Requests: a.Requests, Errors: a.Errors, ErrorRate: a.ErrorRate(),
		PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens, Cost: usd(a.Cost), FeedbackCount: a.Feedback,
		LatencyMS: quantiles(a.Latency, a.Sampled), TTFTMS: quantiles(a.TTFT, a.TTFTSampled)}
	if c, ok := a.CostPer1K(); ok {
		u := usd(c)
		rep.CostPer1K = &u
	}
	if m, ok := a.MeanScore(); ok {
		rep.MeanScore = &m
	}
	return rep
}

func quantiles(p store.Percentiles, n int) *Quantiles {
	if n == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &Quantiles{P50: ms(p.P50), P95: ms(p.P95), Sample: n}
}
