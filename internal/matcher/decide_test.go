package matcher

// decide is one decision as the core makes it (core.match): the default auction's walk when
// the preferences keep its order, else the index's ranking.
func decide(ix *Index, req Request) (Candidate, error) {
	if Walkable(req.Prefs) && !req.Batch {
		return ix.Pick(req)
	}
	return ix.Take(req)
}
