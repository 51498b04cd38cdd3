package cute

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/cute/internal/core"
	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
)

// Server limits, as in cute_net.h.
const (
	// DefaultMaxClients is the slot count of a zero ServerConfig.
	DefaultMaxClients = core.DefaultMaxClients
	// MaxMaxClients bounds ServerConfig.MaxClients.
	MaxMaxClients = core.MaxMaxClients
	// DefaultMaxPending bounds the handshakes in progress at once.
	DefaultMaxPending = core.DefaultMaxPending
	// HalfOpenTimeout ends a handshake that has not completed this long
	// after its token first arrived, however often the token is resent;
	// the token may then not start another handshake until it expires.
	HalfOpenTimeout = core.HalfOpenTimeout
	// DefaultAcceptQueue is how many connected clients wait for Accept.
	DefaultAcceptQueue = 64
	// HistoryPerSlot is how many consumed tokens the server remembers per
	// slot (at least 4096 in all), each until it expires.
	HistoryPerSlot = 32
)

// ServerConfig configures a Listener. PublicKey and SecretKey are
// required; every other zero field means its default.
type ServerConfig struct {
	// ApplicationID must match the tokens'.
	ApplicationID uint64
	// PublicKey and SecretKey are the deployment's signing key pair (see
	// GenerateKeyPair): the public key verifies tokens, the secret key
	// opens their secret sections.
	PublicKey PublicKey
	SecretKey SecretKey
	// PublicAddr is the "host:port" tokens list for this server, where it
	// differs from the bound address (NAT, a load balancer), as in
	// netcode's ServerConfig. A token is answered only if it lists
	// PublicAddr or the bound address; a server bound to a wildcard
	// address (0.0.0.0 or ::) is known by every address of the machine's
	// interfaces at its port.
	PublicAddr string
	// MaxClients is the slot count (CONNECTION_ACCEPTED tells clients);
	// 0 means DefaultMaxClients, at most MaxMaxClients.
	MaxClients int
	// MaxPending bounds the handshakes in progress; 0 means
	// DefaultMaxPending. When full, new tokens are refused: no live
	// handshake or connection is ever evicted.
	MaxPending int
	// ConnectionTimeout ends a connection silent for this long, whole
	// seconds; 0 means 10 s, Cute Framework's default.
	ConnectionTimeout time.Duration
	// ReadQueue is how many received PAYLOAD packets each Conn holds, for
	// Read on a bare protocol Conn, for the client/server layer otherwise;
	// 0 means DefaultReadQueue.
	ReadQueue int
	// AcceptQueue is how many connected clients wait for Accept; 0 means
	// DefaultAcceptQueue. A client that finds it full is disconnected.
	AcceptQueue int
	// Messages tunes the client/server layer every Conn speaks (see Conn).
	Messages MessageConfig
	// BareProtocol makes every Conn speak the bare protocol layer, without
	// Cute Framework's client/server layer: one Write is one PAYLOAD
	// packet, for users who bring their own layer. A Cute Framework game
	// does not understand it.
	BareProtocol bool
	// Logger receives the server's logs; nil is silent.
	Logger *slog.Logger
	// Socket sets up the server's UDP socket: its buffers, packet tagging
	// and a Control hook.
	Socket SocketConfig
}

// Listener is a Cute server: a net.Listener whose Accept returns a *Conn
// per connected client. Its machinery is netcode's: it binds to the socket
// engine (internal/engine, whose doc draws the goroutines and locks): one
// reader per socket, which gives the socket to a Conn's Read that pulls
// (the read turn), one send queue and writer (internal/sendq), a bounded
// read queue per Conn (internal/msgconn).
//
// Lock order: the core's locks (see core.Server) are never held while the
// Listener acts: every effect comes back in an Output and is acted on after
// the core returns. The ticker's lock is a leaf. conns is a slice of atomic
// pointers: the read loop finds a connection without a shared lock.
type Listener struct {
	tc    transport.Conn
	sock  *engine.Socket // the socket's reader and read turn (a Many socket)
	sq    *sendq.Queue
	core  *core.Server
	addr  net.Addr
	log   *slog.Logger
	cfg   ServerConfig
	max   int
	conns []atomic.Pointer[Conn] // by slot; nil when free

	accept  chan *Conn
	closing chan struct{} // closed by Close
	once    sync.Once
	wg      sync.WaitGroup

	ticker *engine.Ticker // when the updater runs the core's Update next

	received sendq.Traffic // datagrams the reader and pulling Reads took from the socket

	rout core.ServerOutput // the read turn's
	outs sync.Pool         // *core.ServerOutput for Close and the updater
}

