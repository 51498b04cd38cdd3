package server

import (
	"net/netip"

	"github.com/gonetcode/netcode/crypto"
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

// wheelSlots is the number of one-second buckets of the expiry wheel. An
// entry expiring further ahead is looked at once per turn of the wheel.
const wheelSlots = 256

// tokenHistory remembers every connect token the server accepted a
// connection request for, until the token expires: the address it was
// first used from and whether a connection was made with it. It never
// forgets an entry before its token expires; when it is full, add refuses.
//
// Lookup and insert are O(1). Entries sit in an expiry wheel of one-second
// buckets (a linked list through the entry slab per bucket); expire walks
// only the buckets of the seconds that passed, so the work follows what
// expires, not the size of the history. Entries live in a slab that grows
// to the history's size and is then reused: no allocation in steady state.
type tokenHistory struct {
	index   map[[crypto.MACBytes]byte]int32 // token MAC → slab index
	slab    []historyEntry
	free    int32 // head of the free list through slab (-1: none)
	buckets [wheelSlots]int32
	limit   int
	swept   uint64 // every second <= swept has been expired
}

type historyEntry struct {
	mac      [crypto.MACBytes]byte
	addr     netip.AddrPort
	expire   uint64 // token expire timestamp, Unix seconds
	next     int32  // next entry in the same bucket or the free list; -1 ends
	consumed bool   // a connection was made with this token
	counted  bool   // a reuse of it was counted (Stats.TokenReuseRefused)
	// loggedHere and loggedElsewhere: a reuse of it from its own address,
	// and from another, was logged.
	loggedHere, loggedElsewhere bool
	bucketed                    bool // in a wheel bucket (never-expiring tokens are not)
}

func newTokenHistory(limit int, now uint64) *tokenHistory {
	h := &tokenHistory{
		index: make(map[[crypto.MACBytes]byte]int32),
		free:  -1,
		limit: limit,
		swept: now,
	}
	for i := range h.buckets {
		h.buckets[i] = -1
	}
	return h
}

// len is the number of tokens remembered.
func (h *tokenHistory) len() int { return len(h.index) }

// find returns the entry for mac, or nil. The pointer is valid until the
// next add or expire.
func (h *tokenHistory) find(mac *[crypto.MACBytes]byte) *historyEntry {
	i, ok := h.index[*mac]
	if !ok {
		return nil
	}
	return &h.slab[i]
}

// add remembers a new token, first used from addr. It returns nil, and
// remembers nothing, when the history is full.
func (h *tokenHistory) add(mac *[crypto.MACBytes]byte, addr netip.AddrPort, expire uint64) *historyEntry {
	if len(h.index) >= h.limit {
		return nil
	}
	var i int32
	if h.free >= 0 {
		i = h.free
		h.free = h.slab[i].next
	} else {
		i = int32(len(h.slab))
		h.slab = append(h.slab, historyEntry{})
	}
	e := &h.slab[i]
	*e = historyEntry{mac: *mac, addr: addr, expire: expire, next: -1}
	if expire != token.NeverExpireTimestamp {
		b := &h.buckets[expire%wheelSlots]
		e.next, *b = *b, i
		e.bucketed = true
	}
	h.index[*mac] = i
	return e
}

// expire forgets the tokens that expired at or before now (Unix seconds).
func (h *tokenHistory) expire(now uint64) {
	if now <= h.swept {
		return
	}
	// A turn of the wheel covers every bucket; more seconds than that
	// passed need only one turn.
	from := h.swept + 1
	if now-h.swept > wheelSlots {
		from = now - wheelSlots + 1
	}
	for sec := from; sec <= now; sec++ {
		h.expireBucket(sec%wheelSlots, now)
	}
	h.swept = now
}

// expireBucket frees the entries of one bucket whose tokens have expired
// by now, keeping those that expire on a later turn of the wheel.
func (h *tokenHistory) expireBucket(b uint64, now uint64) {
	prev := int32(-1)
	for i := h.buckets[b]; i >= 0; {
		e := &h.slab[i]
		next := e.next
		if e.expire > now {
			prev = i
			i = next
			continue
		}
		if prev < 0 {
			h.buckets[b] = next
		} else {
			h.slab[prev].next = next
		}
		delete(h.index, e.mac)
		*e = historyEntry{next: h.free}
		h.free = i
		i = next
	}
}

// clear forgets everything.
func (h *tokenHistory) clear() {
	clear(h.index)
	h.slab = h.slab[:0]
	h.free = -1
	for i := range h.buckets {
		h.buckets[i] = -1
	}
}
