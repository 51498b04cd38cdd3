package endpoint

import "encoding/binary"

// Wire sizes, as in reliable.h.
const (
	// MaxPacketHeaderBytes is the longest regular packet header.
	MaxPacketHeaderBytes = 9
	// minPacketHeaderBytes is the shortest regular packet header.
	minPacketHeaderBytes = 4
	// FragmentHeaderBytes is the size of a fragment header, not counting
	// the packet header that fragment 0 also carries.
	FragmentHeaderBytes = 5
	// maxFragmentsLimit is the most fragments a packet can have on the wire.
	maxFragmentsLimit = 256
)

// Prefix byte bits.
const (
	prefixFragment  = 0x01
	prefixAckByte0  = 0x02 // bits 1-4: ack_bits byte 0..3 is present
	prefixShortAck  = 0x20 // ack is one byte: sequence - ack
	fragmentPrefix  = 0x01 // the whole prefix byte of a fragment
	maxShortAckDiff = 255
)

// putPacketHeader writes the regular packet header for (sequence, ack,
// ackBits) into b, which must have room for MaxPacketHeaderBytes, and
// returns its length. It is always the canonical encoding: an ack_bits
// byte of 0xFF is left out and a difference up to 255 takes one byte.
func putPacketHeader(b []byte, sequence, ack uint16, ackBits uint32) int {
	_ = b[MaxPacketHeaderBytes-1]
	var prefix byte
	for i := range 4 {
		if byte(ackBits>>(8*i)) != 0xFF {
			prefix |= prefixAckByte0 << i
		}
	}
	diff := int(sequence) - int(ack)
	if diff < 0 {
		diff += 65536
	}
	if diff <= maxShortAckDiff {
		prefix |= prefixShortAck
	}
	b[0] = prefix
	binary.LittleEndian.PutUint16(b[1:], sequence)
	n := 3
	if diff <= maxShortAckDiff {
		b[n] = byte(diff)
		n++
	} else {
		binary.LittleEndian.PutUint16(b[n:], ack)
		n += 2
	}
	for i := range 4 {
		if prefix&(prefixAckByte0<<i) != 0 {
			b[n] = byte(ackBits >> (8 * i))
			n++
		}
	}
	return n
}

// packetHeader is a decoded regular packet header.
type packetHeader struct {
	sequence, ack uint16
	ackBits       uint32
}

// readPacketHeader decodes the regular packet header at the start of b and
// returns it with its length, or ok false if b is not one. As in the
// reference it accepts non-canonical headers and ignores prefix bits 6-7.
func readPacketHeader(b []byte) (h packetHeader, n int, ok bool) {
	if len(b) < 3 {
		return h, 0, false
	}
	prefix := b[0]
	if prefix&prefixFragment != 0 {
		return h, 0, false
	}
	h.sequence = binary.LittleEndian.Uint16(b[1:])
	n = 3
	if prefix&prefixShortAck != 0 {
		if len(b) < 4 {
			return h, 0, false
		}
		h.ack = h.sequence - uint16(b[3])
		n = 4
	} else {
		if len(b) < 5 {
			return h, 0, false
		}
		h.ack = binary.LittleEndian.Uint16(b[3:])
		n = 5
	}
	present := 0
	for i := range 4 {
		if prefix&(prefixAckByte0<<i) != 0 {
			present++
		}
	}
	if len(b) < n+present {
		return h, 0, false
	}
	h.ackBits = 0xFFFFFFFF
	for i := range 4 {
		if prefix&(prefixAckByte0<<i) != 0 {
			h.ackBits &^= 0xFF << (8 * i)
			h.ackBits |= uint32(b[n]) << (8 * i)
			n++
		}
	}
	return h, n, true
}

// fragmentHeader is a decoded fragment header. Only fragment 0 carries a
// packet header (ack, ackBits, headerBytes); dataBytes excludes it.
type fragmentHeader struct {
	packetHeader
	id, count   int
	headerBytes int // length of fragment 0's embedded packet header
	dataBytes   int
}

// readFragmentHeader decodes and checks the fragment at b as the reference
// does, in its order: the prefix, the fragment count against maxFragments,
// the id, fragment 0's embedded header (which must be canonical and carry
// the fragment's sequence), then the data size against fragmentSize.
func readFragmentHeader(b []byte, maxFragments, fragmentSize int) (f fragmentHeader, ok bool) {
	if len(b) < FragmentHeaderBytes || b[0] != fragmentPrefix {
		return f, false
	}
	f.sequence = binary.LittleEndian.Uint16(b[1:])
	f.id = int(b[3])
	f.count = int(b[4]) + 1
	if f.count > maxFragments || f.id >= f.count {
		return f, false
	}
	f.dataBytes = len(b) - FragmentHeaderBytes
	if f.id == 0 {
		h, n, ok := readPacketHeader(b[FragmentHeaderBytes:])
		if !ok || h.sequence != f.sequence {
			return f, false
		}
		var canon [MaxPacketHeaderBytes]byte
		if m := putPacketHeader(canon[:], h.sequence, h.ack, h.ackBits); m != n || string(canon[:m]) != string(b[FragmentHeaderBytes:FragmentHeaderBytes+n]) {
			return f, false
		}
		f.ack, f.ackBits, f.headerBytes = h.ack, h.ackBits, n
		f.dataBytes -= n
	}
	if f.dataBytes > fragmentSize || (f.id != f.count-1 && f.dataBytes != fragmentSize) {
		return f, false
	}
	return f, true
}
