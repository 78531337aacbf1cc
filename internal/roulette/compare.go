package roulette

import (
	"cmp"
	"slices"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Split is one split's arms compared.
type Split struct {
	Split    string // its written form
	Requests int    // of every arm
	Arms     []Arm
}

// Arm is one model of a split compared: its records summed (store.SplitArm), and its share.
type Arm struct {
	store.SplitArm
	// Share is the arm's share of the split, in api.ShareUnit parts: 0 for a model outside
	// the split, which served requests when the arm drawn had no node (a fallback).
	Share int64
}

// Compare groups an account's records of arms (store.SplitArms) by split: each split with
// every arm it names, those that served no request too, by share (most first), then the
// models that served in their stead; the splits with the most requests first.
func Compare(rows []store.SplitArm) []Split {
	var out []Split
	at := map[string]int{}
	for _, row := range rows {
		i, ok := at[row.Split]
		if !ok {
			i = len(out)
			at[row.Split] = i
			s := Split{Split: row.Split}
			arms, _ := api.SplitOf(row.Split) // a record's written form: a bad one compares no listed arm
			for _, a := range arms {
				s.Arms = append(s.Arms, Arm{SplitArm: store.SplitArm{Split: row.Split, Model: a.Model}, Share: a.Share})
			}
			out = append(out, s)
		}
		s := &out[i]
		s.Requests += row.Requests
		if j := slices.IndexFunc(s.Arms, func(a Arm) bool { return a.Model == row.Model }); j >= 0 {
			s.Arms[j].SplitArm = row
		} else {
			s.Arms = append(s.Arms, Arm{SplitArm: row})
		}
	}
	for i := range out {
		slices.SortStableFunc(out[i].Arms, func(a, b Arm) int { return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.Model, b.Model)) })
	}
	slices.SortStableFunc(out, func(a, b Split) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Split, b.Split))
	})
	return out
}

// Weight is the arm's share as a decimal fraction ("0.2").
func (a Arm) Weight() string { return api.Arm{Share: a.Share}.Weight() }

// ErrorRate is the fraction of the arm's requests that failed; 0 without requests.
func (a Arm) ErrorRate() float64 {
	if a.Requests == 0 {
		return 0
	}
	return float64(a.Errors) / float64(a.Requests)
}

// CostPer1K is what the arm's requests cost per thousand tokens billed (prompt and
// completion), rounded to the nano-dollar; false without tokens.
func (a Arm) CostPer1K() (money.Nanos, bool) {
	tokens := a.PromptTokens + a.CompletionTokens
	if tokens <= 0 {
		return 0, false
	}
	return money.Nanos((int64(a.Cost)*1000 + tokens/2) / tokens), true
}

// MeanScore is the mean of the buyer's ratings of the arm's requests; false without any.
func (a Arm) MeanScore() (float64, bool) {
	if a.Feedback == 0 {
		return 0, false
	}
	return a.ScoreSum / float64(a.Feedback), true
}
