package endpoint

import (
	"errors"
	"fmt"
	"math"
)

type sentPacket struct {
	time  float64
	bytes int
	acked bool
}

type receivedPacket struct {
	time  float64
	bytes int
}

type reassembly struct {
	count, received int
	headerBytes     int
	payloadBytes    int
	have            [maxFragmentsLimit / 64]uint64
	data            []byte // MaxPacketHeaderBytes of room, then the payload; kept for reuse
}

func resetReassembly(r *reassembly) {
	r.count, r.received, r.headerBytes, r.payloadBytes = 0, 0, 0, 0
	r.have = [maxFragmentsLimit / 64]uint64{}
}

// ErrPacketTooLarge is returned by SendPacket for a payload above
// MaxPacketSize (or needing more than MaxFragments fragments).
var ErrPacketTooLarge = errors.New("netcode/reliable/endpoint: packet too large")

// ErrEmptyPacket is returned by SendPacket for an empty payload.
var ErrEmptyPacket = errors.New("netcode/reliable/endpoint: empty packet")

// Endpoint is one end of a reliable connection, byte for byte compatible
// with mas-bandwidth/reliable 1.4.0: it puts a header with acks on every
// packet, fragments and reassembles large packets, reports which of its
// packets the peer acknowledged, and estimates RTT, packet loss and
// bandwidth. It does no I/O and reads no clock: time is given in seconds
// to New and Update, packets go out through Config.Transmit and come
// in through ReceivePacket.
//
// An Endpoint is not safe for concurrent use.
type Endpoint struct {
	cfg      Config
	time     float64
	sequence uint16
	acks     []uint16
	counters counterSet
	stats    Stats

	rttHistory []float32
	sent       seqBuffer[sentPacket]
	received   seqBuffer[receivedPacket]
	reassembly seqBuffer[reassembly]
	scratch    []byte
}

// New returns an endpoint with cfg (zero fields defaulted) at time
// now, in seconds.
func New(cfg Config, now float64) (*Endpoint, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:        cfg,
		time:       now,
		acks:       make([]uint16, 0, cfg.AckBufferSize),
		rttHistory: make([]float32, cfg.RTTHistorySize),
		sent:       newSeqBuffer[sentPacket](cfg.SentPacketsBufferSize),
		received:   newSeqBuffer[receivedPacket](cfg.ReceivedPacketsBufferSize),
		reassembly: newSeqBuffer[reassembly](cfg.FragmentReassemblyBufferSize),
		scratch:    make([]byte, max(cfg.MaxPacketSize+MaxPacketHeaderBytes, FragmentHeaderBytes+MaxPacketHeaderBytes+cfg.FragmentSize)),
	}
	for i := range e.rttHistory {
		e.rttHistory[i] = -1
	}
	return e, nil
}

// NextSequence returns the sequence the next sent packet will have.
func (e *Endpoint) NextSequence() uint16 { return e.sequence }

// Stats returns the estimates as of the last Update (RTT as of the last
// ack) and the counters as of now.
func (e *Endpoint) Stats() Stats {
	s := e.stats
	c := &e.counters
	s.PacketsSent = c[counterPacketsSent]
	s.PacketsReceived = c[counterPacketsReceived]
	s.PacketsAcked = c[counterPacketsAcked]
	s.PacketsStale = c[counterPacketsStale]
	s.PacketsInvalid = c[counterPacketsInvalid]
	s.PacketsTooLargeToSend = c[counterPacketsTooLargeToSend]
	s.PacketsTooLargeToReceive = c[counterPacketsTooLargeToReceive]
	s.FragmentsSent = c[counterFragmentsSent]
	s.FragmentsReceived = c[counterFragmentsReceived]
	s.FragmentsInvalid = c[counterFragmentsInvalid]
	s.PacketsDuplicate = c[counterPacketsDuplicate]
	return s
}

// Acks returns the sequences of sent packets acknowledged since the last
// ClearAcks, in the order the acks arrived. The slice is the endpoint's
// own: valid until the next ReceivePacket or ClearAcks.
func (e *Endpoint) Acks() []uint16 { return e.acks }

