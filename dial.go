package netcode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// Dialer connects to netcode servers. The zero value is ready to use.
type Dialer struct {
	// LocalAddr is the optional local "host:port" to send from.
	LocalAddr string
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger
	// ListenPacket, if set, opens the datagram transport the client uses
	// instead of a UDP socket (an in-memory network in tests, or a tunnel).
	// network is "udp", "udp4" or "udp6" as the token's addresses need; the
	// Conn owns the result and closes it.
	ListenPacket func(ctx context.Context, network, localAddr string) (net.PacketConn, error)
	// ReadQueue is how many received payloads the Conn holds for Read;
	// 0 means DefaultReadQueue.
	ReadQueue int
	// TickInterval is how often the client sends what is due and checks
	// timeouts; 0 means 10 ms.
	TickInterval time.Duration
	// SocketBuffer is the receive and send buffer size in bytes the Conn's
	// UDP socket asks for (best effort; the system may cap it); 0 means
	// 4 MiB. Processes that dial many Conns, such as a bridge's relay, save
	// kernel memory with a smaller one. It has no effect with ListenPacket.
	SocketBuffer int
	// PacketTagging marks every packet the client sends with DSCP 46
	// (expedited forwarding), as ServerConfig.PacketTagging does. Off by
	// default; an operating system's refusal is logged at Warn level and
	// the Conn works untagged.
	PacketTagging bool
}

// Dial connects with a connect token, trying the token's servers in order,
// and returns once connected.
func Dial(connectToken []byte) (*Conn, error) {
	return DialContext(context.Background(), connectToken)
}

// DialContext is Dial with a context that can cancel the handshake.
func DialContext(ctx context.Context, connectToken []byte) (*Conn, error) {
	var d Dialer
	return d.DialContext(ctx, connectToken)
}

