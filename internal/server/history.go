package server

import (
	"math"
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/history"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

// The token history's size: it remembers every token that connected until
// the token expires, so it must hold every token that can connect within
// one token lifetime. HistorySize gives it from the rate of new
// connections the deployment's token backend allows and the tokens'
// lifetime.
const (
	// TokenRatePerSlot is the default rate of new connections per client
	// slot (tokens per second), between MinTokenRate and MaxTokenRate: far
	// above a game's churn, where a player stays for minutes, so that
	// only a flood of handshakes that complete (each by a client holding
	// its token's keys) fills the history.
	TokenRatePerSlot = 2
	// MinTokenRate is the smallest default rate, for servers with few
	// slots.
	MinTokenRate = 512
	// MaxTokenRate is the largest default rate, for servers with many
	// slots: every slot's player replaced in 4 s at 65,536 slots.
	MaxTokenRate = 16384
	// DefaultTokenExpiry is the token lifetime the history is sized for
	// by default: the token package's default.
	DefaultTokenExpiry = tokenwire.DefaultExpireSeconds * time.Second
	// HistoryEntryBytes bounds the memory one remembered token takes: its
	// slab entry (72 bytes; up to twice that, as the slab grows by
	// doubling) and its index entry (a Swiss-table slot, about 50 bytes
	// at the table's load). Measured: 125 bytes per token at 2^20 tokens.
	HistoryEntryBytes = 200
	// MaxHistory is the largest history: 2^24 tokens.
	MaxHistory = 1 << 24
)

// HistorySize is the number of tokens the history of a server with
// maxClients slots remembers, for rate new connections per second
// (tokens; <= 0 means TokenRatePerSlot × maxClients, within MinTokenRate
// and MaxTokenRate) of tokens that live expiry (<= 0 means
// DefaultTokenExpiry; whole seconds, rounded up), at most MaxHistory. The
// history takes at most HistoryEntryBytes per token, and only as it
// fills: with the defaults, 15,360 tokens and 3 MB at 256 slots, 491,520
// tokens and 98 MB from 8,192 slots up.
func HistorySize(maxClients, rate int, expiry time.Duration) int {
	return int(min(HistoryWanted(maxClients, rate, expiry), MaxHistory))
}

// HistoryWanted is the history HistorySize gives before its cap of
// MaxHistory: rate × expiry, each defaulted as there, saturating at
// math.MaxInt64. A caller that would rather refuse a setting than have it
// capped compares it with MaxHistory.
func HistoryWanted(maxClients, rate int, expiry time.Duration) int64 {
	if rate <= 0 {
		rate = min(max(TokenRatePerSlot*maxClients, MinTokenRate), MaxTokenRate)
	}
	if expiry <= 0 {
		expiry = DefaultTokenExpiry
	}
	secs := int64((expiry + time.Second - 1) / time.Second)
	if secs > math.MaxInt64/int64(rate) {
		return math.MaxInt64
	}
	return int64(rate) * secs
}

// tokenHistory remembers every connect token a connection was made with,
// until the token expires, keyed on the token's MAC: the shared O(1)
// history of internal/history. A token enters it only when its handshake
// completes (see Receiver.recordToken).
type tokenHistory = history.Table[[crypto.MACBytes]byte, tokenUse]

// tokenUse is what the history keeps of a token: the address it connected
// from and what was said of its reuses.
type tokenUse struct {
	addr    netip.AddrPort
	counted bool // a reuse of it was counted (Stats.TokenReuseRefused)
	// loggedHere and loggedElsewhere: a reuse of it from its own address,
	// and from another, was logged.
	loggedHere, loggedElsewhere bool
}

func newTokenHistory(limit int, now uint64) *tokenHistory {
	return history.New[[crypto.MACBytes]byte, tokenUse](limit, now, token.NeverExpireTimestamp)
}
