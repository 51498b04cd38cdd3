package layer

import (
	"encoding/binary"
	"math"
)

// Counter names one of the ack system's counters (cn_ack_system_counter_t).
type Counter int

// The ack system's counters, in cute_net.h's order.
const (
	PacketsSent Counter = iota
	PacketsReceived
	PacketsAcked
	PacketsStale
	PacketsInvalid
	PacketsTooLargeToSend
	PacketsTooLargeToReceive
	numCounters
)

// sentPacket is what the ack system remembers of a datagram it sent.
type sentPacket struct {
	time  float64
	size  int32
	acked bool
}

// acks is cn_ack_system_t: the 8-byte header of every datagram (this
// side's sequence, the newest sequence received and 32 bits of the ones
// before it), the record of what was sent and received, the acks found
// since the last update, RTT, packet loss and the bandwidth estimates.
// Time is the sum of the update intervals in seconds, as in the C code, so
// that resend decisions and RTT samples match it to the bit.
type acks struct {
	time     float64
	sequence uint16
	acked    []uint16 // acks since the last clear (cn_ack_system_get_acks)
	sent     seqBuf[sentPacket]
	received seqBuf[struct{}] // only which sequences arrived: the C code's time and size feed nothing on the wire

	rtt      float64 // milliseconds
	loss     float64
	bwIn     float64 // kbps computed from the sent buffer, as the C code names it
	counters [numCounters]uint64

	// The sample that update's estimates read, kept as the sent buffer
	// changes so that update costs the same whatever the window: the
	// sequences [sent.next−ackBuffer, sent.next−ackBuffer/2−1] (see
	// update), of which the ones still in the sent buffer are sampled.
	// Every sequence is sent in turn, so the buffer holds the last held
	// of them (held ≤ ackBuffer), and the sampled ones are consecutive;
	// their send times never decrease while time has only gone forward
	// (backwards is false), so the oldest and newest of them are the
	// sample's earliest and latest.
	held      int
	dropped   int // sampled sequences not acked
	bytes     int // their sizes, headers included
	backwards bool
}

// sampleLen is how many sent sequences the estimates sample, the older
// half of the sent buffer.
const sampleLen = ackBuffer / 2

func (a *acks) init() {
	a.sent.init(ackBuffer)
	a.received.init(ackBuffer)
	a.acked = make([]uint16, 0, ackBuffer)
}

// sampled reports whether sequence s, which is in the sent buffer, is in
// the estimates' sample.
func (a *acks) sampled(s uint16) bool {
	return s-(a.sent.next-ackBuffer) < sampleLen
}

// tally adds the sent packet p to the sample's dropped and bytes, or
// takes it out when sign is −1.
func (a *acks) tally(p *sentPacket, sign int) {
	if !p.acked {
		a.dropped += sign
	}
	a.bytes += sign * int(p.size)
}

// header returns the ack header of the next datagram, whose payload is
// size bytes, and records the datagram as sent
// (cn_ack_system_send_packet). ok is false, nothing recorded and no
// sequence used, when the payload is over MaxAckPayload.
func (a *acks) header(size int) (h [AckHeaderBytes]byte, seq uint16, ok bool) {
	if size > MaxAckPayload {
		a.counters[PacketsTooLargeToSend]++
		return h, 0, false
	}
	seq = a.sequence
	a.sequence++
	ack, bits := a.ackBits()
	// The sample moves on by one: seq's slot drops the oldest sequence
	// of the buffer and the sample takes the sequence ackBuffer/2 before
	// seq.
	if p := a.sent.find(seq - ackBuffer); p != nil {
		a.tally(p, -1)
	}
	p := a.sent.insert(seq, keep[sentPacket]{})
	*p = sentPacket{time: a.time, size: int32(size + AckHeaderBytes)}
	a.held = min(a.held+1, ackBuffer)
	if q := a.sent.find(seq - sampleLen); q != nil {
		a.tally(q, 1)
	}
	binary.LittleEndian.PutUint16(h[0:], seq)
	binary.LittleEndian.PutUint16(h[2:], ack)
	binary.LittleEndian.PutUint32(h[4:], bits)
	a.counters[PacketsSent]++
	return h, seq, true
}

// ackBits is the ack and ack bits the next header carries
// (cn_sequence_buffer_generate_ack_bits).
func (a *acks) ackBits() (ack uint16, bits uint32) {
	ack = a.received.next - 1
	for i := range 32 {
		if a.received.find(ack-uint16(i)) != nil {
			bits |= 1 << i
		}
	}
	return ack, bits
}

