// Package transport wraps datagram sockets for the netcode adapters: batched
// reads and writes (recvmmsg/sendmmsg on Linux, with UDP GSO trains and,
// for a server's sockets, UDP GRO where the kernel has them) through
// caller-owned buffers, with no allocation per datagram on the hot path.
// ForcePath makes tests take each path.
//
// A Conn is safe for one reading goroutine at a time running concurrently
// with any number of writing goroutines.
package transport

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// MaxDatagram is the buffer capacity a reader should give each Message: the
// size of an Ethernet MTU, larger than any netcode packet. A datagram longer
// than its buffer is truncated to the buffer's capacity.
const MaxDatagram = 1500

// The limits of one GSO train: the segments a kernel takes in one
// super-datagram (UDP_MAX_SEGMENTS, 64 before Linux 6.9), and the bytes
// of UDP payload one IPv4 datagram can carry (an IPv6 one, more). A
// sender that seals a batch of datagrams for one destination need seal no
// more than one train before writing it.
const (
	MaxTrainSegments = 64
	MaxTrainBytes    = 1<<16 - 1 - 20 - 8
)

// DefaultSocketBuffer is the receive and send buffer size in bytes Listen
// and ListenUDP ask for when given none.
const DefaultSocketBuffer = 4 << 20

// socketBuffer is the default's short name inside the package.
const socketBuffer = DefaultSocketBuffer

// Message is one datagram.
//
// For ReadBatch, Buf's backing array (its full capacity, not its length) is
// where the datagram is received; on return Buf is resliced to the received
// length and Addr is the sender, with IPv4-mapped IPv6 addresses unmapped.
// For WriteBatch, Buf is the datagram and Addr its destination.
type Message struct {
	Buf  []byte
	Addr netip.AddrPort
}

// Batcher is batched datagram I/O. A net.PacketConn of this module that
// has it of its own (a multiplexer over several sockets, such as the
// WebSocket bridge's Mux) offers it to New through a Batched it embeds.
type Batcher interface {
	// ReadBatch blocks until at least one datagram arrives and fills up to
	// len(ms) messages, returning how many. Each ms[i].Buf must have a
	// non-zero capacity; the datagram is read into ms[i].Buf[:cap].
	ReadBatch(ms []Message) (int, error)
	// WriteBatch sends ms in order. It returns how many were sent; if that
	// is fewer than len(ms), the error concerns ms[n], and the caller may
	// skip it and call again with the rest.
	WriteBatch(ms []Message) (int, error)
}

// AddrPortIO is the allocation-free one-datagram I/O of *net.UDPConn.
type AddrPortIO interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// Conn is a datagram socket with batched I/O.
type Conn interface {
	Batcher
	// WriteTo sends one datagram.
	WriteTo(b []byte, addr netip.AddrPort) error
	// LocalAddr is the socket's local address.
	LocalAddr() net.Addr
	// SetReadDeadline sets the deadline for ReadBatch; an expired deadline
	// makes it return an error wrapping os.ErrDeadlineExceeded.
	SetReadDeadline(t time.Time) error
	// Close closes the socket; a blocked ReadBatch returns an error
	// wrapping net.ErrClosed.
	Close() error
}

// hookedAddrPort is a connection with its AddrPortIO (its own, or its
// Batched's P).
type hookedAddrPort struct {
	net.PacketConn
	AddrPortIO
}

// New wraps a datagram socket. A *net.UDPConn on Linux gets recvmmsg and
// sendmmsg; any other connection is used through its Capabilities
// (capability.go): a Batcher is read and written in batches; otherwise a
// connection with the netip.AddrPort methods of *net.UDPConn gets those
// (no allocation per datagram), and any other net.PacketConn is used
// through ReadFrom and WriteTo, one datagram per call, with addresses
// converted from and to *net.UDPAddr. Single writes (WriteTo) always take
// the one-datagram path.
func New(pc net.PacketConn) Conn {
	if uc, ok := pc.(*net.UDPConn); ok {
		if c := newUDP(uc); c != nil {
			return c
		}
	}
	caps := CapabilitiesOf(pc)
	c := newSingle(pc, caps)
	if caps.Batcher != nil {
		return &batcherConn{Conn: c, b: caps.Batcher}
	}
	return c
}

// newSingle wraps pc for one datagram per call.
func newSingle(pc net.PacketConn, caps Capabilities) Conn {
	if caps.AddrPortIO != nil {
		return &apConn{pc: hookedAddrPort{pc, caps.AddrPortIO}}
	}
	return &genericConn{pc: pc}
}

