package reliable

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/gonetcode/netcode/reliable/endpoint"
)

// relSend is the sending half of a reliable channel. Bytes written wait
// in queue; flush cuts them into chunks numbered from 0, each kept in a
// slot until acked.
type relSend struct {
	queue      []byte     // a ring of the bytes written and not yet cut, grown up to limit
	qhead      int        // index in queue of the first byte queued
	qlen       int        // bytes queued
	limit      int        // most bytes queued
	slots      []sendSlot // a ring indexed by chunk modulo its length, grown up to window
	window     uint32
	base, next uint32 // oldest unacked chunk, next chunk to cut
	peerLimit  uint32 // the peer takes chunks below this
	finWanted  bool
	finCut     bool
	want       int  // the room the writer waiting needs (waitRoom), for wakeWriter
	used       bool // written to or cut from since the last trim
	dirty      bool // used since the trim that last cleared the ring
	// Every chunk in flight (sent, not acked) is in one of lists, in the
	// order of its last send: lists[k] for those sent k+1 times (the
	// last for sendLevels times or more), lists[fastList] for those the
	// acks of later packets show lost. A list's chunks share a resend
	// timeout, so its head is the first due: picking a resend looks at
	// the heads only, whatever the window.
	lists [fastList + 1]chunkList
}

// chunkList is a list of in-flight chunks, linked by sequence through
// their slots (so that growing the ring keeps it).
type chunkList struct {
	head, tail uint32
	n          int
}

type sendSlot struct {
	seq     uint32
	fin     bool
	acked   bool
	list    uint8  // 1 + the index of its list in relSend.lists; 0: none
	prev    uint32 // the chunks before and after it in its list
	next    uint32
	lastPkt uint16
	sends   uint32
	firstAt int64 // first sent, in nanoseconds since the core started
	sentAt  int64 // last sent, likewise
	data    []byte
}

// trim, if nothing was written since the last trim and nothing is in
// flight, shrinks the ring to initialSlots, dropping its chunk buffers,
// and drops the queue's buffer.
func (s *relSend) trim() {
	if !s.used && s.base == s.next && s.queued() == 0 {
		if len(s.slots) > initialSlots {
			s.slots = make([]sendSlot, initialSlots)
		} else {
			clear(s.slots)
		}
		s.queue, s.qhead, s.qlen = nil, 0, 0
		s.dirty = false
	}
	s.used = false
}

// grow lengthens the ring, up to the window, and reports whether it did.
func (s *relSend) grow() bool {
	n := uint32(len(s.slots))
	if n >= s.window {
		return false
	}
	m := min(2*n, s.window)
	slots := make([]sendSlot, m)
	for q := s.base; q != s.next; q++ {
		slots[q%m] = s.slots[q%n]
	}
	s.slots = slots
	return true
}

// dataAcked reports whether everything queued was sent and acknowledged,
// except perhaps the FIN.
func (s *relSend) dataAcked() bool {
	return s.queued() == 0 && (s.base == s.next || s.finCut && s.next-s.base == 1)
}

// idle reports whether everything queued was sent and acknowledged.
func (s *relSend) idle() bool {
	return s.queued() == 0 && s.base == s.next && (!s.finWanted || s.finCut)
}

// burst is the most the budget holds: two ticks' worth.
func (c *core) burst() float64 {
	return min(c.rate()*2*c.cfg.tick.Seconds(), maxBurstPackets*float64(c.cfg.maxPacket))
}

// trackedPackets is how many packets may be in flight: what the Endpoint
// remembers, less a margin for bursts, acks and resends, so that every
// packet in flight can still be acked (beyond, acks are lost, data is
// resent for nothing, and the resends push still more packets out).
func (c *core) trackedPackets() int { return c.maxRecs - c.maxRecs/4 }

// rate is the budget in bytes per second: the congestion window's pacing
// rate, no more than Config.SendRate if set, nor than keeps the packets
// of one RTT within what the Endpoint remembers. Before the first RTT
// sample only SendRate paces; the congestion window bounds the first
// flight.
func (c *core) rate() float64 {
	if !c.haveRTT || c.srtt <= 0 {
		return c.cfg.rate
	}
	srtt := c.srtt.Seconds()
	tracked := float64(c.trackedPackets()*c.cfg.maxPacket) / srtt
	return min(c.cfg.rate, tracked, c.cc.pace(srtt))
}

// refill adds the tokens earned since the last refill, up to two ticks'
// worth.
func (c *core) refill() {
	if d := c.now.Sub(c.lastRefill); d > 0 { // the rate may be infinite: no Inf*0
		c.tokens = min(c.burst(), c.tokens+c.rate()*d.Seconds())
		c.lastRefill = c.now
	}
}

