package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/transport"
)

// DefaultTransportReadQueue is the default of TransportOptions.ReadQueue.
const DefaultTransportReadQueue = 256

// TransportOptions configures DialTransport. The zero value is ready to use.
type TransportOptions struct {
	// DialOptions are passed to websocket.Dial; its Subprotocols are
	// replaced by TransportSubprotocol.
	DialOptions *websocket.DialOptions
	// ReadQueue is how many received datagrams wait for ReadFrom; past it,
	// new ones are dropped. 0 means DefaultTransportReadQueue.
	ReadQueue int
}

// TransportConn is the client side of the end-to-end encrypted transport:
// a net.PacketConn over one WebSocket to a [Mux]. WriteTo sends any datagram
// as one binary message, whatever the address; ReadFrom returns the
// server's datagrams attributed to the address last written to, which is
// what a netcode client expects of its server. Use it as the transport of a
// netcode.Dialer with [TransportListenPacket]. It works in browsers too
// (GOOS=js GOARCH=wasm), over the browser's WebSocket.
type TransportConn struct {
	ws       *websocket.Conn
	url      string
	q        *packetq.Queue // the server's datagrams; ended when the WebSocket is
	closed   atomic.Bool    // Close was called
	readDone chan struct{}  // closed when the reader goroutine exits

	server atomic.Pointer[netip.AddrPort]
	wdl    atomic.Int64 // write deadline, Unix ns; 0 when none
}

// DialTransport opens a WebSocket to url (ws:// or wss://, or a path
// relative to the page in a browser) with the subprotocol
// TransportSubprotocol and returns the connection. opts may be nil. A Mux
// that has its MaxSessions open refuses the session: the error wraps
// ErrBridgeFull, at once (by RefusedHeader, or in a browser, which hides
// the headers, by the subprotocol the refusal agrees to, see
// TransportSubprotocol). Should a session be refused after it opened,
// reads fail with an error wrapping ErrBridgeFull.
func DialTransport(ctx context.Context, url string, opts *TransportOptions) (*TransportConn, error) {
	var o TransportOptions
	if opts != nil {
		o = *opts
	}
	var do websocket.DialOptions
	if o.DialOptions != nil {
		do = *o.DialOptions
	}
	do.Subprotocols = []string{TransportSubprotocol, transportFullSubprotocol}
	if o.ReadQueue <= 0 {
		o.ReadQueue = DefaultTransportReadQueue
	}
	ws, resp, err := websocket.Dial(ctx, url, &do)
	refused := false
	if resp != nil {
		refused = resp.Header.Get(RefusedHeader) != ""
		if resp.Body != nil {
			resp.Body.Close()
		}
	}
	if refused || (ws != nil && ws.Subprotocol() == transportFullSubprotocol) {
		// Over the Mux's cap: it closes the WebSocket with 1013 at once,
		// or answered 503. Say so now, not after a handshake timeout. In
		// a browser, which hides the header, the subprotocol says it.
		if ws != nil {
			ws.CloseNow()
		}
		err = ErrBridgeFull
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "websocket", Addr: transportNetAddr(url), Err: err}
	}
	if ws.Subprotocol() != TransportSubprotocol {
		ws.Close(websocket.StatusProtocolError, "netcode bridge: subprotocol "+TransportSubprotocol+" required")
		return nil, &net.OpError{Op: "dial", Net: "websocket", Addr: transportNetAddr(url),
			Err: fmt.Errorf("netcode bridge: server did not agree to subprotocol %s", TransportSubprotocol)}
	}
	ws.SetReadLimit(MaxTransportMessage)
	c := &TransportConn{
		ws:       ws,
		url:      url,
		q:        packetq.New(o.ReadQueue),
		readDone: make(chan struct{}),
	}
	go c.reader()
	return c, nil
}

