package layer

import (
	"encoding/binary"
	"time"
)

// chunk holds one datagram being sent (both headers and a fragment) or
// one fragment received. Chunks are recycled, so a connection in steady
// state allocates none.
type chunk [MaxDatagram]byte

// ackEvery is how many reliable fragments may arrive before an ack-only
// datagram goes out at once rather than after the ack delay: a quarter of
// the sender's window, so that a transfer is not paced by the delay.
const ackEvery = MaxInFlight / 4

// keepChunks is how many free chunks a Transport keeps for reuse.
const keepChunks = 2 * MaxInFlight

// keepBuffers is how many free message buffers of several fragments a
// Transport keeps for reuse, and keepBufferBytes the largest it keeps: a
// connection that exchanges messages of a few fragments allocates none,
// for at most 64 KiB kept.
const (
	keepBuffers     = 4
	keepBufferBytes = 16 << 10
)

// sendItem is a reliable message queued for sending
// (cn_socket_send_queue_item_t): its fragments go out in order, as the
// in-flight window allows.
type sendItem struct {
	seq   uint16
	next  int // index of the next fragment to hand out
	count int
	final int // size of the last fragment
	data  []byte
	c     *chunk // data's memory when it is one of the Transport's chunks
}

// fragment is a reliable fragment sent and not yet acknowledged
// (cn_fragment_t): c holds the datagram, whose ack header is rewritten
// for each resend.
type fragment struct {
	id      uint64
	seq     uint16 // message sequence
	index   uint16
	time    float64 // when last sent (ack-system time)
	first   float64 // when first sent
	resends int
	n       int // fragment data bytes
	c       *chunk
}

// Transport is one connection's ack system and reliability transport
// (cn_transport_t). See the package documentation for how it differs
// from cute_net.h's, always compatibly on the wire.
type Transport struct {
	cfg        Config
	resend     float64 // seconds, the float32 value as the C code compares it
	ackDelay   float64 // seconds
	ackTimeout float64 // seconds; negative: never
	maxFrags   int     // fragments of the largest message
	emit       func([]byte)

	a       acks
	last    time.Time
	scratch chunk // fire-and-forget and ack-only datagrams are built here

	// Sending.
	relSend, fafSend uint16
	queue            ring[sendItem]
	queueBytes       int
	inFlight         []fragment
	fragID           uint64
	sentFrags        seqBuf[uint64] // ack-system sequence → fragment id

	// Receiving.
	rel, faf assembly
	held     int // bytes held for reassembly and for the reader
	owe      bool
	oweSince float64
	owed     int     // reliable fragments taken since the last datagram sent
	heard    float64 // when the last datagram was taken (ack-system time)
	stats    Stats

	free    []*chunk
	entries []*entry
	bufs    [][]byte // free message buffers
}

// Stats counts what a Transport did that its owner may want to observe.
type Stats struct {
	// Refused counts datagrams refused as malformed, too large or stale.
	Refused uint64
	// Busy counts fragments refused because MaxBufferedBytes was held.
	Busy uint64
	// Dropped counts fire-and-forget messages lost to a full read queue or
	// evicted incomplete.
	Dropped uint64
	// Resent counts reliable fragments sent again.
	Resent uint64
	// AckOnly counts ack-only datagrams sent.
	AckOnly uint64
}

// New makes a Transport at time now. emit receives every datagram it
// sends, during the call that sends it; the slice is valid only until
// emit returns.
func New(now time.Time, cfg Config, emit func([]byte)) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:        cfg,
		resend:     float64(float32(cfg.ResendRate.Seconds())),
		ackDelay:   cfg.AckDelay.Seconds(),
		ackTimeout: cfg.AckTimeout.Seconds(),
		maxFrags:   (cfg.MaxMessageBytes + FragmentBytes - 1) / FragmentBytes,
		emit:       emit,
		last:       now,
		inFlight:   make([]fragment, 0, MaxInFlight),
	}
	t.a.init()
	t.sentFrags.init(QueueEntries)
	t.rel.entries.init(ackBuffer)
	t.faf.entries.init(ackBuffer)
	return t, nil
}

// Config returns the configuration in effect, defaults filled in.
func (t *Transport) Config() Config { return t.cfg }

// Stats returns the counters.
func (t *Transport) Stats() Stats { return t.stats }

// RTT returns the round-trip time estimate.
func (t *Transport) RTT() time.Duration { return time.Duration(t.a.rtt * float64(time.Millisecond)) }

// PacketLoss returns the packet loss estimate, 0 to 1.
func (t *Transport) PacketLoss() float64 { return t.a.loss }

// Unacked returns the number of reliable fragments sent and not yet
// acknowledged.
func (t *Transport) Unacked() int { return len(t.inFlight) }

// Queued returns the number of reliable messages not yet fully handed out
// as fragments.
func (t *Transport) Queued() int { return t.queue.n }

