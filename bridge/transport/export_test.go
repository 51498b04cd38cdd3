package transport

import "net/netip"

// The netip.AddrPort I/O a netcode Listener and Dialer reach through the
// hook (muxBatcher, connIO), by *net.UDPConn's names, for the external
// tests and benchmarks.

func (m *Mux) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return m.readFromAddrPort(b)
}

func (m *Mux) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return m.writeToAddrPort(b, addr)
}

func (c *Conn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return c.readFromAddrPort(b)
}

func (c *Conn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return c.writeToAddrPort(b, addr)
}

// WheelArmed is how many timers m's wheel has armed: one per session (its
// watchdog).
func WheelArmed(m *Mux) int { return m.wheel.Armed() }

// WriterWakes is how many times the writers of m's open sessions have
// been woken.
func WriterWakes(m *Mux) uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var n uint64
	for _, s := range m.sessions {
		n += s.wakes.Load()
	}
	return n
}