// ackStatus is the ack system's verdict on a datagram, before it is
// recorded.
type ackStatus int

const (
	ackOK ackStatus = iota
	ackTooLarge
	ackTooShort
	ackStale
)

// check judges a received datagram as cn_ack_system_receive_packet does,
// counting it, without recording it: the transport records it (record)
// only once it has judged the rest, so that what it refuses is not acked.
func (a *acks) check(b []byte) ackStatus {
	if len(b) > MaxAckPayload {
		a.counters[PacketsTooLargeToReceive]++
		return ackTooLarge
	}
	a.counters[PacketsReceived]++
	if len(b) < AckHeaderBytes {
		a.counters[PacketsInvalid]++
		return ackTooShort
	}
	if a.received.stale(binary.LittleEndian.Uint16(b)) {
		a.counters[PacketsStale]++
		return ackStale
	}
	return ackOK
}

// record records a datagram check accepted as received and takes the
// acks its header carries.
func (a *acks) record(b []byte) {
	seq := binary.LittleEndian.Uint16(b)
	ack := binary.LittleEndian.Uint16(b[2:])
	bits := binary.LittleEndian.Uint32(b[4:])
	a.received.insert(seq, keep[struct{}]{})
	for i := 0; bits != 0; i++ {
		if bits&1 != 0 {
			s := ack - uint16(i)
			if p := a.sent.find(s); p != nil && !p.acked {
				a.acked = append(a.acked, s)
				a.counters[PacketsAcked]++
				p.acked = true
				if a.sampled(s) {
					a.dropped--
				}
				sample := float64(float32(a.time-p.time) * 1000)
				if a.rtt == 0 && sample > 0 {
					a.rtt = sample
				} else {
					a.rtt += (sample - a.rtt) * float64(float32(0.001))
				}
			}
		}
		bits >>= 1
	}
}

// update advances time by dt seconds and refreshes packet loss and the
// bandwidth estimate (cn_ack_system_update) from the 512 sent sequences
// [sequence−1024, sequence−513] (the C code's base, (sequence − capacity
// + 1) + 0xFFFF as u16, and a pass over half the capacity). The C code
// makes that pass on every update; here header and record keep its sums
// as they change the sent buffer, so an update costs the same whatever
// the window, with the same results to the bit (scan is the pass itself,
// the reference the tests hold the sums to, and what update falls back
// to once time has gone backwards). The C code's second estimate, from
// the received buffer, reads struct padding as a size; it is neither
// kept nor on the wire.
func (a *acks) update(dt float64) {
	if !(dt >= 0) {
		a.backwards = true
	}
	a.time += dt
	dropped, bytes, start, end := a.sample()
	loss := float64(dropped) / float64(sampleLen)
	if a.loss == 0 {
		a.loss = loss
	} else {
		a.loss += (loss - a.loss) * 0.1
	}
	if start != math.MaxFloat64 {
		if d := end - start; d > 1e-6 {
			sample := float64(bytes) * 8 / 1000 / d
			a.bwIn += (sample - a.bwIn) * float64(float32(0.1))
			a.bwIn = max(a.bwIn, 0)
		}
	}
}

// sample returns what scan would, from the sums header and record keep:
// the sequences not acked, the bytes, and the earliest and latest send
// time (math.MaxFloat64 and 0 when none is in the buffer).
func (a *acks) sample() (dropped, bytes int, start, end float64) {
	if a.backwards {
		return a.scan()
	}
	start = math.MaxFloat64
	if last := a.sent.find(a.sent.next - (ackBuffer - sampleLen + 1)); last != nil {
		start = a.sent.find(a.sent.next - uint16(a.held)).time
		end = last.time
	}
	return a.dropped, a.bytes, start, end
}

// scan makes cn_ack_system_update's pass over the sample.
func (a *acks) scan() (dropped, bytes int, start, end float64) {
	base := a.sent.next - ackBuffer
	start = math.MaxFloat64
	for i := range sampleLen {
		p := a.sent.find(base + uint16(i))
		if p == nil {
			continue
		}
		if !p.acked {
			dropped++
		}
		bytes += int(p.size)
		start = min(start, p.time)
		end = max(end, p.time)
	}
	return dropped, bytes, start, end
}
