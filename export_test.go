package netcode

import "time"

// SetCorkBound sets how long a dialed Conn holds a Write's datagram at
// most (dial_cork.go) for the Conns dialed next, and returns a func that
// restores it.
func SetCorkBound(d time.Duration) (restore func()) {
	old := corkBound
	corkBound = d
	return func() { corkBound = old }
}

// HeldWrites is how many datagrams of Writes the dialed Conn c holds for
// a train (0 for a server Conn).
func HeldWrites(c *Conn) int {
	pe, ok := c.m.Endpoint().(pullEndpoint)
	if !ok {
		return 0
	}
	dc, ok := pe.socketEndpoint.(*dialConn)
	if !ok {
		return 0
	}
	return int(dc.hw.n.Load())
}