// ClearAcks empties the ack list. Call it after reading Acks: once the
// list holds AckBufferSize acks, further acks are left for later headers.
func (e *Endpoint) ClearAcks() { e.acks = e.acks[:0] }

// Reset returns the endpoint to its state at creation, except that, as in
// the reference, the RTT, its history and the bandwidth estimates stay.
func (e *Endpoint) Reset() {
	e.acks = e.acks[:0]
	e.sequence = 0
	e.counters = counterSet{}
	for i := range e.reassembly.entries {
		resetReassembly(&e.reassembly.entries[i])
	}
	e.sent.reset()
	e.received.reset()
	e.reassembly.reset()
}

// SendPacket sends payload as one packet, or as fragments if it is longer
// than FragmentAbove, through Config.Transmit. A payload over MaxPacketSize
// is counted and refused without using a sequence number.
func (e *Endpoint) SendPacket(payload []byte) error {
	if len(payload) == 0 {
		return ErrEmptyPacket
	}
	cfg := &e.cfg
	n := len(payload)
	fragments := (n + cfg.FragmentSize - 1) / cfg.FragmentSize
	if n > cfg.MaxPacketSize || (n > cfg.FragmentAbove && fragments > cfg.MaxFragments) {
		e.counters[counterPacketsTooLargeToSend]++
		return fmt.Errorf("%w: %d bytes, %s's maximum is %d", ErrPacketTooLarge, n, cfg.Name, cfg.MaxPacketSize)
	}
	seq := e.sequence
	e.sequence++
	ack, ackBits := e.received.ackBits()
	if sp := e.sent.insert(seq); sp != nil { // never stale: sent.sequence follows e.sequence
		*sp = sentPacket{time: e.time, bytes: cfg.PacketHeaderSize + n}
	}

	buf := e.scratch
	if n <= cfg.FragmentAbove {
		h := putPacketHeader(buf, seq, ack, ackBits)
		copy(buf[h:], payload)
		e.transmit(seq, buf[:h+n])
	} else {
		var hdr [MaxPacketHeaderBytes]byte
		hn := putPacketHeader(hdr[:], seq, ack, ackBits)
		for id := range fragments {
			buf[0] = fragmentPrefix
			buf[1], buf[2] = byte(seq), byte(seq>>8)
			buf[3], buf[4] = byte(id), byte(fragments-1)
			p := FragmentHeaderBytes
			if id == 0 {
				p += copy(buf[p:], hdr[:hn])
			}
			chunk := payload[id*cfg.FragmentSize : min(n, (id+1)*cfg.FragmentSize)]
			p += copy(buf[p:], chunk)
			e.transmit(seq, buf[:p])
			e.counters[counterFragmentsSent]++
		}
	}
	e.counters[counterPacketsSent]++
	return nil
}

func (e *Endpoint) transmit(seq uint16, p []byte) {
	if e.cfg.Transmit != nil {
		e.cfg.Transmit(seq, p)
	}
}

// ReceivePacket takes one packet or fragment from the wire. Invalid,
// stale, duplicate and oversized input is counted and dropped; nothing in
// b can make it panic or allocate beyond the configured buffers. b is not
// retained.
func (e *Endpoint) ReceivePacket(b []byte) {
	cfg := &e.cfg
	if len(b) == 0 {
		return
	}
	if len(b) > cfg.MaxPacketSize+MaxPacketHeaderBytes+FragmentHeaderBytes {
		e.counters[counterPacketsTooLargeToReceive]++
		return
	}
	if b[0]&prefixFragment != 0 {
		e.receiveFragment(b)
		return
	}
	e.counters[counterPacketsReceived]++
	h, hn, ok := readPacketHeader(b)
	if !ok {
		e.counters[counterPacketsInvalid]++
		return
	}
	if len(b)-hn > cfg.MaxPacketSize {
		e.counters[counterPacketsTooLargeToReceive]++
		return
	}
	if !e.received.testInsert(h.sequence) {
		e.counters[counterPacketsStale]++
		return
	}
	if e.received.exists(h.sequence) {
		e.counters[counterPacketsDuplicate]++
		return
	}
	if cfg.Process != nil && !cfg.Process(h.sequence, b[hn:]) {
		return
	}
	rp := e.received.insert(h.sequence)
	e.reassembly.advance(h.sequence, resetReassembly)
	*rp = receivedPacket{time: e.time, bytes: cfg.PacketHeaderSize + len(b)}
	e.processAcks(h.ack, h.ackBits)
}