// Listen opens a UDP socket on address ("udp", "udp4" or "udp6") and
// serves the Cute Protocol on it.
func Listen(network, address string, cfg *ServerConfig) (*Listener, error) {
	c, err := checkServerConfig(cfg)
	if err != nil {
		return nil, err
	}
	ucs, err := c.Socket.options(c.Logger).Listen(network, address, 1)
	if err != nil {
		return nil, err
	}
	l, err := newListener(ucs[0], c)
	if err != nil {
		ucs[0].Close()
		return nil, err
	}
	return l, nil
}

// NewListener serves the Cute Protocol on any datagram transport. The
// Listener owns pc: Close closes it. On an error pc is left open.
// cfg.Socket applies to pc as SocketConfig says: Buffer and PacketTagging
// if pc is a *net.UDPConn; a Control hook is refused.
func NewListener(pc net.PacketConn, cfg *ServerConfig) (*Listener, error) {
	c, err := checkServerConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Socket.options(c.Logger).Apply(pc); err != nil {
		return nil, &net.OpError{Op: "listen", Net: "cute", Addr: pc.LocalAddr(), Err: err}
	}
	return newListener(pc, c)
}

// checkServerConfig refuses a configuration no server should run with,
// and returns a copy of it.
func checkServerConfig(cfg *ServerConfig) (ServerConfig, error) {
	if cfg == nil {
		cfg = &ServerConfig{}
	}
	c := *cfg
	if err := c.SecretKey.check(); err != nil {
		return c, &net.OpError{Op: "listen", Net: "cute", Err: err}
	}
	if c.SecretKey.Public() != c.PublicKey {
		return c, &net.OpError{Op: "listen", Net: "cute", Err: ErrKeyMismatch}
	}
	if err := c.Messages.check(); err != nil {
		return c, &net.OpError{Op: "listen", Net: "cute", Err: err}
	}
	return c, nil
}

// newListener serves the Cute Protocol on uc, checked by
// checkServerConfig; on an error uc is left open.
func newListener(uc net.PacketConn, c ServerConfig) (*Listener, error) {
	addrs, err := transport.ServerAddrs(c.PublicAddr, uc.LocalAddr())
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "cute", Addr: uc.LocalAddr(), Err: fmt.Errorf("cute: %w", err)}
	}
	maxClients := c.MaxClients
	if maxClients == 0 {
		maxClients = DefaultMaxClients
	}
	now := time.Now()
	srv, err := core.NewServer(now, core.ServerConfig{
		ApplicationID:     c.ApplicationID,
		PublicKey:         c.PublicKey,
		SecretKey:         c.SecretKey,
		Addrs:             addrs,
		MaxClients:        maxClients,
		MaxPending:        c.MaxPending,
		ConnectionTimeout: c.ConnectionTimeout,
		History:           core.NewHistory(max(maxClients*HistoryPerSlot, 4096), uint64(now.Unix())),
	})
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "cute", Addr: uc.LocalAddr(), Err: err}
	}
	if c.AcceptQueue <= 0 {
		c.AcceptQueue = DefaultAcceptQueue
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tc := transport.New(uc)
	// It takes a client's train (a GSO sender's) as one read, where the
	// kernel can.
	transport.EnableGRO(tc)
	l := &Listener{
		tc:      tc,
		sq:      sendq.New(tc, isKeepAlive, sendq.Len),
		core:    srv,
		addr:    uc.LocalAddr(),
		log:     log,
		cfg:     c,
		max:     maxClients,
		conns:   make([]atomic.Pointer[Conn], maxClients),
		accept:  make(chan *Conn, c.AcceptQueue),
		closing: make(chan struct{}),
		ticker:  engine.NewTicker(),
	}
	l.outs.New = func() any { return new(core.ServerOutput) }
	l.sock = engine.NewSocket(tc, engine.Many, 64, listenerReceiver{l}, l.closing)
	l.wg.Add(2)
	go l.readLoop()
	go l.updater()
	return l, nil
}

