// Package roulette is the model roulette's arithmetic: the draw of a split's arm for each
// request (a smooth weighted round-robin per account and split, a session's arm by a hash),
// and the comparison of the arms' records. The core draws (internal/core/roulette.go); the
// buyer API and the console compare.
//
// It imports the API's split and the store's records, nothing with I/O.
package roulette

import (
	"hash/fnv"
	"sync"

	"github.com/shareai/shareai/internal/api"
)

// maxRotations bounds the rotations remembered; when full, they all start again from zero.
const maxRotations = 100_000

// Rotations are the splits' rotations, by key (an account's split, in its written form): the
// smooth weighted round-robin of nginx, which over n draws gives each arm its share of n within
// one draw, in an order that spreads them, and deterministically. The zero value is ready.
type Rotations struct {
	mu sync.Mutex
	m  map[string][]int64 // each arm's current weight
}

// Draw turns the rotation of key, a split's, and returns the arm it lands on. A key's split
// must always be the same (its written form is the key's part that names it).
func (rs *Rotations) Draw(key string, s api.Split) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	cur, ok := rs.m[key]
	if !ok || len(cur) != len(s) {
		if rs.m == nil || len(rs.m) >= maxRotations {
			rs.m = make(map[string][]int64)
		}
		cur = make([]int64, len(s))
		rs.m[key] = cur
	}
	var total int64
	best := 0
	for i, a := range s {
		cur[i] += a.Share
		total += a.Share
		if cur[i] > cur[best] {
			best = i
		}
	}
	cur[best] -= total
	return s[best].Model
}

// Sticky is the arm of a session: the arm whose share holds the point that a hash of the
// session falls on. The same session always gets the same arm of a split, on any replica.
func Sticky(session string, s api.Split) string {
	var total int64
	for _, a := range s {
		total += a.Share
	}
	h := fnv.New64a()
	h.Write([]byte(session))
	x := int64(h.Sum64() % uint64(total))
	for _, a := range s {
		if x < a.Share {
			return a.Model
		}
		x -= a.Share
	}
	return s[len(s)-1].Model
}
