package transport

import (
	"errors"
	"net/netip"

	"github.com/gonetcode/netcode/protocol"
)

// Subprotocol is the WebSocket subprotocol of the end-to-end
// encrypted transport: every binary message is one netcode packet (1 to
// protocol.MaxPacketBytes bytes), exactly as it would travel in a UDP
// datagram. The server side is a [Mux]; the client side is [Dial].
// Unlike the relay (bridge.Handler), nothing between the netcode client (for
// example the Go client compiled to WebAssembly, running in a browser) and
// the netcode server can read or forge the payloads.
//
// A client may offer "netcode.transport.v1.full" besides, after it (as
// Dial does): a Mux that refuses the session for its cap then
// agrees to that one, before closing with 1013, so that a client that
// cannot read the response's headers (a browser's) knows at once.
const Subprotocol = "netcode.transport.v1"

// fullSubprotocol is the subprotocol of a refusal for the cap
// (see Subprotocol).
const fullSubprotocol = Subprotocol + ".full"

// maxMessage is the largest binary message of the transport: the
// largest netcode packet.
const maxMessage = protocol.MaxPacketBytes

// Transport addresses. A WebSocket peer of a Mux is known to the netcode
// server by a synthetic address from the IPv6 discard-only prefix 100::/64
// (RFC 6666): 100::N, port 1, where N counts sessions from 1 and is never
// reused. No real host can send UDP from that prefix (the Mux drops UDP
// datagrams that claim to), so these addresses never collide with UDP
// peers.
var sessionPrefix = netip.MustParsePrefix("100::/64")

// sessionPort is the port of every synthetic address.
const sessionPort = 1

// IsSessionAddr reports whether a is a synthetic address a Mux gives its
// WebSocket peers (see [Mux]).
func IsSessionAddr(a netip.AddrPort) bool {
	return sessionPrefix.Contains(a.Addr())
}

// sessionAddr returns the synthetic address of session n.
func sessionAddr(n uint64) netip.AddrPort {
	var b [16]byte
	b[0] = 0x01
	for i := range 8 {
		b[15-i] = byte(n >> (8 * i))
	}
	return netip.AddrPortFrom(netip.AddrFrom16(b), sessionPort)
}

var (
	errEmptyPacket  = errors.New("netcode/bridge: empty packet")
	errPacketTooBig = errors.New("netcode/bridge: packet larger than 1300 bytes")
)

// netAddr is the net.Addr of the WebSocket side of a transport.
type netAddr string

func (a netAddr) Network() string { return "websocket" }
func (a netAddr) String() string  { return string(a) }
