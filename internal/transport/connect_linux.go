//go:build linux

package transport

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// Connect fixes the peer of c's socket to addr (connect(2)), where c is
// the recvmmsg/sendmmsg path's: datagrams to addr then leave with no
// destination of their own, so the kernel uses the route it looked up
// once instead of looking one up for each, and datagrams from any other
// address are dropped by the kernel. It reports whether it connected;
// on the other paths it does nothing, and c works as before.
//
// Sends to another address still work (Linux takes a destination on a
// connected UDP socket). A connected socket reports the ICMP errors of
// its earlier sends (ECONNREFUSED for a closed port) on its next read or
// write, as an unconnected one does not: readers retry those
// (transientErrors), and a writer loses the one datagram, as UDP may.
// Connect may run while other goroutines read and write c.
func Connect(c Conn, addr netip.AddrPort) bool {
	mc, ok := c.(*mmsgConn)
	if !ok || !addr.IsValid() {
		return false
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	var sa unix.Sockaddr
	switch a := addr.Addr(); {
	case mc.family == unix.AF_INET && a.Is4():
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	case mc.family == unix.AF_INET6:
		s6 := &unix.SockaddrInet6{Port: int(addr.Port()), Addr: a.As16()}
		if z := a.Zone(); z != "" {
			s6.ZoneId = zones.index(z)
		}
		sa = s6
	default:
		return false
	}
	var err error
	if cerr := mc.rc.Control(func(fd uintptr) { err = unix.Connect(int(fd), sa) }); cerr != nil || err != nil {
		return false
	}
	// Published after connect(2): a send that sees it may omit the
	// destination.
	mc.peer.Store(&addr)
	return true
}

// connectedTo reports whether c's socket is connected to ap, so that a
// datagram to ap may leave without a destination.
func (c *mmsgConn) connectedTo(ap netip.AddrPort) bool {
	p := c.peer.Load()
	return p != nil && p.Port() == ap.Port() && p.Addr() == ap.Addr().Unmap()
}
