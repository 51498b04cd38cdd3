package layer

import "encoding/binary"

// entry is a message being reassembly (cn_fragment_reassembly_entry_t).
// Fragments are stored as they arrive, so what a datagram makes the
// receiver hold is what it carried, never what it claims.
type entry struct {
	count  int
	got    int
	size   int      // known once the last fragment arrived
	chunks []*chunk // by fragment index; nil until received
	one    [1]*chunk
}

// message is a complete message waiting for the reader.
type message struct {
	data []byte
	c    *chunk // data's memory when the message fitted one fragment
	held int
}

// assembly is one kind's receiving side (cn_packet_assembly_t): the
// reassembly window and the reader's queue.
type assembly struct {
	next    uint16 // reliable: the next message to deliver (receive_sequence)
	entries seqBuf[*entry]
	ready   ring[message]
}

// clean releases an entry's fragments: Transport is its reassembly
// windows' cleaner.
func (t *Transport) clean(p **entry) {
	e := *p
	if e == nil {
		return
	}
	for i, c := range e.chunks {
		if c != nil {
			t.putChunk(c)
			t.held -= FragmentBytes
			e.chunks[i] = nil
		}
	}
	if len(e.chunks) > 1 {
		e.chunks = e.chunks[:0]
	} else {
		e.chunks = nil
	}
	*p = nil
	if len(t.entries) < keepChunks {
		t.entries = append(t.entries, e)
	}
}

// newEntry returns an empty entry for a message of count fragments.
func (t *Transport) newEntry(count int) *entry {
	var e *entry
	if n := len(t.entries); n > 0 {
		e = t.entries[n-1]
		t.entries = t.entries[:n-1]
	} else {
		e = new(entry)
	}
	*e = entry{count: count, chunks: e.chunks}
	switch {
	case count == 1:
		e.chunks = e.one[:]
	case cap(e.chunks) >= count:
		e.chunks = e.chunks[:count]
	default:
		e.chunks = make([]*chunk, count)
	}
	return e
}

// Receive takes one datagram from the peer (cn_transport_process_packet).
// A nil error means it was taken: its acks, and its fragment if it carried
// one. ErrDuplicate, ErrStale (fire-and-forget) and ErrDropped are
// expected on a lossy path and need no action; ErrMalformed, ErrTooLarge
// and ErrBusy mean the datagram was refused and is not acknowledged. The
// datagram's bytes are copied; b can be reused at once.
func (t *Transport) Receive(b []byte) error {
	// cute_net.h refuses only datagrams under 9 bytes here, and then
	// reads the 17 bytes of both headers (an over-read for 9 to 16).
	if len(b) < AckHeaderBytes+HeaderBytes {
		t.stats.Refused++
		return ErrMalformed
	}
	switch t.a.check(b) {
	case ackTooLarge:
		t.stats.Refused++
		return ErrTooLarge
	case ackStale:
		t.stats.Refused++
		return ErrStale
	}
	h := b[AckHeaderBytes:]
	reliable := h[0] != 0 // any nonzero prefix is reliable, as in cute_net.h
	seq := binary.LittleEndian.Uint16(h[1:])
	count := binary.LittleEndian.Uint16(h[3:])
	index := binary.LittleEndian.Uint16(h[5:])
	size := binary.LittleEndian.Uint16(h[7:])
	data := b[AckHeaderBytes+HeaderBytes:]
	if isAckOnly(count, index, size, len(data)) {
		t.take(b, false)
		return nil
	}
	switch {
	case int(count) > t.maxFrags,
		index == count-1 && int(count-1)*FragmentBytes+int(size) > t.cfg.MaxMessageBytes:
		t.stats.Refused++
		return ErrTooLarge
	// cute_net.h checks index > count (not >=), never compares the size
	// with the datagram, and takes non-final fragments of any size:
	// an overflow, an over-read and uninitialised bytes delivered.
	case count == 0, index >= count, size > FragmentBytes, int(size) != len(data),
		index < count-1 && size != FragmentBytes:
		t.stats.Refused++
		return ErrMalformed
	}
	asm := &t.faf
	if reliable {
		asm = &t.rel
		if lessThan(seq, asm.next) {
			// A resend of a delivered message whose ack was lost: ack it
			// again, or the sender resends for ever.
			t.take(b, true)
			return ErrDuplicate
		}
		if seq-asm.next >= ackBuffer {
			// cute_net.h buffers it and moves its window past the next
			// message, which it then refuses as stale: the stream is dead.
			// A conforming sender is never this far ahead (at most 32
			// fragments are in flight).
			t.stats.Refused++
			return ErrMalformed
		}
	}
	p := asm.entries.find(seq)
	var e *entry
	if p != nil {
		e = *p
	}
	switch {
	case e == nil && !greaterThan(seq+1, asm.entries.next) && asm.entries.stale(seq):
		t.take(b, reliable)
		t.stats.Refused++
		return ErrStale
	case e != nil && e.count != int(count):
		t.stats.Refused++
		return ErrMalformed
	case e != nil && e.chunks[index] != nil:
		t.take(b, reliable) // the first copy wins
		return nil
	}
	if !t.admit(asm, reliable, seq) {
		t.stats.Busy++
		return ErrBusy
	}
	if e == nil {
		p = asm.entries.insert(seq, t)
		e = t.newEntry(int(count))
		*p = e
	}
	t.take(b, reliable)
	c := t.getChunk()
	copy(c[:], data)
	e.chunks[index] = c
	e.got++
	t.held += FragmentBytes
	if index == count-1 {
		e.size = int(count-1)*FragmentBytes + int(size)
	}
	if e.got < e.count {
		return nil
	}
	if !reliable {
		if asm.ready.n == QueueEntries {
			asm.entries.remove(seq, t)
			t.stats.Dropped++
			return ErrDropped
		}
		t.deliver(asm, seq, e)
		return nil
	}
	if seq == asm.next {
		t.advance(asm)
	}
	return nil
}

