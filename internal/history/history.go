// Package history is the one connect-token history of the module, shared
// by netcode's server core (keyed on a token's 16-byte MAC) and the Cute
// adapter (keyed on a token's secretbox header). It remembers every token
// until the token expires and never forgets one sooner: when it is full,
// Add refuses. An LRU that evicts, as the C codes' caches do, would let an
// attacker flush a consumed token out and replay it.
package history

// Slots is the number of one-second buckets of the expiry wheel. An entry
// expiring further ahead is looked at once per turn of the wheel.
const Slots = 256

// Table remembers keys of type K, each with a value of type V, until
// their expiry (Unix seconds, a parameter of each Add). Keys whose expiry
// is the Table's never value are kept until Clear.
//
// Lookup and insert are O(1). Entries sit in an expiry wheel of one-second
// buckets (a linked list through the entry slab per bucket); Expire walks
// only the buckets of the seconds that passed, so the work follows what
// expires, not the size of the history. Entries live in a slab that grows
// to the limit and is then reused: no allocation in steady state.
//
// A Table is not safe for concurrent use: its owner's lock guards it.
type Table[K comparable, V any] struct {
	index   map[K]int32 // key → slab index
	slab    []Entry[K, V]
	free    int32 // head of the free list through slab (-1: none)
	buckets [Slots]int32
	limit   int
	never   uint64 // the expiry that means "never expires"
	swept   uint64 // every second <= swept has been expired
}

// Entry is one remembered key. Value is the owner's to read and change.
type Entry[K comparable, V any] struct {
	Value    V
	key      K
	expire   uint64
	next     int32 // next entry in the same bucket or the free list; -1 ends
	bucketed bool  // in a wheel bucket (never-expiring keys are not)
}

// Expires returns the entry's expiry, Unix seconds.
func (e *Entry[K, V]) Expires() uint64 { return e.expire }

// New returns a Table of at most limit keys, swept up to now (Unix
// seconds). An Add whose expiry is never is kept until Clear.
func New[K comparable, V any](limit int, now, never uint64) *Table[K, V] {
	h := &Table[K, V]{
		index: make(map[K]int32),
		free:  -1,
		limit: limit,
		never: never,
		swept: now,
	}
	for i := range h.buckets {
		h.buckets[i] = -1
	}
	return h
}

// Len is the number of keys remembered.
func (h *Table[K, V]) Len() int { return len(h.index) }

// Limit is the most keys the Table remembers.
func (h *Table[K, V]) Limit() int { return h.limit }

// Find returns the entry for k, or nil. The pointer is valid until the
// next Add, Expire or Clear.
func (h *Table[K, V]) Find(k *K) *Entry[K, V] {
	i, ok := h.index[*k]
	if !ok {
		return nil
	}
	return &h.slab[i]
}

// Add remembers a new key until expire (Unix seconds) with the value v.
// It returns nil, and remembers nothing, when the Table is full. The key
// must not be remembered already (Find first).
func (h *Table[K, V]) Add(k *K, expire uint64, v V) *Entry[K, V] {
	if len(h.index) >= h.limit {
		return nil
	}
	var i int32
	if h.free >= 0 {
		i = h.free
		h.free = h.slab[i].next
	} else {
		i = int32(len(h.slab))
		h.slab = append(h.slab, Entry[K, V]{})
	}
	e := &h.slab[i]
	*e = Entry[K, V]{Value: v, key: *k, expire: expire, next: -1}
	if expire != h.never {
		b := &h.buckets[expire%Slots]
		e.next, *b = *b, i
		e.bucketed = true
	}
	h.index[*k] = i
	return e
}

// Expire forgets the keys that expired at or before now (Unix seconds).
func (h *Table[K, V]) Expire(now uint64) {
	if now <= h.swept {
		return
	}
	// A turn of the wheel covers every bucket; more seconds than that
	// passed need only one turn.
	from := h.swept + 1
	if now-h.swept > Slots {
		from = now - Slots + 1
	}
	for sec := from; sec <= now; sec++ {
		h.expireBucket(sec%Slots, now)
	}
	h.swept = now
}

// expireBucket frees the entries of one bucket that have expired by now,
// keeping those that expire on a later turn of the wheel.
func (h *Table[K, V]) expireBucket(b uint64, now uint64) {
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
		delete(h.index, e.key)
		*e = Entry[K, V]{next: h.free}
		h.free = i
		i = next
	}
}

// Clear forgets everything.
func (h *Table[K, V]) Clear() {
	clear(h.index)
	h.slab = h.slab[:0]
	h.free = -1
	for i := range h.buckets {
		h.buckets[i] = -1
	}
}