// readLoop is the socket's reader: the engine's loop (Socket.Run), which
// gives the socket to a Conn's Read that pulls while one waits.
func (l *Listener) readLoop() {
	defer l.wg.Done()
	err := l.sock.Run(func(err error) {
		l.log.Debug("cute: read error", "addr", l.addr.String(), "err", err)
	})
	if err != nil {
		l.log.Error("cute: the socket failed; the listener stops reading", "addr", l.addr.String(), "err", err)
	}
}

// listenerReceiver is the Listener's binding to its socket
// (engine.Receiver).
type listenerReceiver struct{ l *Listener }

// Receive hands a batch to the core and acts on each Output, in the read
// turn (the reader's, or a pulling Read's).
func (r listenerReceiver) Receive(ms []transport.Message) {
	l := r.l
	if len(ms) > 1 {
		l.sq.Burst() // their replies leave together
	}
	l.received.AddAll(ms)
	now := time.Now()
	for i := range ms {
		from := netip.AddrPortFrom(ms[i].Addr.Addr().Unmap(), ms[i].Addr.Port())
		l.core.Receive(now, from, ms[i].Buf, &l.rout)
		// Handshake replies never wait on the socket: the client
		// resends at 10 Hz.
		l.act(now, &l.rout, sendq.NoWait)
	}
}

// updater runs the core's Update when it is due (the engine's
// Ticker): at the deadline Update returned, or an earlier one an Output of
// another call reported (act), SendRate at most apart.
func (l *Listener) updater() {
	defer l.wg.Done()
	out := new(core.ServerOutput)
	l.ticker.Run(l.closing, core.SendRate, func(now time.Time) time.Time {
		l.core.Update(now, out)
		next := out.Next
		l.act(now, out, sendq.NoWait) // keepalives: dropped on a full queue, never waited for
		return next
	})
}

// act sends out's datagrams and acts on its events, with no lock held.
func (l *Listener) act(now time.Time, out *core.ServerOutput, stop <-chan struct{}) {
	if len(out.Datagrams) > 0 {
		_ = l.sq.Send(out.Datagrams, stop, nil, nil)
	}
	for i := range out.Events {
		ev := &out.Events[i]
		switch ev.Kind {
		case core.EventConnected:
			l.connected(now, ev)
		case core.EventPayload:
			if c := l.conns[ev.Index].Load(); c != nil && c.gen == ev.Gen {
				c.deliver(ev.Payload)
			}
		case core.EventDisconnected:
			c := l.conns[ev.Index].Load()
			if c == nil || c.gen != ev.Gen || !l.conns[ev.Index].CompareAndSwap(c, nil) {
				continue
			}
			switch ev.Reason {
			case core.ReasonClient:
				c.m.End(io.EOF)
			case core.ReasonTimeout:
				c.m.End(ErrConnectionTimedOut)
			default:
				c.m.End(net.ErrClosed)
			}
			l.log.Debug("cute: client disconnected", "addr", ev.Addr.String(), "client", ev.ClientID, "reason", ev.Reason)
		}
	}
	l.ticker.Earlier(out.Next)
}

