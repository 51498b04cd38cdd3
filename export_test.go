package netcode

import (
	"time"

	"github.com/gonetcode/netcode/internal/engine"
)

// SetCorkBound sets how long a dialed Conn holds a Write's datagram at
// most (engine.HoldBound), and returns a func that restores it.
func SetCorkBound(d time.Duration) (restore func()) {
	old := engine.HoldBound
	engine.HoldBound = d
	return func() { engine.HoldBound = old }
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
	return dc.hw.Len()
}
