package webtransport

import "github.com/quic-go/quic-go"

// SetQUICFloor makes every QUIC connection of the package that starts
// from now on keep to 1,200-byte packets (no path MTU discovery), the
// floor of any path, so that the datagram limit is known: call the
// returned function to undo it.
func SetQUICFloor() (undo func()) {
	configureQUIC = func(c *quic.Config) {
		c.InitialPacketSize = 1200
		c.DisablePathMTUDiscovery = true
	}
	return func() { configureQUIC = nil }
}

// FloorDatagram is the largest datagram payload at the floor.
const FloorDatagram = minDatagram

// ParseConnected is parseConnected, for the fuzz test.
var ParseConnected = parseConnected