func (e *Endpoint) processAcks(ack uint16, bits uint32) {
	for i := 0; i < 32; i, bits = i+1, bits>>1 {
		if bits&1 == 0 {
			continue
		}
		s := ack - uint16(i)
		sp := e.sent.find(s)
		if sp == nil || sp.acked || len(e.acks) >= e.cfg.AckBufferSize {
			continue
		}
		e.acks = append(e.acks, s)
		e.counters[counterPacketsAcked]++
		sp.acked = true
		// float32 conversions at each step keep the reference's rounding
		// and stop the compiler from fusing multiply and add.
		rtt := float32(float32(e.time-sp.time) * 1000)
		e.rttHistory[int(s)%len(e.rttHistory)] = rtt
		st := &e.stats
		if (st.RTT == 0 && rtt > 0) || math.Abs(float64(st.RTT-rtt)) < snapEpsilon {
			st.RTT = rtt
		} else {
			st.RTT += float32((rtt - st.RTT) * e.cfg.RTTSmoothingFactor)
		}
	}
}

func (e *Endpoint) receiveFragment(b []byte) {
	cfg := &e.cfg
	f, ok := readFragmentHeader(b, cfg.MaxFragments, cfg.FragmentSize)
	if !ok {
		e.counters[counterFragmentsInvalid]++
		return
	}
	if e.received.exists(f.sequence) {
		return
	}
	r := e.reassembly.find(f.sequence)
	if r == nil {
		r = e.reassembly.insertWithCleanup(f.sequence, resetReassembly)
		if r == nil {
			e.counters[counterFragmentsInvalid]++
			return
		}
		e.received.advance(f.sequence, nil)
		resetReassembly(r)
		r.count = f.count
		if need := MaxPacketHeaderBytes + f.count*cfg.FragmentSize; cap(r.data) < need {
			r.data = make([]byte, need, MaxPacketHeaderBytes+cfg.MaxFragments*cfg.FragmentSize)
		} else {
			r.data = r.data[:need]
		}
	}
	if f.count != r.count {
		e.counters[counterFragmentsInvalid]++
		return
	}
	word, bit := f.id/64, uint64(1)<<(f.id%64)
	if r.have[word]&bit != 0 {
		return
	}
	r.have[word] |= bit
	r.received++

	data := b[FragmentHeaderBytes:]
	if f.id == 0 {
		r.headerBytes = putPacketHeader(r.data[MaxPacketHeaderBytes-f.headerBytes:], f.sequence, f.ack, f.ackBits)
		data = data[f.headerBytes:]
	}
	if f.id == r.count-1 {
		r.payloadBytes = (r.count-1)*cfg.FragmentSize + len(data)
	}
	copy(r.data[MaxPacketHeaderBytes+f.id*cfg.FragmentSize:], data)

	if r.received == r.count {
		e.ReceivePacket(r.data[MaxPacketHeaderBytes-r.headerBytes : MaxPacketHeaderBytes+r.payloadBytes])
		e.reassembly.remove(f.sequence, resetReassembly)
	}
	e.counters[counterFragmentsReceived]++
}

// snapEpsilon is the reference's threshold (compared in double) under which
// a smoothed value jumps to the new one.
const snapEpsilon = 0.00001

// rttMinSentinel is the reference's starting minimum RTT, meaning none.
const rttMinSentinel = 10000

// SetTime sets the endpoint's time, in seconds, without recomputing the
// statistics: for callers that take packets in and out more often than
// they call Update, so that sent times and RTT samples stay precise.
func (e *Endpoint) SetTime(now float64) { e.time = now }

