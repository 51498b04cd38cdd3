package cute

import (
	"log/slog"
	"syscall"

	"github.com/gonetcode/netcode/internal/transport"
)

// SocketConfig is how a Listener or a dialed Conn sets up its UDP socket,
// as netcode's SocketConfig does (the same mechanism sets both up).
// ServerConfig.Socket and Dialer.Socket hold one; its zero value is the
// default everywhere.
//
// The settings apply to the sockets the package opens (Listen, and Dial
// without Dialer.ListenPacket). On a transport the caller brings
// (NewListener, or Dialer.ListenPacket), Buffer and PacketTagging apply if
// it is a *net.UDPConn (Buffer, if set, is refused on anything else), and
// Control cannot apply and is refused.
type SocketConfig struct {
	// Buffer is the receive and send buffer size in bytes the socket asks
	// for (best effort; the system may cap it); 0 means 4 MiB.
	Buffer int
	// PacketTagging marks every packet sent with DSCP 46 (expedited
	// forwarding) in the IPv4 TOS or IPv6 traffic class byte, so that
	// networks that honour it queue game traffic ahead of bulk traffic.
	// Off by default. Where the operating system refuses it, the socket
	// still works and says so at Warn level in the log.
	PacketTagging bool
	// Control, if not nil, is called with the socket after it is created
	// and before it is bound, as net.ListenConfig.Control is: to set
	// socket options this package does not. An error from it fails Listen
	// or Dial.
	Control func(network, address string, c syscall.RawConn) error
}

// options is how the transport sets sockets up by s, with log for a
// refused tagging.
func (s *SocketConfig) options(log *slog.Logger) *transport.Options {
	return &transport.Options{Buffer: s.Buffer, PacketTagging: s.PacketTagging, Control: s.Control, Log: log, Dialect: "cute"}
}