// Buffered returns the bytes held for reassembly and for the reader.
func (t *Transport) Buffered() int { return t.held }

// getChunk returns a chunk, recycled when one is free.
func (t *Transport) getChunk() *chunk {
	if n := len(t.free); n > 0 {
		c := t.free[n-1]
		t.free = t.free[:n-1]
		return c
	}
	return new(chunk)
}

// putChunk recycles c.
func (t *Transport) putChunk(c *chunk) {
	if c != nil && len(t.free) < keepChunks {
		t.free = append(t.free, c)
	}
}

// getBuffer returns an empty buffer of capacity n or more, recycled when
// one is free.
func (t *Transport) getBuffer(n int) []byte {
	for i, b := range t.bufs {
		if cap(b) >= n {
			last := len(t.bufs) - 1
			t.bufs[i] = t.bufs[last]
			t.bufs[last] = nil
			t.bufs = t.bufs[:last]
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// putBuffer recycles b if it is worth keeping.
func (t *Transport) putBuffer(b []byte) {
	if cap(b) <= keepBufferBytes && len(t.bufs) < keepBuffers {
		t.bufs = append(t.bufs, b)
	}
}

// send puts the ack header in front of the transport header and data at
// buf[AckHeaderBytes:AckHeaderBytes+n] and hands the datagram to emit. It
// returns the ack-system sequence it used.
func (t *Transport) send(buf []byte, n int) uint16 {
	h, seq, _ := t.a.header(n) // n ≤ HeaderBytes+FragmentBytes < MaxAckPayload
	copy(buf, h[:])
	t.owe, t.owed = false, 0 // every header carries the acks so far
	t.emit(buf[:AckHeaderBytes+n])
	return seq
}

// putHeader writes a transport header at b.
func putHeader(b []byte, reliable bool, seq, count, index, size uint16) {
	b[0] = 0
	if reliable {
		b[0] = 1
	}
	binary.LittleEndian.PutUint16(b[1:], seq)
	binary.LittleEndian.PutUint16(b[3:], count)
	binary.LittleEndian.PutUint16(b[5:], index)
	binary.LittleEndian.PutUint16(b[7:], size)
}

// Send sends msg: a fire-and-forget message at once, in as many datagrams
// as it has fragments; a reliable one is queued, and its fragments go out
// in the following Updates. It fails with ErrEmpty, ErrTooLarge or
// ErrSendQueueFull.
func (t *Transport) Send(msg []byte, reliable bool) error {
	n := len(msg)
	switch {
	case n == 0:
		return ErrEmpty
	case n > t.cfg.MaxMessageBytes:
		return ErrTooLarge
	case !reliable:
		t.sendFireAndForget(msg)
		return nil
	case t.queue.n == QueueEntries || t.queueBytes+n > t.cfg.MaxSendQueueBytes:
		return ErrSendQueueFull
	}
	count := (n + FragmentBytes - 1) / FragmentBytes
	it := sendItem{seq: t.relSend, count: count, final: n - (count-1)*FragmentBytes}
	if n <= FragmentBytes {
		it.c = t.getChunk()
		it.data = it.c[:copy(it.c[:], msg)]
	} else {
		it.data = append(t.getBuffer(n), msg...)
	}
	t.relSend++
	t.queueBytes += n
	t.queue.push(it)
	return nil
}

// sendFireAndForget sends msg's fragments. Unlike cute_net.h, whose last
// fragment of a message of k·1100 bytes is empty (so that its receiver
// loses 1100 bytes), every fragment carries its data: the count is
// ceil(n/1100), as for reliable messages, which every C receiver
// reassembles whole.
func (t *Transport) sendFireAndForget(msg []byte) {
	count := (len(msg) + FragmentBytes - 1) / FragmentBytes
	seq := t.fafSend
	t.fafSend++
	b := t.scratch[:]
	for i := range count {
		part := msg[i*FragmentBytes : min(len(msg), (i+1)*FragmentBytes)]
		putHeader(b[AckHeaderBytes:], false, seq, uint16(count), uint16(i), uint16(len(part)))
		copy(b[AckHeaderBytes+HeaderBytes:], part)
		t.send(b, HeaderBytes+len(part))
	}
}

// sendAckOnly sends a datagram that carries only the ack header. Its
// transport header is fire-and-forget with fragment count 0 and index 1,
// the one header a cute_net.h receiver records (and so acknowledges in
// turn) and then refuses at once ("Fragment index out of bounds": index >
// count), before it allocates, copies or delivers anything; both
// cn_client_update and cn_server_update ignore that error. So a Cute
// Framework game never sees it as a message, and its resends stop. (Count
// 0 with index 0 would not do: it passes that check and overflows.) The
// datagram is the 17 bytes the C receiver reads: no over-read.
func (t *Transport) sendAckOnly() {
	b := t.scratch[:]
	putHeader(b[AckHeaderBytes:], false, 0, 0, 1, 0)
	t.send(b, HeaderBytes)
	t.stats.AckOnly++
}

// isAckOnly reports whether a transport header is sendAckOnly's.
func isAckOnly(count, index, size uint16, data int) bool {
	return count == 0 && index == 1 && size == 0 && data == 0
}

// Update advances the Transport to now (cn_transport_update): it takes
// the acks received since the last Update, resends what is due, sends
// queued reliable fragments the in-flight window allows, and sends an
// ack-only datagram when one is owed. It fails with ErrAckTimeout when the
// peer has stopped acknowledging; the connection should then end.
func (t *Transport) Update(now time.Time) error {
	if d := now.Sub(t.last); d > 0 {
		t.a.update(d.Seconds())
		t.last = now
	} else {
		t.a.update(0)
	}
	t.takeAcks()
	for i := range t.inFlight {
		f := &t.inFlight[i]
		if f.time+t.resend >= t.a.time {
			continue
		}
		seq := t.send(f.c[:], HeaderBytes+f.n)
		*t.sentFrags.insert(seq, keep[uint64]{}) = f.id
		f.time = t.a.time
		f.resends++
		t.stats.Resent++
	}
	t.sendQueued()
	if t.ackTimeout >= 0 {
		for i := range t.inFlight {
			f := &t.inFlight[i]
			if f.resends >= giveUpResends && t.heard-f.first >= t.ackTimeout {
				return ErrAckTimeout
			}
		}
	}
	if t.owe && !t.cfg.PiggybackOnly && (t.a.time-t.oweSince >= t.ackDelay || t.owed >= ackEvery) {
		t.sendAckOnly()
	}
	return nil
}

// takeAcks removes the fragments the acks since the last Update
// acknowledge (cn_transport_process_acks), each by moving the last
// in-flight fragment into its place, which is the order later resends
// follow.
func (t *Transport) takeAcks() {
	for _, s := range t.a.acked {
		id := t.sentFrags.find(s)
		if id == nil {
			continue
		}
		for j := 0; j < len(t.inFlight); j++ {
			if t.inFlight[j].id == *id {
				t.putChunk(t.inFlight[j].c)
				last := len(t.inFlight) - 1
				t.inFlight[j] = t.inFlight[last]
				t.inFlight[last] = fragment{}
				t.inFlight = t.inFlight[:last]
				break
			}
		}
		t.sentFrags.remove(s, keep[uint64]{})
	}
	t.a.acked = t.a.acked[:0]
}

// sendQueued hands out queued reliable fragments, in queue and fragment
// order, while fewer than MaxInFlight are unacknowledged
// (s_transport_send_fragments).
func (t *Transport) sendQueued() {
	for len(t.inFlight) < MaxInFlight && t.queue.n > 0 {
		it := t.queue.front()
		for ; it.next < it.count && len(t.inFlight) < MaxInFlight; it.next++ {
			size := FragmentBytes
			if it.next == it.count-1 {
				size = it.final
			}
			c := t.getChunk()
			putHeader(c[AckHeaderBytes:], true, it.seq, uint16(it.count), uint16(it.next), uint16(size))
			copy(c[AckHeaderBytes+HeaderBytes:], it.data[it.next*FragmentBytes:it.next*FragmentBytes+size])
			seq := t.send(c[:], HeaderBytes+size)
			*t.sentFrags.insert(seq, keep[uint64]{}) = t.fragID
			t.inFlight = append(t.inFlight, fragment{
				id: t.fragID, seq: it.seq, index: uint16(it.next),
				time: t.a.time, first: t.a.time, n: size, c: c,
			})
			t.fragID++
		}
		if it.next < it.count {
			return
		}
		t.queueBytes -= len(it.data)
		if it.c != nil {
			t.putChunk(it.c)
		} else {
			t.putBuffer(it.data)
		}
		t.queue.pop()
	}
}

// NextDue returns when Update is next needed: the zero Time when nothing
// is due until a datagram arrives or a message is sent.
func (t *Transport) NextDue() time.Time {
	if t.queue.n > 0 && (len(t.inFlight) < MaxInFlight || len(t.a.acked) > 0) {
		// Queued fragments can go out, or will once the acks just taken
		// free the window.
		return t.last
	}
	due := -1.0 // seconds after t.a.time
	earlier := func(at float64) {
		if d := at - t.a.time; due < 0 || d < due {
			due = max(d, 0)
		}
	}
	for i := range t.inFlight {
		earlier(t.inFlight[i].time + t.resend)
	}
	if t.owe && !t.cfg.PiggybackOnly {
		if t.owed >= ackEvery {
			return t.last
		}
		earlier(t.oweSince + t.ackDelay)
	}
	if due < 0 {
		return time.Time{}
	}
	// Resends go out once the time is past due (strictly); the
	// nanosecond after the rounded-up instant is.
	return t.last.Add(time.Duration(due*float64(time.Second)) + time.Nanosecond)
}