// Update sets the endpoint's time, in seconds, and recomputes the RTT
// statistics, packet loss and bandwidth estimates as the reference does,
// in float32 with its rounding.
func (e *Endpoint) Update(now float64) {
	e.time = now
	st := &e.stats

	minRTT, maxRTT, sum := float32(rttMinSentinel), float32(0), float32(0)
	count := 0
	for _, r := range e.rttHistory {
		if r >= 0 {
			minRTT = min(minRTT, r)
			maxRTT = max(maxRTT, r)
			sum += r
			count++
		}
	}
	if minRTT == rttMinSentinel {
		minRTT = 0
	}
	st.RTTMin, st.RTTMax, st.RTTAvg = minRTT, maxRTT, 0
	st.JitterAvgVsMinRTT, st.JitterMaxVsMinRTT, st.JitterStddevVsAvg = 0, 0, 0
	if count > 0 {
		st.RTTAvg = sum / float32(count)
		var jsum, jmax, dsum float32
		for _, r := range e.rttHistory {
			if r >= 0 {
				d := r - minRTT
				jsum += d
				jmax = max(jmax, d)
				dev := r - st.RTTAvg
				dsum += float32(dev * dev)
			}
		}
		st.JitterAvgVsMinRTT = jsum / float32(count)
		st.JitterMaxVsMinRTT = jmax
		st.JitterStddevVsAvg = float32(math.Sqrt(float64(dsum / float32(count))))
	}

	// Packet loss and bandwidth look at the older half of each window.
	sentBase := e.sent.sequence - uint16(e.cfg.SentPacketsBufferSize)
	sentSamples := e.cfg.SentPacketsBufferSize / 2
	sent, dropped := 0, 0
	var sentBW, ackedBW window
	for i := range sentSamples {
		sp := e.sent.find(sentBase + uint16(i))
		if sp == nil {
			continue
		}
		sent++
		sentBW.add(sp.time, sp.bytes)
		if sp.acked {
			ackedBW.add(sp.time, sp.bytes)
		} else {
			dropped++
		}
	}
	if sent > 0 {
		loss := float32(float32(dropped) / float32(sent) * 100)
		st.PacketLoss = smooth(st.PacketLoss, loss, e.cfg.PacketLossSmoothingFactor)
	} else {
		st.PacketLoss = 0
	}
	recvBase := e.received.sequence - uint16(e.cfg.ReceivedPacketsBufferSize)
	var recvBW window
	for i := range e.cfg.ReceivedPacketsBufferSize / 2 {
		if rp := e.received.find(recvBase + uint16(i)); rp != nil {
			recvBW.add(rp.time, rp.bytes)
		}
	}
	sentBW.update(&st.SentKbps, e.cfg.BandwidthSmoothingFactor)
	recvBW.update(&st.ReceivedKbps, e.cfg.BandwidthSmoothingFactor)
	ackedBW.update(&st.AckedKbps, e.cfg.BandwidthSmoothingFactor)
}

// smooth moves old toward v by factor, or snaps to v when they are within
// snapEpsilon (the rule for packet loss and bandwidth).
func smooth(old, v, factor float32) float32 {
	if math.Abs(float64(old-v)) > snapEpsilon {
		return old + float32((v-old)*factor)
	}
	return v
}

// window accumulates the bytes and time span of packet records for a
// bandwidth estimate.
type window struct {
	bytes         int
	start, finish float64
	any           bool
}

func (w *window) add(t float64, bytes int) {
	w.bytes += bytes
	if !w.any {
		// The reference starts at FLT_MAX and 0.
		w.start, w.finish, w.any = math.MaxFloat32, 0, true
	}
	w.start = min(w.start, t)
	w.finish = max(w.finish, t)
}

// update smooths kbps toward the window's rate; an empty window or one
// without a time span keeps the old value.
func (w *window) update(kbps *float32, factor float32) {
	if !w.any || !(w.finish > w.start) {
		return
	}
	v := float32(float64(int32(w.bytes)) / (w.finish - w.start) * 8 / 1000)
	*kbps = smooth(*kbps, v, factor)
}
