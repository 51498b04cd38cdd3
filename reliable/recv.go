package reliable

import (
	"encoding/binary"
	"fmt"
	"time"
)

// relRecv is the receiving half: chunks from next (the first not yet read)
// to next+window are kept; frontier is the first missing one, and ready
// counts the bytes from the read position to the frontier.
type relRecv struct {
	slots     []recvSlot // a ring indexed by chunk modulo its length, grown up to window
	held      int        // slots present (received, not yet read)
	used      bool       // a chunk was stored since the last trim
	dirty     bool       // used since the trim that last cleared the ring
	window    uint32     // grows up to maxWindow (tune)
	maxWindow uint32
	epoch     uint32 // next when the tuning epoch began
	epochAt   int64  // when it began, as core.stamp
	next      uint32
	off       int
	frontier  uint32
	ready     int
	finReady  bool // the chunk at frontier-1 carried FIN: the stream ends after ready bytes
	advert    uint32
	msgLen    int // reliable-ordered: length of the message being read, -1 if not known
	advertise bool
}

type recvSlot struct {
	present bool
	fin     bool
	data    []byte
}

// msgQueue is a ring of at most len(bufs) messages whose buffers are
// reused, and hold at most limit bytes of capacity between them (as
// allocated, before the allocator's rounding): a peer that fills the queue
// with its largest messages pins limit bytes, not len(bufs) of them.
type msgQueue struct {
	bufs       [][]byte
	head, size int
	held       int  // the capacity of bufs, in bytes
	limit      int  // the most held may be
	used       bool // a message was pushed since the last trim
}

func (q *msgQueue) push(b []byte) bool {
	if q.size == len(q.bufs) {
		return false
	}
	i := (q.head + q.size) % len(q.bufs)
	if cap(q.bufs[i]) < len(b) {
		q.held -= cap(q.bufs[i])
		q.bufs[i] = nil
		// Take the room from the buffers of free slots if need be.
		for k := q.size + 1; k < len(q.bufs) && q.held+len(b) > q.limit; k++ {
			j := (q.head + k) % len(q.bufs)
			q.held -= cap(q.bufs[j])
			q.bufs[j] = nil
		}
		if q.held+len(b) > q.limit {
			return false
		}
		q.bufs[i] = make([]byte, 0, len(b))
		q.held += len(b)
	}
	q.bufs[i] = append(q.bufs[i][:0], b...)
	q.size++
	q.used = true
	return true
}

// trim frees every buffer of a queue that has stayed empty since the last
// trim.
func (q *msgQueue) trim() {
	if q.size == 0 && !q.used {
		clear(q.bufs)
		q.held = 0
	}
	q.used = false
}

func (q *msgQueue) peek() []byte { return q.bufs[q.head] }

func (q *msgQueue) pop() {
	q.head = (q.head + 1) % len(q.bufs)
	q.size--
}

// trim, if nothing arrived since the last trim and everything received
// was read, shrinks the ring to initialSlots, dropping its chunk buffers.
func (r *relRecv) trim() {
	if !r.used && r.held == 0 {
		if len(r.slots) > initialSlots {
			r.slots = make([]recvSlot, initialSlots)
		} else {
			clear(r.slots)
		}
		r.dirty = false
	}
	r.used = false
}

// receive takes one datagram from the message connection.
func (c *core) receive(now time.Time, b []byte) {
	c.setTime(now)
	c.ep.ReceivePacket(b)
	for _, s := range c.ep.Acks() {
		c.acked(s)
	}
	c.ep.ClearAcks()
	c.markLost()
	c.flush()
}

// acked handles the ack of packet s: an RTT sample, and the chunks it
// carried are delivered.
func (c *core) acked(s uint16) {
	rec := &c.recs[int(s)%len(c.recs)]
	if !rec.valid || rec.seq != s {
		return
	}
	rec.valid = false
	if rec.flight {
		c.cc.acked(int(rec.bytes), rec.at, c.stamp(), c.srtt)
		c.cc.left(int(rec.bytes))
	}
	if !c.anyAcked || seqNewer(s, c.highestAcked) {
		c.highestAcked, c.anyAcked = s, true
	}
	sample := c.since(rec.at)
	if !c.haveRTT {
		c.srtt, c.rttvar, c.haveRTT = sample, sample/2, true
	} else {
		d := c.srtt - sample
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + sample) / 8
	}
	c.cc.rttSample(sample, c.srtt, c.stamp())
	for _, r := range rec.refs[:rec.n] {
		c.ackChunk(int(r.ch), r.seq)
	}
}

