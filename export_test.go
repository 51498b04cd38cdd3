package netcode

import (
	"github.com/gonetcode/netcode/internal/engine"
)

// NoHeldDispatch keeps a dialed Conn's held datagrams from leaving when
// its writer stops writing (engine.SetDispatch), so that only the other
// ways out send them, and returns a func that restores it.
func NoHeldDispatch() (restore func()) {
	engine.SetDispatch(false)
	return func() { engine.SetDispatch(true) }
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
