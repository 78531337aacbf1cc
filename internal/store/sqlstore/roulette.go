package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// SetFeedback records a rating of a request, replacing an earlier one (whose created_at stays).
func (db *DB) SetFeedback(ctx context.Context, f *store.Feedback) error {
	if f.Score < 0 || f.Score > 1 {
		return fmt.Errorf("feedback on %s: score %v is not in [0, 1]", f.RequestID, f.Score)
	}
	_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO feedback (request_id, account_id, score, comment, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (request_id) DO UPDATE SET score = excluded.score, comment = excluded.comment, updated_at = excluded.updated_at`),
		f.RequestID, f.AccountID, f.Score, f.Comment, millis(f.CreatedAt), millis(f.UpdatedAt))
	if err != nil {
		return fmt.Errorf("feedback on %s: %w", f.RequestID, dbError(err))
	}
	return nil
}

// armKey names a split's arm.
type armKey struct{ split, model string }

// SplitArms compares the arms of the splits an account's requests were drawn under since a
// time: the counts and sums in one grouped query, then the latencies of each arm's
// store.ArmSample most recent whole answers, ranked in Go (exactly, by nearest rank) on both
// databases.
func (db *DB) SplitArms(ctx context.Context, accountID string, since time.Time) ([]store.SplitArm, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT u.split, u.model, COUNT(*),
	CAST(COALESCE(SUM(CASE WHEN u.outcome IN ('error', 'rejected') THEN 1 ELSE 0 END), 0) AS BIGINT),
	CAST(COALESCE(SUM(u.prompt_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(u.completion_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(u.cost), 0) AS BIGINT),
	COUNT(f.request_id),
	COALESCE(SUM(f.score), 0)
FROM usage u LEFT JOIN feedback f ON f.request_id = u.request_id
WHERE u.account_id = ? AND u.split <> '' AND u.created_at >= ?
GROUP BY u.split, u.model
ORDER BY u.split, u.model`), accountID, millis(since))
	if err != nil {
		return nil, fmt.Errorf("split arms of %s: %w", accountID, err)
	}
	defer rows.Close()
	var arms []store.SplitArm
	at := map[armKey]int{}
	for rows.Next() {
		var (
			a    store.SplitArm
			cost int64
		)
		if err := rows.Scan(&a.Split, &a.Model, &a.Requests, &a.Errors, &a.PromptTokens, &a.CompletionTokens, &cost, &a.Feedback, &a.ScoreSum); err != nil {
			return nil, fmt.Errorf("split arms of %s: %w", accountID, err)
		}
		a.Cost = money.Nanos(cost)
		at[armKey{a.Split, a.Model}] = len(arms)
		arms = append(arms, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("split arms of %s: %w", accountID, err)
	}
	if len(arms) == 0 {
		return nil, nil
	}
	if err := db.armLatencies(ctx, accountID, since, arms, at); err != nil {
		return nil, fmt.Errorf("split arms of %s: latencies: %w", accountID, err)
	}
	return arms, nil
}

// armLatencies fills the arms' percentiles from their most recent whole answers.
func (db *DB) armLatencies(ctx context.Context, accountID string, since time.Time, arms []store.SplitArm, at map[armKey]int) error {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT split, model, duration_us, ttft_us, stream FROM (
	SELECT split, model, duration_us, ttft_us, stream,
		ROW_NUMBER() OVER (PARTITION BY split, model ORDER BY created_at DESC, request_id DESC) AS n
	FROM usage
	WHERE account_id = ? AND split <> '' AND created_at >= ? AND outcome = 'ok'
) recent WHERE n <= ?`), accountID, millis(since), store.ArmSample)
	if err != nil {
		return err
	}
	defer rows.Close()
	latency := make([][]time.Duration, len(arms))
	ttft := make([][]time.Duration, len(arms))
	for rows.Next() {
		var (
			k          armKey
			dur, first int64
			stream     bool
		)
		if err := rows.Scan(&k.split, &k.model, &dur, &first, &stream); err != nil {
			return err
		}
		i, ok := at[k]
		if !ok {
			continue // a request recorded between the two queries
		}
		latency[i] = append(latency[i], fromMicros(dur))
		if stream && first > 0 {
			ttft[i] = append(ttft[i], fromMicros(first))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range arms {
		arms[i].Latency, arms[i].Sampled = percentiles(latency[i]), len(latency[i])
		arms[i].TTFT, arms[i].TTFTSampled = percentiles(ttft[i]), len(ttft[i])
	}
	return nil
}

// percentiles are the median and 95th percentile of ds by nearest rank (the smallest value
// with at least p% of the sample at or below it); zero for none.
func percentiles(ds []time.Duration) store.Percentiles {
	if len(ds) == 0 {
		return store.Percentiles{}
	}
	slices.Sort(ds)
	rank := func(p int) time.Duration { return ds[(p*len(ds)+99)/100-1] }
	return store.Percentiles{P50: rank(50), P95: rank(95)}
}
