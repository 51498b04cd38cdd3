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

// HoldWriteTurn takes the dialed Conn c's write turn and returns a func
// that gives it back: meanwhile its timer's callback, which needs the
// turn to run Update, waits in it, where a test can see it run.
func HoldWriteTurn(c *Conn) (release func()) {
	dc := c.m.Endpoint().(pullEndpoint).socketEndpoint.(*dialConn)
	dc.turn.Wait()
	return func() { dc.turn.Give() }
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
