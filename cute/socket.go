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
// it is a *net.UDPConn (Buffer, if set, is refused on anything else),
// Control cannot apply and is refused, and ReadShards is ignored: that is
// one transport.
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
	// ReadShards is how many sockets Listen opens on the address, each
	// with its own reader and send queue, so that that many cores decrypt
	// at once; 0 or 1 means one. With more than one (Linux only; elsewhere
	// Listen opens one), the sockets share the port with SO_REUSEPORT and
	// the kernel spreads clients over them by address, each client always
	// to the same socket, whose reader, send queue and pulling Reads serve
	// its Conn. SO_REUSEPORT lets another process of the same user bind
	// the port too. Set it to the cores the server may use
	// (runtime.NumCPU()). A dialed Conn has one socket.
	ReadShards int
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
