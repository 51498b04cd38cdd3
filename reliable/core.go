package reliable

import (
	"time"

	"github.com/gonetcode/netcode/reliable/endpoint"
)

// core is the I/O-free state of a connection carrying channels over an
// Endpoint: what each channel has queued, in flight and received, and
// which chunks each sent packet carried. Its owner serialises every call,
// feeds it received datagrams and the time, and gives it out, the sink of
// datagrams to send.
type core struct {
	cfg   *resolved
	ep    *endpoint.Endpoint
	out   func([]byte)
	start time.Time
	now   time.Time
	err   error // fatal: the connection must end

	chans []chanState
	rel   []int // indices of the reliable channels

	recs      []packetRec // by packet sequence modulo len, grown up to maxRecs
	maxRecs   int         // the Endpoint's sent packets buffer: acks come for no older packet
	pkt       []byte      // payload being built
	big       []byte      // payload of an unreliable message larger than a packet
	refs      []chunkRef  // chunks in pkt
	lastFlags int         // index in pkt of the flags of its last chunk entry
	data      bool        // pkt carries more than the layout and windows
	rr        int         // round-robin start among reliable channels
	fresh     bool        // this flush was started by a tick

	tokens     float64
	lastRefill time.Time
	cc         congestion

	lastTrim time.Time

	srtt, rttvar time.Duration
	haveRTT      bool
	highestAcked uint16
	anyAcked     bool
	lostScan     uint16 // the next sent packet markLost looks at
	looks        uint64 // in-flight chunks looked at to pick resends and copies (tests)

	recvSinceSend int
	owedAt        time.Time // when recvSinceSend last became non-zero
	ackNow        bool      // a packet came out of order: ack at once
	lastRecvSeq   uint16    // the Endpoint sequence of the last packet processed
	lastSend      time.Time
	lastActive    time.Time // when data was last sent or received

	stats    SessionStats
	progress chan struct{} // signalled when acks free send slots or data arrives (for Close)
}

type chunkRef struct {
	ch  uint8
	seq uint32
}

type packetRec struct {
	valid  bool
	flight bool // a data packet counted in the congestion window's flight
	seq    uint16
	n      uint8
	bytes  int32 // on the wire, as the send budget counts them
	at     int64 // sent, in nanoseconds since the core started
	refs   [maxRefs]chunkRef
}

// SessionStats are a connection's figures.
type SessionStats struct {
	// Endpoint holds the Endpoint's estimates and counters.
	Endpoint endpoint.Stats
	// SRTT is the smoothed round-trip time from acks.
	SRTT time.Duration
	// RTO is the current resend timeout.
	RTO time.Duration
	// CongestionWindow is the bytes of data packets the congestion
	// controller lets be in flight, found from the acks and losses (see
	// Config.SendRate).
	CongestionWindow int
	// PacingRate is the rate, in bytes per second, at which the send
	// budget paces packets: from the congestion window and the smoothed
	// RTT, capped by Config.SendRate.
	PacingRate float64
	// CongestionCuts counts losses that cut the congestion window.
	CongestionCuts uint64
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
		lastRefill: now,
		lastTrim:   now,
		lastSend:   now,
		lastActive: now,
	}
	epc := cfg.endpoint
	epc.Transmit = func(_ uint16, p []byte) { c.out(p) }
	epc.Process = c.process
	ep, err := endpoint.New(epc, 0)
	if err != nil {
		return nil, err
	}
	c.ep = ep
	c.maxRecs = epc.SentPacketsBufferSize
	c.recs = make([]packetRec, min(c.maxRecs, initialSlots))
	c.cc = newCongestion(cfg.maxPacket, c.trackedPackets())
	c.tokens = c.burst()
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
		w, mw := uint32(s.window), uint32(s.maxWindow)
		// The peer's window may grow to what this end's grows to.
		ch.snd = relSend{limit: s.sendBuffer, slots: make([]sendSlot, min(w, initialSlots)), window: mw, peerLimit: w}
		ch.rcv = relRecv{slots: make([]recvSlot, min(w, initialSlots)), window: w, maxWindow: mw, advert: w, msgLen: -1}
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

// readDone follows a read of r that left it due to advertise its window
// or to tune it (relRecv.tuneDue): it tunes, then sends the window if it
// opened.
func (c *core) readDone(now time.Time, r *relRecv) {
	c.setTime(now)
	if r.tuneDue() {
		r.tune(c.stamp(), c.srtt, c.haveRTT)
	}
	if r.advertise {
		c.flush()
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

// sessionStats returns the figures.
func (c *core) sessionStats() SessionStats {
	c.ep.Update(c.now.Sub(c.start).Seconds()) // no timer runs it while idle
	st := c.stats
	st.Endpoint = c.ep.Stats()
	st.SRTT = c.srtt
	st.RTO = c.rto(1)
	st.CongestionWindow = int(c.cc.cwnd)
	st.PacingRate = c.rate()
	st.CongestionCuts = c.cc.cuts
	return st
}

// seqNewer reports whether packet sequence s1 is after s2, as the
// Endpoint orders them (they wrap).
func seqNewer(s1, s2 uint16) bool {
	return (s1 > s2 && s1-s2 <= 32768) || (s1 < s2 && s2-s1 > 32768)
}

// seqOlder reports whether packet sequence s1 is before s2.
func seqOlder(s1, s2 uint16) bool { return seqNewer(s2, s1) }
