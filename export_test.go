package netcode

import (
	"github.com/gonetcode/netcode/internal/engine"
)

// HeldFallback is how long at most a server Conn's held Writes wait for
// its Listener's fallback (engine.HeldFallback).
const HeldFallback = engine.HeldFallback

// NoHeldDispatch keeps a Conn's held datagrams from leaving when its
// writer stops writing (a dialed Conn's dispatch) or by the Listener's
// fallback (a server Conn's) (engine.SetDispatch), so that only the other
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

// HeldWrites is how many datagrams of Writes the Conn c, dialed or a
// server's, holds for a train.
func HeldWrites(c *Conn) int {
	pe, ok := c.m.Endpoint().(pullEndpoint)
	if !ok {
		return 0
	}
	switch e := pe.socketEndpoint.(type) {
	case *dialConn:
		return e.hw.Len()
	case *serverEndpoint:
		return e.hw.Len()
	}
	return 0
}
