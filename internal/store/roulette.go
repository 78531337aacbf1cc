package store

import (
	"context"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Roulette is what the model roulette keeps beyond the usage records: buyers' ratings of
// their generations, and the comparison of each split's arms.
type Roulette interface {
	// SetFeedback records a rating of a request, replacing any earlier one of the request (its
	// CreatedAt then stays the first rating's).
	SetFeedback(ctx context.Context, f *Feedback) error
	// SplitArms compares the arms of every split an account's requests were drawn under since
	// a time (by the requests' start): one row per split and model that served, by split
	// then model. Percentiles are of each arm's ArmSample most recent requests.
	SplitArms(ctx context.Context, accountID string, since time.Time) ([]SplitArm, error)
}

// ArmSample bounds the requests of an arm whose latencies SplitArms ranks: the most recent
// ones that ended whole (and, for time to first token, were streamed). Its percentiles are
// exact over that sample.
const ArmSample = 1000

// Feedback is a buyer's rating of one of its generations.
type Feedback struct {
	RequestID string
	AccountID string
	Score     float64 // in [0, 1]
	Comment   string
	CreatedAt time.Time // of the first rating
	UpdatedAt time.Time // of this one
}

// SplitArm is one model's requests under one split: the model that served them (the arm
// drawn, or the default or a fallback that served in its stead), or for a request no node
// took, the arm drawn.
type SplitArm struct {
	Split string // the split's written form (api.Split's String)
	Model string
	// Requests counts the arm's requests; Errors those the network failed or the engine
	// refused (outcomes error and rejected), not those the buyer cancelled.
	Requests, Errors               int
	PromptTokens, CompletionTokens int64
	Cost                           money.Nanos
	// Latency is the percentiles of the whole answer's time of the sample's requests that
	// ended whole, Sampled how many; TTFT those of the time to first token of the streamed
	// ones, TTFTSampled how many (0: no percentiles).
	Latency, TTFT        Percentiles
	Sampled, TTFTSampled int
	// Feedback counts the arm's requests the buyer rated, ScoreSum their scores.
	Feedback int
	ScoreSum float64
}

// Percentiles are the median and the 95th percentile of durations, by nearest rank.
type Percentiles struct{ P50, P95 time.Duration }
