package reliable

import (
	"encoding/binary"
	"fmt"
	"time"
)

// core is the I/O-free state of a connection carrying channels over an
// Endpoint: what each channel has queued, in flight and received, and
// which chunks each sent packet carried. Its owner serialises every call,
// feeds it received datagrams and the time, and gives it out, the sink of
// datagrams to send.
type core struct {
	cfg   *resolved
	ep    *Endpoint
	out   func([]byte)
	start time.Time
	now   time.Time
	err   error // fatal: the connection must end

	chans []chanState
	rel   []int // indices of the reliable channels

	recs    []packetRec // by packet sequence modulo len, grown up to maxRecs
	maxRecs int         // the Endpoint's sent packets buffer: acks come for no older packet
	pkt     []byte      // payload being built
	big     []byte      // payload of an unreliable message larger than a packet
	refs    []chunkRef  // chunks in pkt
	data    bool        // pkt carries more than the layout and windows
	rr      int         // round-robin start among reliable channels
	fresh   bool        // this flush was started by a tick

	tokens     float64
	lastRefill time.Time

	lastTrim time.Time

	srtt, rttvar time.Duration
	haveRTT      bool
	highestAcked uint16
	anyAcked     bool
	lostScan     uint16 // the next sent packet markLost looks at
	looks        uint64 // in-flight chunks looked at to pick resends and copies (tests)

	recvSinceSend int
	ackNow        bool   // a packet came out of order: ack at once
	lastRecvSeq   uint16 // the Endpoint sequence of the last packet processed
	lastSend      time.Time
	lastActive    time.Time // when data was last sent or received

	stats    SessionStats
	progress chan struct{} // signalled when acks free send slots or data arrives (for Close)
}

// initialSlots is the length of a reliable channel's rings until more
// data is in flight: an idle connection does not pay for its window.
const initialSlots = 64

// maxRefs bounds the chunks one packet carries, so that a packet's record
// has a fixed size.
const maxRefs = 8

// ackEvery is how many packets are received before an ack goes back at
// once; fewer wait up to ackDelay.
const ackEvery = 8

// ackDelay is how long an ack owed waits for more packets to ack.
const ackDelay = time.Millisecond

// idleAck is how often a quiet connection still sends its acks and
// windows, so a lost window update cannot stall the peer for long; it
// stops idleActive after the last data either way, so idle connections
// cost nothing.
const (
	idleAck    = 100 * time.Millisecond
	idleActive = 2 * time.Second
)

// Resend timeouts.
const (
	initialRTO = 200 * time.Millisecond
	minRTO     = 2 * time.Millisecond
	maxRTO     = time.Second
)

type chunkRef struct {
	ch  uint8
	seq uint32
}

type packetRec struct {
	valid bool
	seq   uint16
	n     uint8
	at    int64 // sent, in nanoseconds since the core started
	refs  [maxRefs]chunkRef
}

// SessionStats are a connection's figures.
type SessionStats struct {
	Endpoint Stats    // the Endpoint's estimates
	Counters Counters // the Endpoint's counters
	// SRTT is the smoothed round-trip time from acks.
	SRTT time.Duration
	// RTO is the current resend timeout.
	RTO time.Duration
	// Resent counts chunks of reliable data sent again.
	Resent uint64
	// FastResent counts those resent because later packets were acked.
	FastResent uint64
	// Piggybacked counts unacked chunks copied into the spare room of
	// packets sent anyway.
	Piggybacked uint64
	// UnreliableDropped counts received unreliable messages dropped
	// because the receive queue was full.
	UnreliableDropped uint64
}

