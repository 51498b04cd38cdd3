package transport

import (
	"context"
	"errors"
	"fmt"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/internal/monoclock"
	"github.com/gonetcode/netcode/internal/packetq"
	dgram "github.com/gonetcode/netcode/internal/transport"
)

// Options configures Dial. The zero value is ready to use.
type Options struct {
	// DialOptions are passed to websocket.Dial; its Subprotocols are
	// replaced by Subprotocol.
	DialOptions *websocket.DialOptions
	// ReadQueue is how many received datagrams wait for ReadFrom; past it,
	// new ones are dropped. 0 means 256.
	ReadQueue int
}

// Conn is the client side of the end-to-end encrypted transport:
// a net.PacketConn over one WebSocket to a [Mux]. WriteTo sends any datagram
// as one binary message, whatever the address; ReadFrom returns the
// server's datagrams attributed to the address last written to, which is
// what a netcode client expects of its server. Use it as the transport of a
// netcode.Dialer with [ListenPacket]. It works in browsers too
// (GOOS=js GOARCH=wasm), over the browser's WebSocket.
type Conn struct {
	batchHook // the I/O by netip.AddrPort a netcode Dialer finds: connIO

	ws       *websocket.Conn
	url      string
	q        *packetq.Queue // the server's datagrams; ended when the WebSocket is
	closed   atomic.Bool    // Close was called
	readDone chan struct{}  // closed when the reader goroutine exits

	server atomic.Pointer[netip.AddrPort]
	wdl    atomic.Int64 // write deadline (internal/monoclock); 0 when none
}

// Dial opens a WebSocket to url (ws:// or wss://, or a path
// relative to the page in a browser) with the subprotocol
// Subprotocol and returns the connection. opts may be nil. A Mux
// that has its MaxSessions open refuses the session: the error wraps
// bridge.ErrBridgeFull, at once (by the response header Netcode-Bridge-Refused, or in a browser, which hides
// the headers, by the subprotocol the refusal agrees to, see
// Subprotocol). Should a session be refused after it opened,
// reads fail with an error wrapping bridge.ErrBridgeFull.
func Dial(ctx context.Context, url string, opts *Options) (*Conn, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var do websocket.DialOptions
	if o.DialOptions != nil {
		do = *o.DialOptions
	}
	do.Subprotocols = []string{Subprotocol, fullSubprotocol}
	if o.ReadQueue <= 0 {
		o.ReadQueue = defaultReadQueue
	}
	ws, resp, err := websocket.Dial(ctx, url, &do)
	refused := false
	if resp != nil {
		refused = resp.Header.Get(wsbridge.RefusedHeader) != ""
		if resp.Body != nil {
			resp.Body.Close()
		}
	}
	if refused || (ws != nil && ws.Subprotocol() == fullSubprotocol) {
		// Over the Mux's cap: it closes the WebSocket with 1013 at once,
		// or answered 503. Say so now, not after a handshake timeout. In
		// a browser, which hides the header, the subprotocol says it.
		if ws != nil {
			ws.CloseNow()
		}
		err = wsbridge.ErrFull
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "websocket", Addr: netAddr(url), Err: err}
	}
	if ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "netcode/bridge: subprotocol "+Subprotocol+" required")
		return nil, &net.OpError{Op: "dial", Net: "websocket", Addr: netAddr(url),
			Err: fmt.Errorf("netcode/bridge: server did not agree to subprotocol %s", Subprotocol)}
	}
	ws.SetReadLimit(maxMessage)
	c := &Conn{
		ws:       ws,
		url:      url,
		q:        packetq.New(o.ReadQueue),
		readDone: make(chan struct{}),
	}
	c.batchHook = batchHook{P: connIO{c}}
	go c.reader()
	return c, nil
}

