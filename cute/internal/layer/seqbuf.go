package layer

// seqEmpty marks a free slot of a sequence buffer (CN_SEQUENCE_BUFFER_EMPTY).
const seqEmpty = 0xFFFFFFFF

// greaterThan reports whether 16-bit sequence a is newer than b, with
// wrap-around (s_sequence_greater_than).
func greaterThan(a, b uint16) bool {
	return (a > b && a-b <= 32768) || (a < b && b-a > 32768)
}

// lessThan reports whether a is older than b.
func lessThan(a, b uint16) bool { return greaterThan(b, a) }

// cleaner releases what an entry of a sequence buffer holds when the entry
// is overwritten or removed. Passing a zero-size or pointer cleaner as the
// interface allocates nothing.
type cleaner[T any] interface{ clean(*T) }

// keep is the cleaner of entries that hold nothing to release.
type keep[T any] struct{}

func (keep[T]) clean(*T) {}

// seqBuf is cn_sequence_buffer_t: entries indexed by sequence modulo the
// capacity, with next (the C code's "sequence") one past the newest
// sequence inserted.
type seqBuf[T any] struct {
	next uint16
	seqs []uint32
	vals []T
}

func (b *seqBuf[T]) init(capacity int) {
	b.next = 0
	b.seqs = make([]uint32, capacity)
	b.vals = make([]T, capacity)
	for i := range b.seqs {
		b.seqs[i] = seqEmpty
	}
}

// stale reports whether s is older than the buffer's window.
func (b *seqBuf[T]) stale(s uint16) bool {
	return lessThan(s, b.next-uint16(len(b.seqs)))
}

// clear empties the slots of sequences a through z (ints, z may be below a
// after a wrap), or every slot when the range is as long as the buffer.
func (b *seqBuf[T]) clear(a, z int, c cleaner[T]) {
	if z < a {
		z += 65536
	}
	if z-a < len(b.seqs) {
		for s := a; s <= z; s++ {
			b.drop(s%len(b.seqs), c)
		}
		return
	}
	for i := range b.seqs {
		b.drop(i, c)
	}
}

// drop empties slot i, cleaning it if it was taken.
func (b *seqBuf[T]) drop(i int, c cleaner[T]) {
	if b.seqs[i] != seqEmpty {
		c.clean(&b.vals[i])
		b.seqs[i] = seqEmpty
	}
}

// insert takes the slot of s, moving the window forward when s is newer
// than every sequence so far; it returns nil when s is stale.
func (b *seqBuf[T]) insert(s uint16, c cleaner[T]) *T {
	if greaterThan(s+1, b.next) {
		b.clear(int(b.next), int(s), c)
		b.next = s + 1
	} else if b.stale(s) {
		return nil
	}
	i := int(s) % len(b.seqs)
	b.drop(i, c)
	b.seqs[i] = uint32(s)
	return &b.vals[i]
}

// find returns the entry of s, or nil.
func (b *seqBuf[T]) find(s uint16) *T {
	i := int(s) % len(b.seqs)
	if b.seqs[i] == uint32(s) {
		return &b.vals[i]
	}
	return nil
}

// remove empties the slot of s (whatever sequence it holds, as the C code).
func (b *seqBuf[T]) remove(s uint16, c cleaner[T]) {
	b.drop(int(s)%len(b.seqs), c)
}