type chanState struct {
	spec     chanSpec
	snd      relSend
	rcv      relRecv
	usnd     msgQueue
	urcv     msgQueue
	readable chan struct{} // signalled when there may be something to read
	writable chan struct{} // signalled when there may be room to send
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// relSend is the sending half of a reliable channel. Bytes written wait
// in queue; flush cuts them into chunks numbered from 0, each kept in a
// slot until acked.
type relSend struct {
	queue      []byte
	qhead      int
	limit      int        // most bytes queued
	slots      []sendSlot // a ring indexed by chunk modulo its length, grown up to window
	window     uint32
	base, next uint32 // oldest unacked chunk, next chunk to cut
	peerLimit  uint32 // the peer takes chunks below this
	finWanted  bool
	finCut     bool
	used       bool // written to or cut from since the last trim
	// Every chunk in flight (sent, not acked) is in one of lists, in the
	// order of its last send: lists[k] for those sent k+1 times (the
	// last for sendLevels times or more), lists[fastList] for those the
	// acks of later packets show lost. A list's chunks share a resend
	// timeout, so its head is the first due: picking a resend looks at
	// the heads only, whatever the window.
	lists [fastList + 1]chunkList
}

// sendLevels is how many resend timeouts the lists tell apart: from
// minRTO, doubling, the timeout reaches maxRTO by the tenth send.
const sendLevels = 10

// fastList is the index of the list of chunks shown lost by later acks.
const fastList = sendLevels

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

// relRecv is the receiving half: chunks from next (the first not yet read)
// to next+window are kept; frontier is the first missing one, and ready
// counts the bytes from the read position to the frontier.
type relRecv struct {
	slots     []recvSlot // a ring indexed by chunk modulo its length, grown up to window
	held      int        // slots present (received, not yet read)
	used      bool       // a chunk was stored since the last trim
	window    uint32
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

// seqBefore reports a < b for chunk sequences, which wrap.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

func newCore(cfg *resolved, now time.Time, out func([]byte)) (*core, error) {
	c := &core{
		cfg:        cfg,
		out:        out,
		start:      now,
		now:        now,
		chans:      make([]chanState, len(cfg.chans)),
		pkt:        make([]byte, 0, cfg.maxPayload),
		tokens:     cfg.rate * cfg.tick.Seconds(),
		lastRefill: now,
		lastTrim:   now,
		lastSend:   now,
		lastActive: now,
	}
	epc := cfg.endpoint
	epc.Transmit = func(_ uint16, p []byte) { c.out(p) }
	epc.Process = c.process
	ep, err := NewEndpoint(epc, 0)
	if err != nil {
		return nil, err
	}
	c.ep = ep
	c.maxRecs = epc.SentPacketsBufferSize
	c.recs = make([]packetRec, min(c.maxRecs, initialSlots))
	for i, s := range cfg.chans {
		ch := &c.chans[i]
		ch.spec = s
		ch.readable = make(chan struct{}, 1)
		ch.writable = make(chan struct{}, 1)
		if s.kind == Unreliable {
			ch.usnd = msgQueue{bufs: make([][]byte, s.queue), limit: s.queueBytes}
			ch.urcv = msgQueue{bufs: make([][]byte, s.queue), limit: s.queueBytes}
			continue
		}
		c.rel = append(c.rel, i)
		w := uint32(s.window)
		ch.snd = relSend{limit: s.sendBuffer, slots: make([]sendSlot, min(w, initialSlots)), window: w, peerLimit: w}
		ch.rcv = relRecv{slots: make([]recvSlot, min(w, initialSlots)), window: w, advert: w, msgLen: -1}
	}
	return c, nil
}

// hello sends the first packet, which carries the layout, so that a peer
// with another one fails at once rather than at the first data.
func (c *core) hello() {
	c.ackNow = true
	c.flush()
}

// stamp returns the time as nanoseconds since the core started, the
// compact form records keep.
func (c *core) stamp() int64 { return int64(c.now.Sub(c.start)) }

// since returns the time elapsed since stamp t.
func (c *core) since(t int64) time.Duration { return time.Duration(c.stamp() - t) }

// fail ends the connection with err, once.
func (c *core) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *core) setTime(now time.Time) {
	if now.After(c.now) {
		c.now = now
		c.ep.SetTime(c.now.Sub(c.start).Seconds())
	}
}

// tick runs the periodic work: the Endpoint's statistics, the ack
// timeout, resends due and acks owed, and, every trimEvery, the trim of
// buffers left from traffic that is over.
func (c *core) tick(now time.Time) {
	c.setTime(now)
	c.ep.Update(c.now.Sub(c.start).Seconds())
	c.checkAckTimeout()
	if c.now.Sub(c.lastTrim) >= trimEvery {
		c.lastTrim = c.now
		c.trim()
	}
	c.fresh = true
	c.flush()
	c.fresh = false
}

// giveUpResends is how many times a chunk must have been resent, besides
// being unacknowledged for the ack timeout, before the connection gives
// up: a process that was paused longer than the timeout gets its resends
// a chance first.
const giveUpResends = 5

// checkAckTimeout ends the connection with ErrAckTimeout if the oldest
// unacknowledged chunk of a reliable channel has waited for its ack
// longer than the ack timeout (chunks are first sent in order, so the
// oldest is at base: one look per channel).
func (c *core) checkAckTimeout() {
	if c.cfg.ackTimeout <= 0 {
		return
	}
	for _, i := range c.rel {
		s := &c.chans[i].snd
		if s.base == s.next {
			continue
		}
		slot := &s.slots[s.base%uint32(len(s.slots))]
		if !slot.acked && slot.sends > giveUpResends && c.since(slot.firstAt) >= c.cfg.ackTimeout {
			c.fail(ErrAckTimeout)
			return
		}
	}
}

// trimEvery is how often the buffers of traffic that is over are freed.
const trimEvery = time.Second

// trim frees what traffic that is over left behind: a reliable channel's
// rings shrink back to initialSlots once empty (their chunk buffers go),
// its send queue's buffer goes once empty, and an unreliable queue's
// buffers go once it has stayed empty since the last trim. A connection
// back to idle costs little more than a new one.
func (c *core) trim() {
	for i := range c.chans {
		cs := &c.chans[i]
		if cs.spec.kind == Unreliable {
			cs.usnd.trim()
			cs.urcv.trim()
			continue
		}
		cs.snd.trim()
		cs.rcv.trim()
	}
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
		s.queue, s.qhead = nil, 0
	}
	s.used = false
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
	if !c.anyAcked || greaterThan(s, c.highestAcked) {
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
		signal(cs.writable)
		if c.progress != nil {
			signal(c.progress)
		}
	}
}