// connected makes the Conn of a new connection and queues it for Accept.
func (l *Listener) connected(now time.Time, ev *core.Event) {
	e := &serverEndpoint{l: l, index: ev.Index, g: ev.Gen, turn: engine.NewWriteTurn(), wake: make(chan struct{}, 1)}
	c := &Conn{clientID: ev.ClientID, index: ev.Index, gen: ev.Gen, maxClients: l.max, userData: ev.UserData}
	e.c = c
	q := msgconn.NewQueue(l.cfg.ReadQueue, DefaultReadQueue)
	e.Reader = l.sock.NewReader(q.Len, q.Done(), nil)
	c.m.Init(e, &connRules, l.addr, net.UDPAddrFromAddrPort(ev.Addr), q)
	if !l.cfg.BareProtocol {
		_ = c.startMessages(now, l.cfg.Messages) // checked by Listen
	}
	l.conns[ev.Index].Store(c)
	l.log.Debug("cute: client connected", "addr", ev.Addr.String(), "client", ev.ClientID, "slot", ev.Index)
	select {
	case l.accept <- c:
	default:
		l.log.Warn("cute: accept queue full; client disconnected", "addr", ev.Addr.String(), "client", ev.ClientID)
		c.Close()
	}
}

// serverEndpoint sends a server Conn's payloads and disconnects.
type serverEndpoint struct {
	l     *Listener
	c     *Conn
	index int
	g     uint64           // the connection's generation in its slot
	turn  engine.WriteTurn // the write turn: one Write seals and queues at a time
	wake  chan struct{}    // the send queue's room signal for this Conn
	out   core.ServerOutput
	// Reader is the Conn's pulling Reads of the socket (msgconn.Puller):
	// the engine's.
	*engine.Reader
}

// SendPayload seals p and queues it, in sequence order.
func (e *serverEndpoint) SendPayload(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !e.turn.Take(stop, deadline) {
		return engine.TurnErr(stop)
	}
	defer e.turn.Give()
	if err := e.l.core.SendConn(now, e.index, e.g, p, &e.out); err != nil {
		return sendq.ErrStopped // the connection ended
	}
	return e.l.sq.Send(e.out.Datagrams, stop, deadline, e.wake)
}

// ClosePeer disconnects the client, with its DISCONNECT packets.
func (e *serverEndpoint) ClosePeer() {
	out := e.l.outs.Get().(*core.ServerOutput)
	if e.l.core.DisconnectConn(time.Now(), e.index, e.g, true, out) == nil {
		e.l.act(time.Now(), out, sendq.NoWait) // Close never waits on the socket
	}
	e.l.outs.Put(out)
	e.Stop() // a Read reading the socket does not wait for its next datagram
}

// Accept waits for the next connected client and returns its *Conn. After
// Close it returns an error wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept with a context and the concrete type.
func (l *Listener) AcceptConn(ctx context.Context) (*Conn, error) {
	return msgconn.Accept(ctx, l.accept, l.closing, "cute", l.addr)
}

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// ClientCount returns the number of connected clients.
func (l *Listener) ClientCount() int { return l.core.ClientCount() }

// Close disconnects every client (with DISCONNECT packets), stops the
// read loop and the writer, and closes the socket. Conns end with
// net.ErrClosed; Accept returns net.ErrClosed.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() {
		first = true
		close(l.closing)
		out := l.outs.Get().(*core.ServerOutput)
		l.core.DisconnectAll(time.Now(), true, out)
		l.act(time.Now(), out, sendq.NoWait)
		l.sq.Close() // sends what is queued
		l.tc.Close()
		l.wg.Wait()
		// A connection the read loop made after DisconnectAll ends too.
		for i := range l.conns {
			if c := l.conns[i].Swap(nil); c != nil {
				c.m.End(net.ErrClosed)
			}
		}
	})
	if !first {
		return &net.OpError{Op: "close", Net: "cute", Addr: l.addr, Err: net.ErrClosed}
	}
	return nil
}

var _ net.Listener = (*Listener)(nil)

// String names the listener for logs.
func (l *Listener) String() string { return fmt.Sprintf("cute.Listener(%v)", l.addr) }
