//go:build linux

package transport

// Socket addresses in the raw form recvmmsg and sendmmsg use, and the
// cache of IPv6 zone names, for mmsgConn (mmsg_linux.go).

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// port reads or writes a sockaddr's network-order port.
func getPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

func putPort(p *uint16, v uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(v>>8), byte(v)
}

// decodeSockaddr turns a received sockaddr into an unmapped AddrPort.
func decodeSockaddr(sa *unix.RawSockaddrInet6, n uint32) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), getPort(&s4.Port))
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}
		}
		a := netip.AddrFrom16(sa.Addr)
		if a.Is4In6() {
			a = a.Unmap()
		} else if sa.Scope_id != 0 {
			a = a.WithZone(zones.name(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, getPort(&sa.Port))
	}
	return netip.AddrPort{}
}

// encodeSockaddr writes the destination in the socket's family: IPv4 for an
// AF_INET socket, IPv6 (IPv4 mapped) for an AF_INET6 one. It reports false
// if the address cannot be reached from this socket.
func (c *mmsgConn) encodeSockaddr(sa *unix.RawSockaddrInet6, h *unix.Msghdr, ap netip.AddrPort) bool {
	a := ap.Addr()
	if !a.IsValid() {
		return false
	}
	if c.connectedTo(ap) {
		h.Namelen = 0 // the kernel's msg_name is then NULL: the connected peer
		return true
	}
	if c.family == unix.AF_INET {
		a = a.Unmap()
		if !a.Is4() {
			return false
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
		putPort(&s4.Port, ap.Port())
		h.Namelen = unix.SizeofSockaddrInet4
		return true
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
	if z := a.Zone(); z != "" {
		sa.Scope_id = zones.index(z)
	}
	putPort(&sa.Port, ap.Port())
	h.Namelen = unix.SizeofSockaddrInet6
	return true
}

// zoneCache maps IPv6 zones (interface names) to indexes and back; only
// link-local peers need it, and each interface is looked up once.
type zoneCache struct {
	mu      sync.Mutex
	names   map[uint32]string
	indexes map[string]uint32
}

var zones zoneCache

func (z *zoneCache) name(i uint32) string {
	z.mu.Lock()
	defer z.mu.Unlock()
	if s, ok := z.names[i]; ok {
		return s
	}
	s := strconv.FormatUint(uint64(i), 10)
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		s = ifi.Name
	}
	if z.names == nil {
		z.names = map[uint32]string{}
	}
	if len(z.names) < 1024 {
		z.names[i] = s
	}
	return s
}

func (z *zoneCache) index(s string) uint32 {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if i, ok := z.indexes[s]; ok {
		return i
	}
	var i uint32
	if ifi, err := net.InterfaceByName(s); err == nil {
		i = uint32(ifi.Index)
	}
	if z.indexes == nil {
		z.indexes = map[string]uint32{}
	}
	if len(z.indexes) < 1024 {
		z.indexes[s] = i
	}
	return i
}
