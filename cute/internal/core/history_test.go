package core

// mapHistory is a TokenHistory for tests: a map with the tokens' expiry,
// bounded. It is not the production history (see the Server's doc).
type mapHistory struct {
	m     map[TokenID]uint64
	limit int
}

func newMapHistory(limit int) *mapHistory {
	return &mapHistory{m: make(map[TokenID]uint64), limit: limit}
}

func (h *mapHistory) Consumed(id *TokenID, now uint64) bool {
	exp, ok := h.m[*id]
	return ok && exp > now
}

func (h *mapHistory) Consume(id *TokenID, expires, now uint64) bool {
	for k, e := range h.m {
		if e <= now {
			delete(h.m, k)
		}
	}
	if len(h.m) >= h.limit {
		return false
	}
	h.m[*id] = expires
	return true
}
