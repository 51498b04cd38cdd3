package server

import (
	"net/netip"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/history"
	"github.com/gonetcode/netcode/token"
)

// HistoryPerSlot is how many connect tokens the history holds per client
// slot (with a floor of MinHistory): a slot can take a new token every
// expiry window / HistoryPerSlot (about once a second with 30 s tokens)
// before the history is full and refuses new tokens.
const HistoryPerSlot = 32

// MinHistory is the smallest history, for servers with few slots.
const MinHistory = 4096

// historySize is the number of tokens a server with maxClients slots
// remembers.
func historySize(maxClients int) int { return max(maxClients*HistoryPerSlot, MinHistory) }

// tokenHistory remembers every connect token the server accepted a
// connection request for, until the token expires, keyed on the token's
// MAC: the shared O(1) history of internal/history.
type tokenHistory = history.Table[[crypto.MACBytes]byte, tokenUse]

// tokenUse is what the history keeps of a token: the address it was first
// used from and whether a connection was made with it.
type tokenUse struct {
	addr     netip.AddrPort
	consumed bool // a connection was made with this token
	counted  bool // a reuse of it was counted (Stats.TokenReuseRefused)
	// loggedHere and loggedElsewhere: a reuse of it from its own address,
	// and from another, was logged.
	loggedHere, loggedElsewhere bool
}

func newTokenHistory(limit int, now uint64) *tokenHistory {
	return history.New[[crypto.MACBytes]byte, tokenUse](limit, now, token.NeverExpireTimestamp)
}