// beginPacket starts a payload: the layout hash, then every reliable
// channel's receive window.
func (c *core) beginPacket() {
	p := binary.LittleEndian.AppendUint32(c.pkt[:0], c.cfg.layout)
	for _, i := range c.rel {
		r := &c.chans[i].rcv
		p = append(p, entryWindow, byte(i))
		p = binary.LittleEndian.AppendUint32(p, r.frontier)
		p = binary.LittleEndian.AppendUint32(p, r.next+r.window)
	}
	c.pkt = p
	c.refs = c.refs[:0]
	c.data = false
}

// sendPacket sends the payload built, records its chunks and the windows
// it told, and starts the next one.
func (c *core) sendPacket() {
	if c.data {
		c.lastActive = c.now
	}
	seq := c.transmit(c.pkt, c.data)
	rec := &c.recs[int(seq)%len(c.recs)]
	rec.n = uint8(copy(rec.refs[:], c.refs))
	for _, r := range c.refs {
		s := &c.chans[r.ch].snd
		s.slots[r.seq%uint32(len(s.slots))].lastPkt = seq
	}
	for _, i := range c.rel {
		r := &c.chans[i].rcv
		if r.advertise {
			// A window that opened is news the peer may be blocked on:
			// repeat it while quiet, in case this packet is lost.
			c.lastActive = c.now
		}
		r.advert = r.next + r.window
		r.advertise = false
	}
	c.beginPacket()
}

// growRecs doubles the packet records. The valid ones are all within the
// last len(recs) sequences, so they keep distinct slots.
func (c *core) growRecs() {
	recs := make([]packetRec, min(2*len(c.recs), c.maxRecs))
	for _, r := range c.recs {
		if r.valid {
			recs[int(r.seq)%len(recs)] = r
		}
	}
	c.recs = recs
}

// transmit sends payload p as the Endpoint's next packet, with an empty
// record, and returns its sequence. A data packet counts in the
// congestion window's flight until it is acked or shown lost.
func (c *core) transmit(p []byte, data bool) uint16 {
	seq := c.ep.NextSequence()
	rec := &c.recs[int(seq)%len(c.recs)]
	if rec.valid && rec.n > 0 && len(c.recs) < c.maxRecs {
		// A packet with data still unacked would be forgotten: make room.
		c.growRecs()
		rec = &c.recs[int(seq)%len(c.recs)]
	}
	if rec.valid && rec.flight {
		c.cc.left(int(rec.bytes)) // forgotten: no ack can come for it now
	}
	n := len(p) + endpoint.MaxPacketHeaderBytes
	rec.valid, rec.flight, rec.seq, rec.at, rec.n, rec.bytes = true, data, seq, c.stamp(), 0, int32(n)
	if data {
		c.cc.sent(n)
	}
	_ = c.ep.SendPacket(p)
	c.tokens -= float64(n)
	c.recvSinceSend = 0
	c.ackNow = false
	c.lastSend = c.now
	return seq
}

// flush sends what is due: unreliable messages first, then resends and
// new reliable data as the budget, the windows and the packet records
// allow, then acks if owed.
func (c *core) flush() {
	if c.err != nil {
		return
	}
	c.refill()
	c.beginPacket()
	for i := range c.chans {
		if c.chans[i].spec.kind == Unreliable {
			c.flushUnreliable(i)
		}
	}
	if len(c.rel) > 0 {
		for progressed := true; progressed && c.tokens > 0; {
			progressed = false
			for k := range c.rel {
				i := c.rel[(c.rr+k)%len(c.rel)]
				if c.tokens > 0 && c.flushChunk(i) {
					progressed = true
				}
			}
		}
		c.rr++
		if c.data {
			c.piggyback()
		}
	}
	quiet := c.now.Sub(c.lastSend) >= idleAck && c.now.Sub(c.lastActive) < idleActive
	owed := c.recvSinceSend >= ackEvery || c.ackNow || (c.fresh && c.recvSinceSend > 0) || quiet
	for _, i := range c.rel {
		owed = owed || c.chans[i].rcv.advertise
	}
	if c.data && len(c.refs) > 0 && c.waitsForAck() {
		c.pkt[c.lastFlags] |= flagAckNow
	}
	if c.data || owed {
		c.sendPacket()
	}
}

// waitsForAck reports whether the sender, having built what it can send
// now, waits for an ack to send more: its congestion window is full, or
// it has nothing more to send and wants its flight acknowledged. Its last
// packet then asks for the ack at once (flagAckNow) instead of after the
// peer's ack delay, which a window smaller than ackEvery packets would
// otherwise wait out every round trip, and which would pass for a queue.
func (c *core) waitsForAck() bool {
	if c.cc.full(len(c.pkt)) {
		return true
	}
	for _, i := range c.rel {
		if s := &c.chans[i].snd; s.queued() > 0 || s.finWanted && !s.finCut {
			return false
		}
	}
	return true
}