// ListenPacket returns a function for netcode.Dialer.ListenPacket
// that dials url with Dial, so that the netcode client runs over
// the WebSocket transport:
//
//	d := netcode.Dialer{ListenPacket: transport.ListenPacket("wss://game.example.com/netcode", nil)}
//	conn, err := d.DialContext(ctx, connectToken)
func ListenPacket(url string, opts *Options) func(ctx context.Context, network, localAddr string) (net.PacketConn, error) {
	return func(ctx context.Context, _, _ string) (net.PacketConn, error) {
		c, err := Dial(ctx, url, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "websocket", Addr: netAddr(c.url), Err: err}
}

// reader feeds the server's messages to the read queue, and ends it, when
// the WebSocket ends, with an error wrapping net.ErrClosed that says why.
func (c *Conn) reader() {
	defer close(c.readDone)
	buf := make([]byte, maxMessage+1)
	err := func() error {
		for {
			typ, n, err := wsbridge.ReadMessage(c.ws, buf)
			switch {
			case err != nil:
				return err
			case typ != websocket.MessageBinary:
				c.ws.Close(websocket.StatusUnsupportedData, "netcode/bridge: only binary messages are accepted")
				return errors.New("netcode/bridge: text message from the server")
			case n > maxMessage:
				return errPacketTooBig
			case n > 0:
				c.q.Push(netip.AddrPort{}, buf[:n]) // full: dropped, as by a full socket buffer
			}
		}
	}()
	if websocket.CloseStatus(err) == wsbridge.CodeFull {
		// Refused for the cap, where Dial could not see the
		// header (a browser's WebSocket hides it).
		err = wsbridge.ErrFull
	}
	c.q.End(fmt.Errorf("%w: %w", net.ErrClosed, err))
}

// serverAddr is the address the server's datagrams are attributed to.
func (c *Conn) serverAddr() netip.AddrPort {
	if p := c.server.Load(); p != nil {
		return *p
	}
	return netip.AddrPort{}
}

// readFromAddrPort is ReadFrom without the *net.UDPAddr, which a netcode
// Dialer reaches through the hook (connIO).
func (c *Conn) readFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, _, err := c.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, c.opError("read", err)
	}
	return n, c.serverAddr(), nil
}

// ReadFrom reads one datagram from the server into b (truncated if b is
// short) and returns its length and the address last written to, a
// *net.UDPAddr. Once the WebSocket has closed and the queue is empty, it
// returns an error wrapping net.ErrClosed.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.readFromAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

// writeToAddrPort is WriteTo with a netip.AddrPort, which a netcode Dialer
// reaches through the hook (connIO).
func (c *Conn) writeToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	switch {
	case len(b) == 0:
		return 0, c.opError("write", errEmptyPacket)
	case len(b) > maxMessage:
		return 0, c.opError("write", errPacketTooBig)
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if p := c.server.Load(); p == nil || *p != addr {
		a := new(netip.AddrPort) // only when the server changes
		*a = addr
		c.server.Store(a)
	}
	ctx := context.Background()
	if t, ok := c.writeDeadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, t)
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

// WriteTo sends b (1 to protocol.MaxPacketBytes bytes) as one binary message and
// remembers addr as the server's address.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	return c.writeToAddrPort(b, dgram.AddrPortOf(addr))
}

// connIO is a Conn's I/O by netip.AddrPort for a netcode Dialer over it.
type connIO struct{ c *Conn }

func (x connIO) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return x.c.readFromAddrPort(b)
}
func (x connIO) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return x.c.writeToAddrPort(b, addr)
}

// LocalAddr returns the WebSocket's URL as a net.Addr of network
// "websocket".
func (c *Conn) LocalAddr() net.Addr { return netAddr(c.url) }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for ReadFrom.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline for WriteTo. Note that a write that
// times out closes the WebSocket.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(monoclock.Of(t))
	return nil
}

// writeDeadline is the write deadline, if one is set, measured on the
// monotonic clock (internal/monoclock): a step of the wall clock moves
// it no more than it moves package net's.
func (c *Conn) writeDeadline() (time.Time, bool) {
	t := c.wdl.Load()
	return monoclock.Time(t), t != 0
}

// Close closes the WebSocket (normal closure) and waits for the reader
// goroutine to exit. Later calls return an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	c.q.Close() // reads fail at once; what is queued is freed
	c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.readDone
	return nil
}