// take records a datagram in the ack system: it will be acknowledged, and
// the acks it carries are taken. A reliable fragment makes an ack owed.
func (t *Transport) take(b []byte, reliable bool) {
	t.a.record(b)
	t.heard = t.a.time
	if reliable {
		if !t.owe {
			t.owe = true
			t.oweSince = t.a.time
		}
		t.owed++
	}
}

// admit reports whether one more fragment may be held. The next reliable
// message is always admitted, so that the stream can progress; over the
// bound a fire-and-forget fragment first evicts incomplete
// fire-and-forget messages.
func (t *Transport) admit(asm *assembly, reliable bool, seq uint16) bool {
	if t.held+FragmentBytes <= t.cfg.MaxBufferedBytes || reliable && seq == asm.next {
		return true
	}
	if reliable {
		return false
	}
	for i, s := range asm.entries.seqs {
		if s != seqEmpty && uint16(s) != seq {
			t.stats.Dropped++
			asm.entries.drop(i, t)
		}
		if t.held+FragmentBytes <= t.cfg.MaxBufferedBytes {
			return true
		}
	}
	return false
}

// deliver moves the complete entry of seq to the reader's queue.
func (t *Transport) deliver(asm *assembly, seq uint16, e *entry) {
	var m message
	if e.count == 1 {
		m = message{data: e.chunks[0][:e.size], c: e.chunks[0], held: FragmentBytes}
		e.chunks[0] = nil // the message owns the chunk now
		t.held -= FragmentBytes
	} else {
		m.data = t.getBuffer(e.size)[:e.size]
		for i, c := range e.chunks {
			copy(m.data[i*FragmentBytes:], c[:])
		}
		m.held = e.size
	}
	asm.entries.remove(seq, t)
	t.held += m.held
	asm.ready.push(m)
}

// advance delivers the next reliable messages that are complete, in
// order, while the reader's queue has room. Unlike cute_net.h, which
// loops for ever when the queue is full, what does not fit waits in
// reassembly until Pop makes room.
func (t *Transport) advance(asm *assembly) {
	for asm.ready.n < QueueEntries {
		p := asm.entries.find(asm.next)
		if p == nil || *p == nil || (*p).got < (*p).count {
			return
		}
		t.deliver(asm, asm.next, *p)
		asm.next++
	}
}

// Peek returns the next message for the reader: a reliable one if any, else
// a fire-and-forget one, as cn_client_pop_packet does, with which kind it
// is. The slice is valid until Pop. ok is false when none is waiting.
func (t *Transport) Peek() (msg []byte, reliable, ok bool) {
	if t.rel.ready.n > 0 {
		return t.rel.ready.front().data, true, true
	}
	if t.faf.ready.n > 0 {
		return t.faf.ready.front().data, false, true
	}
	return nil, false, false
}

// Pop removes the message Peek returns.
func (t *Transport) Pop() {
	asm := &t.rel
	if asm.ready.n == 0 {
		asm = &t.faf
		if asm.ready.n == 0 {
			return
		}
	}
	m := asm.ready.front()
	t.held -= m.held
	if m.c != nil {
		t.putChunk(m.c)
	} else {
		t.putBuffer(m.data)
	}
	asm.ready.pop()
	if asm == &t.rel {
		t.advance(asm)
	}
}