func (c *core) flushUnreliable(i int) {
	q := &c.chans[i].usnd
	// Unreliable messages go first and may run the budget a burst into
	// debt, which reliable data then waits out.
	for q.size > 0 && c.tokens > -c.burst() {
		m := q.peek()
		need := msgEntryHeader + len(m)
		if need > c.cfg.maxPayload-len(c.pkt) {
			if c.data {
				c.sendPacket()
			}
			if need > c.cfg.maxPayload-len(c.pkt) {
				// Larger than a packet: alone, fragmented by the Endpoint.
				c.big = binary.LittleEndian.AppendUint32(c.big[:0], c.cfg.layout)
				c.big = append(c.big, entryMessage, byte(i), byte(len(m)), byte(len(m)>>8))
				c.big = append(c.big, m...)
				c.transmit(c.big, true)
				q.pop()
				continue
			}
		}
		c.pkt = append(c.pkt, entryMessage, byte(i), byte(len(m)), byte(len(m)>>8))
		c.pkt = append(c.pkt, m...)
		c.data = true
		q.pop()
	}
	signal(c.chans[i].writable)
}

// flushChunk adds one chunk of channel i to the packet: the next resend
// due, or else a new chunk. It reports whether it added one.
func (c *core) flushChunk(i int) bool {
	cs := &c.chans[i]
	s := &cs.snd
	if slot, fast := c.dueResend(s); slot != nil {
		if fast {
			c.stats.FastResent++
		}
		c.cc.lost(slot.sentAt, c.stamp())
		c.addChunk(i, slot, false)
		c.stats.Resent++
		return true
	}
	// New data waits for room in the congestion window (resends do not:
	// their acks are what empties it), unless the channel has nothing in
	// flight, whose resend timer would bring the acks that empty it: a
	// window filled by unreliable messages whose acks were lost must not
	// hold reliable data back for ever.
	w := uint32(len(s.slots))
	if s.base != s.next && c.cc.full(len(c.pkt)) || !seqBefore(s.next, s.peerLimit) || s.next-s.base >= w && !s.grow() {
		return false
	}
	w = uint32(len(s.slots))
	n := min(s.queued(), c.cfg.chunkMax)
	fin := false
	if n == 0 {
		if !s.finWanted || s.finCut {
			return false
		}
		fin = true
	}
	if chunkEntryHeader+n > c.cfg.maxPayload-len(c.pkt) || len(c.refs) == maxRefs {
		// Whole chunks only: send this packet and cut into the next.
		c.sendPacket()
	}
	slot := &s.slots[s.next%w]
	data := slices.Grow(slot.data[:0], n)[:n]
	s.take(data)
	*slot = sendSlot{seq: s.next, data: data, fin: fin, firstAt: c.stamp()}
	s.finCut = s.finCut || fin
	s.next++
	if n > 0 {
		s.wakeWriter(cs)
	}
	c.addChunk(i, slot, false)
	return true
}

// dueResend returns the in-flight chunk of s whose resend is the most
// overdue, if one is due, and whether the acks of later packets showed it
// lost. It looks at the head of each list only.
func (c *core) dueResend(s *relSend) (slot *sendSlot, fast bool) {
	var best *sendSlot
	bestList := 0
	for k := range s.lists {
		l := &s.lists[k]
		if l.n == 0 {
			continue
		}
		c.looks++
		h := s.slot(l.head)
		var due time.Duration
		if k == fastList {
			// Lost if three later packets were acked and its own ack
			// is overdue, allowing for reordering and the peer's ack
			// delay.
			due = min(c.srtt+2*c.rttvar+ackDelay, maxRTO)
		} else {
			due = c.rto(k + 1)
		}
		if c.since(h.sentAt) >= due && (best == nil || h.sentAt < best.sentAt) {
			best, bestList = h, k
		}
	}
	return best, best != nil && bestList == fastList
}

// markLost moves to the fast list the in-flight chunks last sent in
// packets now three or more behind the highest acked (the ack of later
// packets shows them lost, allowing for reordering). It looks at each
// packet sent once, when it falls that far behind.
func (c *core) markLost() {
	if !c.anyAcked {
		return
	}
	if oldest := c.highestAcked - uint16(len(c.recs)); seqOlder(c.lostScan, oldest) {
		c.lostScan = oldest // older records are gone
	}
	end := c.ep.NextSequence()
	for c.lostScan != end && seqNewer(c.highestAcked, c.lostScan+2) {
		p := c.lostScan
		c.lostScan++
		rec := &c.recs[int(p)%len(c.recs)]
		if !rec.valid || rec.seq != p {
			continue
		}
		if rec.flight {
			rec.flight = false
			c.cc.left(int(rec.bytes))
		}
		for _, r := range rec.refs[:rec.n] {
			s := &c.chans[r.ch].snd
			if seqBefore(r.seq, s.base) || !seqBefore(r.seq, s.next) {
				continue
			}
			slot := s.slot(r.seq)
			if slot.seq != r.seq || slot.acked || slot.lastPkt != p || slot.list == fastList+1 {
				continue
			}
			s.unlink(slot)
			s.push(slot, fastList)
		}
	}
}