// ackBelow acks every chunk of channel ch before cum: the peer has them
// all (a cumulative ack, which reordering cannot defeat as it can the
// Endpoint's 32 ack bits).
func (c *core) ackBelow(ch int, cum uint32) {
	s := &c.chans[ch].snd
	for seq := s.base; seqBefore(seq, cum); seq++ {
		c.ackChunk(ch, seq)
	}
}

func (c *core) ackChunk(ch int, seq uint32) {
	cs := &c.chans[ch]
	s := &cs.snd
	if seqBefore(seq, s.base) || !seqBefore(seq, s.next) {
		return
	}
	slot := &s.slots[seq%uint32(len(s.slots))]
	if slot.seq != seq || slot.acked {
		return
	}
	slot.acked = true
	s.unlink(slot)
	freed := false
	for s.base != s.next && s.slots[s.base%uint32(len(s.slots))].acked {
		s.base++
		freed = true
	}
	if freed {
		s.wakeWriter(cs)
		if c.progress != nil {
			signal(c.progress)
		}
	}
}

// process is the Endpoint's Process callback: it checks the whole payload
// first, so a bad packet changes nothing, then applies it. Returning false
// leaves the packet unacked.
func (c *core) process(seq uint16, p []byte) bool {
	if c.err != nil {
		return false
	}
	if len(p) < layoutBytes {
		c.fail(ErrProtocol)
		return false
	}
	if binary.LittleEndian.Uint32(p) != c.cfg.layout {
		c.fail(ErrConfigMismatch)
		return false
	}
	if err := c.walk(p[layoutBytes:], false); err != nil {
		if err != errOutOfWindow {
			c.fail(err)
		}
		return false
	}
	if len(p) > layoutBytes+len(c.rel)*windowEntryBytes {
		if c.recvSinceSend == 0 {
			c.owedAt = c.now
		}
		c.recvSinceSend++ // carries data: owes an ack
		// Out of order: the sender may be resending on the strength of
		// the acks it has; tell it at once.
		c.ackNow = c.ackNow || seq != c.lastRecvSeq+1
		c.lastRecvSeq = seq
		c.lastActive = c.now
	}
	_ = c.walk(p[layoutBytes:], true)
	if c.progress != nil {
		signal(c.progress) // a Close waiting may now be done (a FIN came)
	}
	return true
}

var errOutOfWindow = fmt.Errorf("%w: data beyond the window", ErrProtocol)

// walk parses the entries of a payload, checking them, and applies them
// if apply is set.
func (c *core) walk(p []byte, apply bool) error {
	for len(p) > 0 {
		if len(p) < 2 || int(p[1]) >= len(c.chans) {
			return fmt.Errorf("%w: bad entry", ErrProtocol)
		}
		typ, cs := p[0], &c.chans[p[1]]
		reliable := cs.spec.kind != Unreliable
		switch {
		case typ == entryChunk && reliable:
			if len(p) < chunkEntryHeader {
				return fmt.Errorf("%w: short chunk", ErrProtocol)
			}
			flags := p[2]
			seq := binary.LittleEndian.Uint32(p[3:])
			n := int(binary.LittleEndian.Uint16(p[7:]))
			if n > c.cfg.chunkMax || len(p) < chunkEntryHeader+n || flags&^(flagFIN|flagAckNow) != 0 {
				return fmt.Errorf("%w: bad chunk", ErrProtocol)
			}
			if !seqBefore(seq, cs.rcv.next+cs.rcv.window) {
				return errOutOfWindow
			}
			if apply {
				cs.rcv.store(seq, flags&flagFIN != 0, p[chunkEntryHeader:chunkEntryHeader+n], cs)
				c.ackNow = c.ackNow || flags&flagAckNow != 0
			}
			p = p[chunkEntryHeader+n:]
		case typ == entryMessage && !reliable:
			if len(p) < msgEntryHeader {
				return fmt.Errorf("%w: short message", ErrProtocol)
			}
			n := int(binary.LittleEndian.Uint16(p[2:]))
			if n > cs.spec.maxMessage || len(p) < msgEntryHeader+n {
				return fmt.Errorf("%w: bad message length %d", ErrProtocol, n)
			}
			if apply {
				if cs.urcv.push(p[msgEntryHeader : msgEntryHeader+n]) {
					signal(cs.readable)
				} else {
					c.stats.UnreliableDropped++
				}
			}
			p = p[msgEntryHeader+n:]
		case typ == entryWindow && reliable:
			if len(p) < windowEntryBytes {
				return fmt.Errorf("%w: short window", ErrProtocol)
			}
			cum := binary.LittleEndian.Uint32(p[2:])
			limit := binary.LittleEndian.Uint32(p[6:])
			if seqBefore(cs.snd.next, cum) || seqBefore(limit, cum) {
				return fmt.Errorf("%w: ack of data never sent", ErrProtocol)
			}
			if apply {
				c.ackBelow(int(p[1]), cum)
				if seqBefore(cs.snd.peerLimit, limit) {
					cs.snd.peerLimit = limit
					cs.snd.wakeWriter(cs)
				}
			}
			p = p[windowEntryBytes:]
		default:
			return fmt.Errorf("%w: entry %d on a %v channel", ErrProtocol, typ, cs.spec.kind)
		}
	}
	return nil
}

