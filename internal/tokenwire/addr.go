package tokenwire

import (
	"encoding/binary"
	"net/netip"
)

// Address types in tokens.
const (
	addrTypeIPv4 = 1
	addrTypeIPv6 = 2

	addrIPv4Bytes = 1 + 4 + 2  // type, address, port
	addrIPv6Bytes = 1 + 16 + 2 // type, address, port
)

// AppendAddr appends the token encoding of a to dst and returns the result.
//
// An IPv4 address is written as type 1, its four bytes in network order and
// the port as a little-endian uint16 (7 bytes). An IPv6 address is written as
// type 2, its eight 16-bit groups each as a little-endian uint16 (the
// reference's layout; not network order) and the port (19 bytes). An
// IPv4-mapped IPv6 address such as ::ffff:127.0.0.1 stays IPv6 (type 2), as in
// the reference; unmap it first to write it as IPv4. A zone is dropped. An
// invalid address is written as IPv4 0.0.0.0; token writers in this package
// refuse such addresses before they get here.
func AppendAddr(dst []byte, a netip.AddrPort) []byte {
	var buf [addrIPv6Bytes]byte
	n := PutAddr(buf[:], a)
	return append(dst, buf[:n]...)
}

// PutAddr writes the encoding of a at the start of b, which must have room
// for it (19 bytes are always enough), and returns its length.
func PutAddr(b []byte, a netip.AddrPort) int {
	ip := a.Addr()
	if ip.Is6() {
		_ = b[addrIPv6Bytes-1]
		b[0] = addrTypeIPv6
		raw := ip.As16()
		for i := 0; i < 16; i += 2 {
			// Group i/2 is raw[i]<<8 | raw[i+1]; the reference writes it
			// little-endian.
			b[1+i] = raw[i+1]
			b[2+i] = raw[i]
		}
		binary.LittleEndian.PutUint16(b[17:], a.Port())
		return addrIPv6Bytes
	}
	_ = b[addrIPv4Bytes-1]
	b[0] = addrTypeIPv4
	if ip.Is4() {
		raw := ip.As4()
		copy(b[1:5], raw[:])
	} else {
		clear(b[1:5])
	}
	binary.LittleEndian.PutUint16(b[5:], a.Port())
	return addrIPv4Bytes
}

// ReadAddr reads one token-encoded address from the start of b and returns it
// with the number of bytes it took. It returns an error wrapping ErrInvalid if
// the type is not 1 or 2 or b is too short. An IPv6 address comes back as an
// IPv6 address even if it is IPv4-mapped.
func ReadAddr(b []byte) (netip.AddrPort, int, error) {
	if len(b) < 1 {
		return netip.AddrPort{}, 0, errAddrShort
	}
	switch b[0] {
	case addrTypeIPv4:
		if len(b) < addrIPv4Bytes {
			return netip.AddrPort{}, 0, errAddrShort
		}
		ip := netip.AddrFrom4([4]byte(b[1:5]))
		return netip.AddrPortFrom(ip, binary.LittleEndian.Uint16(b[5:7])), addrIPv4Bytes, nil
	case addrTypeIPv6:
		if len(b) < addrIPv6Bytes {
			return netip.AddrPort{}, 0, errAddrShort
		}
		var raw [16]byte
		for i := 0; i < 16; i += 2 {
			raw[i] = b[2+i]
			raw[i+1] = b[1+i]
		}
		ip := netip.AddrFrom16(raw)
		return netip.AddrPortFrom(ip, binary.LittleEndian.Uint16(b[17:19])), addrIPv6Bytes, nil
	default:
		return netip.AddrPort{}, 0, errAddrType
	}
}

// ReadAddrs reads n addresses from the start of b into dst (whose length is
// reset) and returns dst and the bytes read. n must already be checked to be
// in [1, MaxServers].
func ReadAddrs(dst []netip.AddrPort, b []byte, n int) ([]netip.AddrPort, int, error) {
	dst = dst[:0]
	off := 0
	for range n {
		a, m, err := ReadAddr(b[off:])
		if err != nil {
			return dst, 0, err
		}
		dst = append(dst, a)
		off += m
	}
	return dst, off, nil
}
