package gateway

// RateLimitEntries is how many keys the rate limiter keeps (limits.go), for tests.
func (g *Gateway) RateLimitEntries() int { return g.limits.entries() }

// RateLimitInFlight is how many requests of a key the rate limiter counts in flight, for tests.
func (g *Gateway) RateLimitInFlight(keyID string) int {
	v, ok := g.limits.keys.Load(keyID)
	if !ok {
		return 0
	}
	u := v.(*keyUsage)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.inflight
}

// RateLimitReserved is how many tokens of a key the rate limiter holds reserved for requests
// not ended yet, for tests.
func (g *Gateway) RateLimitReserved(keyID string) int {
	v, ok := g.limits.keys.Load(keyID)
	if !ok {
		return 0
	}
	u := v.(*keyUsage)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reserved
}