// DialContext connects with a connect token, trying the token's servers in
// order, and returns once connected. The errors it can return wrap
// ErrInvalidConnectToken, ErrConnectTokenExpired, ErrConnectionDenied,
// ErrConnectionRequestTimedOut, ErrConnectionResponseTimedOut or the
// context's error.
func (d *Dialer) DialContext(ctx context.Context, connectToken []byte) (*Conn, error) {
	tok, err := token.Parse(connectToken)
	if err != nil {
		return nil, opError("dial", nil, nil, fmt.Errorf("%w: %v", ErrInvalidConnectToken, err))
	}
	network := tokenNetwork(tok)
	// Errors name the server tried: the first until the handshake moves on.
	first := net.UDPAddrFromAddrPort(netip.AddrPortFrom(tok.ServerAddrs[0].Addr().Unmap(), tok.ServerAddrs[0].Port()))
	laddr := d.LocalAddr
	var pc net.PacketConn
	if d.ListenPacket != nil {
		pc, err = d.ListenPacket(ctx, network, laddr)
	} else {
		if laddr == "" {
			laddr = ":0"
		}
		pc, err = transport.ListenUDP(network, laddr, d.SocketBuffer)
	}
	if err != nil {
		return nil, opError("dial", nil, first, err)
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if d.PacketTagging {
		if err := transport.SetTrafficClass(pc, transport.ExpeditedForwarding); err != nil {
			log.Warn("netcode: packet tagging refused; packets go untagged", "addr", pc.LocalAddr().String(), "err", err)
		}
	}
	tc := transport.New(pc)
	tick := d.TickInterval
	if tick <= 0 {
		tick = defaultTick
	}
	dc := &dialConn{
		tc:        tc,
		sink:      directSink{tc: tc},
		connected: make(chan struct{}),
		failed:    make(chan struct{}),
		stop:      make(chan struct{}),
		tick:      tick,
	}
	dc.conn = newConn(dc, tc.LocalAddr(), nil, newQueue(d.ReadQueue))
	dc.core = client.New(time.Now(), connectToken, (*clientEvents)(dc), log)
	if dc.core.State() != client.SendingConnectionRequest {
		tc.Close()
		return nil, opError("dial", nil, first, ErrInvalidConnectToken)
	}
	dc.wg.Add(2)
	go dc.readLoop()
	go dc.tickLoop()

	select {
	case <-dc.connected:
		dc.conn.remote = net.UDPAddrFromAddrPort(dc.core.ServerAddr())
		dc.conn.clientIndex = dc.core.ClientIndex()
		dc.conn.maxClients = dc.core.MaxClients()
		return dc.conn, nil
	case <-dc.failed:
		dc.shutdown()
		return nil, opError("dial", dc.conn.local, dc.serverTried(), dc.failErr)
	case <-ctx.Done():
		dc.core.Disconnect(&dc.sink)
		dc.shutdown()
		return nil, opError("dial", dc.conn.local, dc.serverTried(), ctx.Err())
	}
}

// serverTried is the address of the server the handshake was with last.
func (dc *dialConn) serverTried() net.Addr {
	return net.UDPAddrFromAddrPort(dc.core.ServerAddr())
}

// tokenNetwork picks the socket family the token's servers need.
func tokenNetwork(t *token.ConnectToken) string {
	v4, v6 := false, false
	for _, a := range t.ServerAddrs {
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

// dialConn is the client side of a Conn: the client core, its socket and
// its two goroutines.
type dialConn struct {
	tc   transport.Conn
	core *client.Client
	conn *Conn
	sink directSink
	tick time.Duration

	connected chan struct{} // closed on reaching Connected
	failed    chan struct{} // closed on failing before Connected
	failErr   error         // written before failed is closed
	wasUp     bool          // guarded by the core's lock (events run under it)

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func (dc *dialConn) readLoop() {
	defer dc.wg.Done()
	err := transport.ReadLoop(dc.tc, 16, dc.stop, func(ms []transport.Message) {
		now := time.Now()
		for i := range ms {
			if len(ms[i].Buf) <= protocol.MaxPacketBytes {
				dc.core.Receive(now, ms[i].Addr, ms[i].Buf)
			}
		}
	}, nil)
	if err == nil {
		return
	}
	// The socket failed for good. A connected Conn ends at once with the
	// error; a handshake in progress hears nothing more and times out.
	select {
	case <-dc.connected:
		dc.conn.end(fmt.Errorf("reading from %v: %w", dc.core.ServerAddr(), err))
		dc.halt()
	default:
	}
}

func (dc *dialConn) tickLoop() {
	defer dc.wg.Done()
	t := time.NewTicker(dc.tick)
	defer t.Stop()
	for {
		select {
		case <-dc.stop:
			return
		case <-t.C:
			dc.core.Update(time.Now(), &dc.sink)
		}
	}
}

// halt stops the goroutines and closes the socket without waiting; it is
// safe to call from within an event.
func (dc *dialConn) halt() {
	dc.stopOnce.Do(func() {
		close(dc.stop)
		dc.tc.Close()
	})
}

// shutdown halts and waits for the goroutines to exit.
func (dc *dialConn) shutdown() {
	dc.halt()
	dc.wg.Wait()
}

func (dc *dialConn) send(now time.Time, p []byte) error {
	err := dc.core.Send(now, p, &dc.sink)
	if errors.Is(err, client.ErrNotConnected) {
		if e := dc.conn.Err(); e != nil {
			return e
		}
		return net.ErrClosed
	}
	return err
}

func (dc *dialConn) close() {
	dc.core.Disconnect(&dc.sink)
	dc.shutdown()
}

// clientEvents receives the client core's events (with its lock held).
type clientEvents dialConn

func (e *clientEvents) StateChanged(from, to client.State) {
	dc := (*dialConn)(e)
	if to == client.Connected {
		// The core enters Connected once per connection; the guard keeps a
		// second entry from closing the channel twice all the same.
		if !dc.wasUp {
			dc.wasUp = true
			close(dc.connected)
		}
		return
	}
	if to > client.Disconnected {
		return
	}
	err := stateError(to)
	if dc.wasUp {
		dc.conn.end(err)
	} else {
		dc.failErr = err
		close(dc.failed)
	}
	dc.halt()
}

func (e *clientEvents) Payload(p []byte) {
	(*dialConn)(e).conn.deliver(p)
}

// stateError maps a final client state to the error it ends with.
func stateError(s client.State) error {
	switch s {
	case client.ConnectTokenExpired:
		return ErrConnectTokenExpired
	case client.InvalidConnectToken:
		return ErrInvalidConnectToken
	case client.ConnectionTimedOut:
		return ErrConnectionTimedOut
	case client.ConnectionResponseTimedOut:
		return ErrConnectionResponseTimedOut
	case client.ConnectionRequestTimedOut:
		return ErrConnectionRequestTimedOut
	case client.ConnectionDenied:
		return ErrConnectionDenied
	}
	return io.EOF
}
