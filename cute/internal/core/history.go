package core

import (
	"math"

	"github.com/gonetcode/netcode/internal/history"
)

// History is the production TokenHistory: the module's one O(1)
// expiry-wheel history (internal/history, which netcode's server keys on
// a token's MAC), keyed here on the token's ID. It remembers every
// consumed token until its expiry and refuses when full. Like the Server
// that calls it, it is guarded by the Server's lock.
type History struct {
	t *history.Table[TokenID, struct{}]
}

// NewHistory returns a History of at most limit tokens, swept up to now
// (Unix seconds).
func NewHistory(limit int, now uint64) *History {
	// Cute tokens always expire: no expiry means "never" here.
	return &History{t: history.New[TokenID, struct{}](limit, now, math.MaxUint64)}
}

// Consumed reports whether id was consumed and has not expired at now.
func (h *History) Consumed(id *TokenID, now uint64) bool {
	e := h.t.Find(id)
	return e != nil && e.Expires() > now
}

// Consume records id as consumed until expires; false when full.
func (h *History) Consume(id *TokenID, expires, now uint64) bool {
	h.t.Expire(now)
	if e := h.t.Find(id); e != nil {
		return true // consumed already (the Server asks Consumed first)
	}
	return h.t.Add(id, expires, struct{}{}) != nil
}

// Len is the number of tokens remembered.
func (h *History) Len() int { return h.t.Len() }
