package endpoint

// Sequence numbers are 16 bits and wrap. These are the reference's
// comparisons: s1 is newer than s2 when it is ahead by at most half the
// range (so greaterThan(32768, 0) holds and greaterThan(0, 32768) does not).

func greaterThan(s1, s2 uint16) bool {
	return (s1 > s2 && s1-s2 <= 32768) || (s1 < s2 && s2-s1 > 32768)
}

func lessThan(s1, s2 uint16) bool { return greaterThan(s2, s1) }

// emptySlot marks a slot of a seqBuffer that holds no sequence.
const emptySlot = 0xFFFFFFFF

// seqBuffer is the reference's sequence buffer: a fixed array of entries
// indexed by sequence modulo its size, each remembering which sequence it
// holds. sequence is one past the newest sequence inserted.
type seqBuffer[T any] struct {
	sequence uint16
	ids      []uint32
	entries  []T
}

func newSeqBuffer[T any](n int) seqBuffer[T] {
	b := seqBuffer[T]{ids: make([]uint32, n), entries: make([]T, n)}
	b.reset()
	return b
}

func (b *seqBuffer[T]) reset() {
	b.sequence = 0
	for i := range b.ids {
		b.ids[i] = emptySlot
	}
}

// removeRange empties the slots of sequences start through finish. As in the
// reference, a range that wraps is walked with int indices past 65535, so
// slot mapping only agrees with find's when the size divides 65536.
func (b *seqBuffer[T]) removeRange(start, finish int, clean func(*T)) {
	if finish < start {
		finish += 65536
	}
	n := len(b.ids)
	if finish-start < n {
		for s := start; s <= finish; s++ {
			b.clearSlot(s%n, clean)
		}
		return
	}
	for i := range n {
		b.clearSlot(i, clean)
	}
}

func (b *seqBuffer[T]) clearSlot(i int, clean func(*T)) {
	if clean != nil && b.ids[i] != emptySlot {
		clean(&b.entries[i])
	}
	b.ids[i] = emptySlot
}

// testInsert reports whether s is recent enough to be inserted.
func (b *seqBuffer[T]) testInsert(s uint16) bool {
	return !lessThan(s, b.sequence-uint16(len(b.ids)))
}

// insert occupies the slot of s, clearing the slots skipped if s is newer
// than every sequence seen; it returns nil if s is stale.
func (b *seqBuffer[T]) insert(s uint16) *T {
	if !b.testInsert(s) {
		return nil
	}
	b.advance(s, nil)
	i := int(s) % len(b.ids)
	b.ids[i] = uint32(s)
	return &b.entries[i]
}

// insertWithCleanup is insert with the reference's order for the
// reassembly buffer (advance first, staleness second) and clean called for
// every occupied slot it clears or overwrites.
func (b *seqBuffer[T]) insertWithCleanup(s uint16, clean func(*T)) *T {
	if greaterThan(s+1, b.sequence) {
		b.removeRange(int(b.sequence), int(s), clean)
		b.sequence = s + 1
	} else if lessThan(s, b.sequence-uint16(len(b.ids))) {
		return nil
	}
	i := int(s) % len(b.ids)
	b.clearSlot(i, clean)
	b.ids[i] = uint32(s)
	return &b.entries[i]
}

// advance moves the buffer's sequence past s if s is newer, clearing the
// slots in between, without occupying s's slot.
func (b *seqBuffer[T]) advance(s uint16, clean func(*T)) {
	if greaterThan(s+1, b.sequence) {
		b.removeRange(int(b.sequence), int(s), clean)
		b.sequence = s + 1
	}
}

func (b *seqBuffer[T]) remove(s uint16, clean func(*T)) {
	b.clearSlot(int(s)%len(b.ids), clean)
}

func (b *seqBuffer[T]) available(s uint16) bool {
	return b.ids[int(s)%len(b.ids)] == emptySlot
}

func (b *seqBuffer[T]) exists(s uint16) bool {
	return b.ids[int(s)%len(b.ids)] == uint32(s)
}

// find returns the entry of s, or nil.
func (b *seqBuffer[T]) find(s uint16) *T {
	i := int(s) % len(b.ids)
	if b.ids[i] != uint32(s) {
		return nil
	}
	return &b.entries[i]
}

// ackBits returns the newest sequence the buffer has reached and a bit for
// it and each of the 31 before it: bit i set iff ack-i is present.
func (b *seqBuffer[T]) ackBits() (ack uint16, bits uint32) {
	ack = b.sequence - 1
	for i := range 32 {
		if b.exists(ack - uint16(i)) {
			bits |= 1 << i
		}
	}
	return ack, bits
}