// TransportListenPacket returns a function for netcode.Dialer.ListenPacket
// that dials url with DialTransport, so that the netcode client runs over
// the WebSocket transport:
//
//	d := netcode.Dialer{ListenPacket: bridge.TransportListenPacket("wss://game.example.com/netcode", nil)}
//	conn, err := d.DialContext(ctx, connectToken)
func TransportListenPacket(url string, opts *TransportOptions) func(ctx context.Context, network, localAddr string) (net.PacketConn, error) {
	return func(ctx context.Context, _, _ string) (net.PacketConn, error) {
		c, err := DialTransport(ctx, url, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

func (c *TransportConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "websocket", Addr: transportNetAddr(c.url), Err: err}
}

// reader feeds the server's messages to the read queue, and ends it, when
// the WebSocket ends, with an error wrapping net.ErrClosed that says why.
func (c *TransportConn) reader() {
	defer close(c.readDone)
	buf := make([]byte, MaxTransportMessage+1)
	err := func() error {
		for {
			typ, n, err := readMessage(c.ws, buf)
			switch {
			case err != nil:
				return err
			case typ != websocket.MessageBinary:
				c.ws.Close(websocket.StatusUnsupportedData, "netcode bridge: only binary messages are accepted")
				return errors.New("netcode bridge: text message from the server")
			case n > MaxTransportMessage:
				return errPacketTooBig
			case n > 0:
				c.q.Push(netip.AddrPort{}, buf[:n]) // full: dropped, as by a full socket buffer
			}
		}
	}()
	if websocket.CloseStatus(err) == CodeBridgeFull {
		// Refused for the cap, where DialTransport could not see the
		// header (a browser's WebSocket hides it).
		err = ErrBridgeFull
	}
	c.q.End(fmt.Errorf("%w: %w", net.ErrClosed, err))
}

// serverAddr is the address the server's datagrams are attributed to.
func (c *TransportConn) serverAddr() netip.AddrPort {
	if p := c.server.Load(); p != nil {
		return *p
	}
	return netip.AddrPort{}
}

// ReadFromUDPAddrPort reads one datagram from the server into b (truncated
// if b is short) and returns its length and the address last written to.
// Once the WebSocket has closed and the queue is empty, it returns an
// error wrapping net.ErrClosed.
func (c *TransportConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, _, err := c.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, c.opError("read", err)
	}
	return n, c.serverAddr(), nil
}

// ReadFrom implements net.PacketConn; the address is a *net.UDPAddr.
func (c *TransportConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

// WriteToUDPAddrPort sends b (1 to MaxTransportMessage bytes) as one
// binary message and remembers addr as the server's address.
func (c *TransportConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	switch {
	case len(b) == 0:
		return 0, c.opError("write", errEmptyPacket)
	case len(b) > MaxTransportMessage:
		return 0, c.opError("write", errPacketTooBig)
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if p := c.server.Load(); p == nil || *p != addr {
		a := new(netip.AddrPort) // only when the server changes
		*a = addr
		c.server.Store(a)
	}
	ctx := context.Background()
	if t := c.wdl.Load(); t != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, t))
		defer cancel()
	}
	if err := c.ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		if ctx.Err() != nil {
			err = os.ErrDeadlineExceeded
		}
		return 0, c.opError("write", err)
	}
	return len(b), nil
}

// WriteTo implements net.PacketConn.
func (c *TransportConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	return c.WriteToUDPAddrPort(b, transport.AddrPortOf(addr))
}

// LocalAddr returns the WebSocket's URL as a net.Addr of network
// "websocket".
func (c *TransportConn) LocalAddr() net.Addr { return transportNetAddr(c.url) }

// SetDeadline sets the read and write deadlines.
func (c *TransportConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for ReadFrom.
func (c *TransportConn) SetReadDeadline(t time.Time) error {
	c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline for WriteTo. Note that a write that
// times out closes the WebSocket.
func (c *TransportConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		c.wdl.Store(0)
	} else {
		c.wdl.Store(t.UnixNano())
	}
	return nil
}

// Close closes the WebSocket (normal closure) and waits for the reader
// goroutine to exit. Later calls return an error wrapping net.ErrClosed.
func (c *TransportConn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	c.q.Close() // reads fail at once; what is queued is freed
	c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.readDone
	return nil
}
