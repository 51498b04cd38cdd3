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
}

func (a *acks) init() {
	a.sent.init(ackBuffer)
	a.received.init(ackBuffer)
	a.acked = make([]uint16, 0, ackBuffer)
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
	p := a.sent.insert(seq, keep[sentPacket]{})
	*p = sentPacket{time: a.time, size: int32(size + AckHeaderBytes)}
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
// bandwidth estimate (cn_ack_system_update), in one pass over the 512
// sent sequences [sequence−1024, sequence−513] both sample (the C
// code's base, (sequence − capacity + 1) + 0xFFFF as u16). The C code's
// second estimate, from the received buffer, reads struct padding as a
// size; it is neither kept nor on the wire.
func (a *acks) update(dt float64) {
	a.time += dt
	base := a.sent.next - uint16(len(a.sent.seqs))
	n := len(a.sent.seqs) / 2
	dropped, bytes := 0, 0
	start, end := math.MaxFloat64, 0.0
	for i := range n {
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
	loss := float64(dropped) / float64(n)
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