// slot returns the slot of chunk seq.
func (s *relSend) slot(seq uint32) *sendSlot { return &s.slots[seq%uint32(len(s.slots))] }

// level is the list of a chunk sent sends times.
func level(sends uint32) int { return int(min(max(sends, 1), sendLevels)) - 1 }

// push appends slot to list k.
func (s *relSend) push(slot *sendSlot, k int) {
	l := &s.lists[k]
	slot.list = uint8(k + 1)
	if l.n == 0 {
		l.head = slot.seq
	} else {
		s.slot(l.tail).next = slot.seq
		slot.prev = l.tail
	}
	l.tail = slot.seq
	l.n++
}

// unlink takes slot out of its list, if it is in one.
func (s *relSend) unlink(slot *sendSlot) {
	if slot.list == 0 {
		return
	}
	l := &s.lists[slot.list-1]
	slot.list = 0
	l.n--
	if l.n == 0 {
		return
	}
	if slot.seq == l.head {
		l.head = slot.next
	} else {
		s.slot(slot.prev).next = slot.next
	}
	if slot.seq == l.tail {
		l.tail = slot.prev
	} else {
		s.slot(slot.next).prev = slot.prev
	}
}

// piggyback fills the room left in a packet that goes anyway with chunks
// still unacked and not sent in the last quarter RTT, oldest first, as
// yojimbo does with its messages: a lost small message is then repaired by
// the next packet rather than after a timeout, and bulk transfers, whose
// packets are full, pay nothing.
//
// The candidates are taken from the heads of the in-flight lists, oldest
// send first (each list is in the order of its sends), and at most
// piggybackLooks are looked at: the cost does not grow with the window.
func (c *core) piggyback() {
	gap := max(c.srtt/4, ackDelay)
	for _, i := range c.rel {
		s := &c.chans[i].snd
		// A cursor and a count per list: a chunk copied goes to the
		// tail of its list, past its cursor's count.
		var cur [fastList + 1]uint32
		var left [fastList + 1]int
		for k := range s.lists {
			cur[k], left[k] = s.lists[k].head, s.lists[k].n
		}
		for range piggybackLooks {
			room := c.cfg.maxPayload - len(c.pkt)
			if room <= chunkEntryHeader || len(c.refs) == maxRefs || c.tokens <= 0 {
				return
			}
			var slot *sendSlot
			k := -1
			for j := range cur {
				if left[j] == 0 {
					continue
				}
				if h := s.slot(cur[j]); slot == nil || h.sentAt < slot.sentAt {
					slot, k = h, j
				}
			}
			if slot == nil || c.since(slot.sentAt) < gap {
				break // the others were sent later still
			}
			c.looks++
			cur[k], left[k] = slot.next, left[k]-1
			if chunkEntryHeader+len(slot.data) > room {
				continue
			}
			c.addChunk(i, slot, true)
			c.stats.Piggybacked++
		}
	}
}

// addChunk appends a chunk entry for slot to the packet, sending the
// packet first if the entry does not fit, and moves slot to the tail of
// its list. A duplicate (piggyback) is not counted as a send: no
// backoff.
func (c *core) addChunk(i int, slot *sendSlot, dup bool) {
	if chunkEntryHeader+len(slot.data) > c.cfg.maxPayload-len(c.pkt) || len(c.refs) == maxRefs {
		c.sendPacket()
	}
	var flags byte
	if slot.fin {
		flags = flagFIN
	}
	c.lastFlags = len(c.pkt) + 2
	c.pkt = append(c.pkt, entryChunk, byte(i), flags)
	c.pkt = binary.LittleEndian.AppendUint32(c.pkt, slot.seq)
	c.pkt = binary.LittleEndian.AppendUint16(c.pkt, uint16(len(slot.data)))
	c.pkt = append(c.pkt, slot.data...)
	c.refs = append(c.refs, chunkRef{ch: uint8(i), seq: slot.seq})
	c.data = true
	slot.sentAt = c.stamp()
	if !dup {
		slot.sends++
	}
	s := &c.chans[i].snd
	s.unlink(slot)
	s.push(slot, level(slot.sends))
}