// store keeps a received chunk and moves the frontier over the chunks now
// contiguous.
func (r *relRecv) store(seq uint32, fin bool, data []byte, cs *chanState) {
	if seqBefore(seq, r.next) || r.finReady && !seqBefore(seq, r.frontier) {
		return // duplicate, or past the end of the stream
	}
	if seq-r.next >= uint32(len(r.slots)) {
		r.grow(seq - r.next)
	}
	w := uint32(len(r.slots))
	slot := &r.slots[seq%w]
	if slot.present {
		return
	}
	slot.present, slot.fin = true, fin
	slot.data = append(slot.data[:0], data...)
	r.held++
	r.used, r.dirty = true, true
	moved := false
	for !r.finReady {
		s := &r.slots[r.frontier%w]
		if !s.present || r.frontier-r.next >= w {
			break
		}
		r.ready += len(s.data)
		r.finReady = s.fin
		r.frontier++
		moved = true
	}
	if moved {
		signal(cs.readable)
	}
}

// grow lengthens the ring to hold chunk next+need (need < window).
func (r *relRecv) grow(need uint32) {
	n := uint32(len(r.slots))
	m := n
	for m <= need {
		m = min(2*m, r.window)
	}
	slots := make([]recvSlot, m)
	for q := r.next; q != r.next+n; q++ {
		slots[q%m] = r.slots[q%n]
	}
	r.slots = slots
}

// read copies up to len(b) ready bytes into b and frees the chunks read.
// consume false only peeks.
func (r *relRecv) read(b []byte, consume bool) int {
	w := uint32(len(r.slots))
	n := 0
	next, off := r.next, r.off
	for n < len(b) && next != r.frontier {
		s := &r.slots[next%w]
		k := copy(b[n:], s.data[off:])
		n += k
		off += k
		if off == len(s.data) {
			if consume {
				s.present = false
				r.held--
			}
			next++
			off = 0
		}
	}
	if consume {
		r.next, r.off = next, off
		r.ready -= n
		if r.next+r.window-r.advert >= r.window/4 { // the window grew by a quarter since last told
			r.advertise = true
		}
	}
	return n
}

// tuneDue reports whether the reader consumed half the window since the
// tuning epoch began, and the window may still grow: tune is to be called.
func (r *relRecv) tuneDue() bool {
	return r.window < r.maxWindow && r.next-r.epoch >= r.window/2
}

// tune, when tuneDue, doubles the window (up to maxWindow) if the reader
// consumed what it did in less than 4 smoothed RTTs per window: then the
// window, not the reader, bounds the transfer, as flow control's
// auto-tuning in QUIC stacks judges it. It starts a new epoch either way.
// The window grows only as the local reader consumes data, so a peer
// that withholds a chunk cannot make it grow, and never past maxWindow.
func (r *relRecv) tune(now int64, srtt time.Duration, haveRTT bool) {
	consumed := int64(r.next - r.epoch)
	if haveRTT && (now-r.epochAt)*int64(r.window) < 4*int64(srtt)*consumed {
		r.window = min(2*r.window, r.maxWindow)
		if r.next+r.window-r.advert >= r.window/4 {
			r.advertise = true
		}
	}
	r.epoch, r.epochAt = r.next, now
}

// atEOF reports whether the stream has ended and everything was read.
func (r *relRecv) atEOF() bool { return r.finReady && r.ready == 0 }
