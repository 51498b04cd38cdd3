package reliable

// The send queue of a reliable channel: the ring of bytes written and not
// yet cut into chunks, and the wake of a writer waiting for room in it.

// queued returns the bytes waiting to be cut into chunks.
func (s *relSend) queued() int { return s.qlen }

// room returns how many more bytes the queue takes.
func (s *relSend) room() int { return s.limit - s.queued() }

// wakeWriter signals cs.writable, for a Write or Send waiting for room in
// the queue, once the queue has the room it waits for (want). A Write
// waits for a quarter of the queue at most (see waitRoom), not for any
// room: woken at every chunk cut, a packet's worth, it would take a
// packet's worth per wake and wait again at once, a goroutine park and
// wake per packet, as TCP avoids by waking a writer only once a good part
// of its send buffer is free. The three quarters still queued keep the
// sender busy meanwhile.
func (s *relSend) wakeWriter(cs *chanState) {
	if s.room() >= s.want {
		signal(cs.writable)
	}
}

// waitRoom records that a writer is about to wait for n bytes of room
// (no more than a quarter of the queue if partial is set: a Write that
// takes what fits), before it releases the connection's lock.
func (s *relSend) waitRoom(n int, partial bool) {
	if partial {
		n = min(n, s.limit/writeLowWater)
	}
	s.want = min(n, s.limit)
}

// write queues b, which must fit in room. The queue is a ring, so that a
// writer who adds a few chunks' worth at a time to a full queue (a bulk
// transfer, as acks free room) copies only what it adds; the ring grows,
// by doubling, up to limit.
func (s *relSend) write(b ...[]byte) {
	need := 0
	for _, p := range b {
		need += len(p)
	}
	if s.qlen+need > len(s.queue) {
		q := make([]byte, min(max(2*len(s.queue), s.qlen+need, 4096), max(s.limit, s.qlen+need)))
		n := s.qlen
		s.take(q[:n])
		s.queue, s.qhead, s.qlen = q, 0, n
	}
	for _, p := range b {
		at := (s.qhead + s.qlen) % len(s.queue)
		n := copy(s.queue[at:], p)
		copy(s.queue, p[n:])
		s.qlen += len(p)
	}
	s.used, s.dirty = true, true
}

// take moves the first len(dst) queued bytes (no more than are queued)
// into dst.
func (s *relSend) take(dst []byte) {
	if len(dst) == 0 {
		return
	}
	k := copy(dst, s.queue[s.qhead:])
	copy(dst[k:], s.queue)
	s.qhead = (s.qhead + len(dst)) % len(s.queue)
	s.qlen -= len(dst)
}