// batcherConn is a connection with batched I/O of its own; the rest goes
// through its one-datagram path.
type batcherConn struct {
	Conn
	b Batcher
}

func (c *batcherConn) ReadBatch(ms []Message) (int, error)  { return c.b.ReadBatch(ms) }
func (c *batcherConn) WriteBatch(ms []Message) (int, error) { return c.b.WriteBatch(ms) }

// Listen opens a UDP socket (see ListenUDP) and wraps it with New.
func Listen(network, address string) (Conn, error) {
	uc, err := ListenUDP(network, address, 0, nil)
	if err != nil {
		return nil, err
	}
	return New(uc), nil
}

// Control is the type of net.ListenConfig.Control: a hook called with each
// socket after it is created and before it is bound.
type Control = func(network, address string, c syscall.RawConn) error

// ListenUDP opens a UDP socket; network is "udp", "udp4" or "udp6". It asks
// for buffer-byte socket buffers (best effort); 0 means DefaultSocketBuffer.
// control, if not nil, is called as net.ListenConfig.Control is.
func ListenUDP(network, address string, buffer int, control Control) (*net.UDPConn, error) {
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	lc := net.ListenConfig{Control: control}
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, err
	}
	uc := pc.(*net.UDPConn)
	if buffer <= 0 {
		buffer = DefaultSocketBuffer
	}
	SetBuffers(uc, buffer)
	return uc, nil
}

// apConn uses the netip.AddrPort methods: one datagram per call.
type apConn struct {
	pc hookedAddrPort
}

func (c *apConn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	b := ms[0].Buf[:cap(ms[0].Buf)]
	n, addr, err := c.pc.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, err
	}
	ms[0].Buf = b[:n]
	ms[0].Addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	return 1, nil
}

func (c *apConn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		if err := c.WriteTo(ms[i].Buf, ms[i].Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

func (c *apConn) WriteTo(b []byte, addr netip.AddrPort) error {
	// Unmapped, an IPv4 destination suits both an IPv4 socket and a
	// dual-stack IPv6 one (which maps it back).
	_, err := c.pc.WriteToUDPAddrPort(b, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()))
	return err
}

func (c *apConn) LocalAddr() net.Addr               { return c.pc.LocalAddr() }
func (c *apConn) SetReadDeadline(t time.Time) error { return c.pc.SetReadDeadline(t) }
func (c *apConn) Close() error                      { return c.pc.Close() }

// genericConn uses ReadFrom and WriteTo: one datagram per call.
type genericConn struct {
	pc net.PacketConn
}

func (c *genericConn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	b := ms[0].Buf[:cap(ms[0].Buf)]
	n, addr, err := c.pc.ReadFrom(b)
	if err != nil {
		return 0, err
	}
	ms[0].Buf = b[:n]
	ms[0].Addr = AddrPortOf(addr)
	return 1, nil
}

func (c *genericConn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		if err := c.WriteTo(ms[i].Buf, ms[i].Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

func (c *genericConn) WriteTo(b []byte, addr netip.AddrPort) error {
	if !addr.IsValid() {
		return &net.OpError{Op: "write", Net: "udp", Source: c.pc.LocalAddr(), Err: errInvalidAddr}
	}
	_, err := c.pc.WriteTo(b, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())))
	return err
}

func (c *genericConn) LocalAddr() net.Addr               { return c.pc.LocalAddr() }
func (c *genericConn) SetReadDeadline(t time.Time) error { return c.pc.SetReadDeadline(t) }
func (c *genericConn) Close() error                      { return c.pc.Close() }

var errInvalidAddr = errors.New("netcode/transport: invalid destination address")

// AddrPortOf converts a peer address (a *net.UDPAddr, anything with an
// AddrPort method, or any address whose String is "host:port" with a
// literal IP) to an AddrPort, unmapped; the zero AddrPort if it is
// not an IP address.
func AddrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch v := a.(type) {
	case *net.UDPAddr:
		ap = v.AddrPort()
	case interface{ AddrPort() netip.AddrPort }:
		ap = v.AddrPort()
	case nil:
		return netip.AddrPort{}
	default:
		p, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.AddrPort{}
		}
		ap = p
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// NetworkFor is the socket network a client needs to reach every one of
// addrs: "udp4" or "udp6" when they are all of one family, else "udp"
// (a dual-stack socket).
func NetworkFor(addrs []netip.AddrPort) string {
	v4, v6 := false, false
	for _, a := range addrs {
		if a.Addr().Unmap().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	switch {
	case v4 && !v6:
		return "udp4"
	case v6 && !v4:
		return "udp6"
	}
	return "udp"
}