// rto is the resend timeout of a chunk sent sends times.
func (c *core) rto(sends int) time.Duration {
	d := initialRTO
	if c.haveRTT {
		d = c.srtt + 4*c.rttvar + c.cfg.tick
	}
	d = max(minRTO, min(d, maxRTO))
	for i := 1; i < sends && d < maxRTO; i++ {
		d *= 2
	}
	return min(d, maxRTO)
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
			if n > c.cfg.chunkMax || len(p) < chunkEntryHeader+n || flags&^flagFIN != 0 {
				return fmt.Errorf("%w: bad chunk", ErrProtocol)
			}
			if !seqBefore(seq, cs.rcv.next+cs.rcv.window) {
				return errOutOfWindow
			}
			if apply {
				cs.rcv.store(seq, flags&flagFIN != 0, p[chunkEntryHeader:chunkEntryHeader+n], cs)
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
					signal(cs.writable)
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
	r.used = true
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

// atEOF reports whether the stream has ended and everything was read.
func (r *relRecv) atEOF() bool { return r.finReady && r.ready == 0 }

// queued returns the bytes waiting to be cut into chunks.
func (s *relSend) queued() int { return len(s.queue) - s.qhead }

// room returns how many more bytes the queue takes.
func (s *relSend) room() int { return s.limit - s.queued() }

// write queues b, which must fit in room.
func (s *relSend) write(b ...[]byte) {
	need := 0
	for _, p := range b {
		need += len(p)
	}
	if s.qhead > 0 && len(s.queue)+need > cap(s.queue) {
		n := copy(s.queue, s.queue[s.qhead:])
		s.queue = s.queue[:n]
		s.qhead = 0
	}
	for _, p := range b {
		s.queue = append(s.queue, p...)
	}
	s.used = true
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

// maxBurstPackets bounds a burst, so that one does not overflow a socket's
// receive buffer (Linux's default holds about 200 KB).
const maxBurstPackets = 128

// rate is the budget in bytes per second: the configured rate, but no
// more than keeps the packets of one RTT within what the Endpoint
// remembers, so that every packet in flight can still be acked (beyond,
// acks are lost, data is resent for nothing, and the resends push still
// more packets out).
func (c *core) rate() float64 {
	if !c.haveRTT || c.srtt <= 0 {
		return c.cfg.rate
	}
	tracked := float64(c.maxRecs - c.maxRecs/4) // a margin for bursts, acks and resends
	return min(c.cfg.rate, tracked*float64(c.cfg.maxPacket)/c.srtt.Seconds())
}

// refill adds the tokens earned since the last refill, up to two ticks'
// worth.
func (c *core) refill() {
	c.tokens = min(c.burst(), c.tokens+c.rate()*c.now.Sub(c.lastRefill).Seconds())
	c.lastRefill = c.now
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
	seq := c.transmit(c.pkt)
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
// record, and returns its sequence.
func (c *core) transmit(p []byte) uint16 {
	seq := c.ep.NextSequence()
	rec := &c.recs[int(seq)%len(c.recs)]
	if rec.valid && rec.n > 0 && len(c.recs) < c.maxRecs {
		// A packet with data still unacked would be forgotten: make room.
		c.growRecs()
		rec = &c.recs[int(seq)%len(c.recs)]
	}
	rec.valid, rec.seq, rec.at, rec.n = true, seq, c.stamp(), 0
	_ = c.ep.SendPacket(p)
	c.tokens -= float64(len(p) + MaxPacketHeaderBytes)
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
	if c.data || owed {
		c.sendPacket()
	}
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
				c.transmit(c.big)
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
		c.addChunk(i, slot, false)
		c.stats.Resent++
		if fast {
			c.stats.FastResent++
		}
		return true
	}
	w := uint32(len(s.slots))
	if !seqBefore(s.next, s.peerLimit) || s.next-s.base >= w && !s.grow() {
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
	*slot = sendSlot{seq: s.next, data: append(slot.data[:0], s.queue[s.qhead:s.qhead+n]...), fin: fin, firstAt: c.stamp()}
	s.qhead += n
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	}
	s.finCut = s.finCut || fin
	s.next++
	if n > 0 {
		signal(cs.writable)
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
	if oldest := c.highestAcked - uint16(len(c.recs)); lessThan(c.lostScan, oldest) {
		c.lostScan = oldest // older records are gone
	}
	end := c.ep.NextSequence()
	for c.lostScan != end && greaterThan(c.highestAcked, c.lostScan+2) {
		p := c.lostScan
		c.lostScan++
		rec := &c.recs[int(p)%len(c.recs)]
		if !rec.valid || rec.seq != p {
			continue
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

// piggybackLooks bounds the chunks piggyback looks at for a packet.
const piggybackLooks = 4 * maxRefs

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

// sessionStats returns the figures.
func (c *core) sessionStats() SessionStats {
	st := c.stats
	st.Endpoint = c.ep.Stats()
	st.Counters = c.ep.Counters()
	st.SRTT = c.srtt
	st.RTO = c.rto(1)
	return st
}
