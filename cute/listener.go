package cute

import (
	"context"
	"errors"
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
	"github.com/gonetcode/netcode/internal/monoclock"
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
	// MaxClients (every slot), as netcode's AcceptBacklog. A client that
	// finds it full is disconnected.
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
// engine (internal/engine, whose doc draws the goroutines and locks): per
// socket (one, or ServerConfig.ReadShards of them), one reader, which
// gives the socket to a Conn's Read that pulls (the read turn), and one
// send queue and writer (internal/sendq); a bounded read queue per Conn
// (internal/msgconn).
//
// Lock order: the core's locks (see core.Server) are never held while the
// Listener acts: every effect comes back in an Output and is acted on after
// the core returns. The ticker's lock is a leaf. conns is a slice of atomic
// pointers: the read loop finds a connection without a shared lock.
type Listener struct {
	// shards are the sockets, each with its reader, read turn and send
	// queue; the updater's keep-alives and Close's disconnects go through
	// the first's queue.
	shards []*shard
	core   *core.Server
	addr   net.Addr
	log    *slog.Logger
	cfg    ServerConfig
	max    int
	conns  []atomic.Pointer[Conn] // by slot; nil when free

	accept  chan *Conn
	closing chan struct{} // closed by Close
	once    sync.Once
	wg      sync.WaitGroup

	ticker *engine.Ticker // when the updater runs the core's Update next
	// fb sends the Conns' held Writes whose writer waits on something
	// else than the Conn, at most engine.HeldFallback after the first.
	fb *engine.Fallback

	received sendq.Traffic // datagrams the readers and pulling Reads took from the sockets
	outs     sync.Pool     // *core.ServerOutput for Close and the updater
}

// shard is one of a Listener's sockets and its binding to the socket
// engine (an engine.Socket of role Many, whose Receiver it is): the
// engine's reader, or a Conn's Read that pulls, hands it what it reads, in
// the socket's read turn. The Conns whose handshake it heard send through
// its queue and pull from its socket.
type shard struct {
	l    *Listener
	tc   transport.Conn
	sq   *sendq.Queue
	sock *engine.Socket
	rout core.ServerOutput // the read turn's
}

// Listen opens a UDP socket on address ("udp", "udp4" or "udp6") and
// serves the Cute Protocol on it.
func Listen(network, address string, cfg *ServerConfig) (*Listener, error) {
	c, err := checkServerConfig(cfg)
	if err != nil {
		return nil, err
	}
	return transport.ListenServer(c.Socket.options(c.Logger), network, address, c.Socket.ReadShards, func(pcs []net.PacketConn) (*Listener, error) {
		return newListener(pcs, c)
	})
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
	return newListener([]net.PacketConn{pc}, c)
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

// newListener serves the Cute Protocol on pcs, sockets bound to one
// address (tests pass simulated ones), checked by checkServerConfig; on an
// error pcs are left open.
func newListener(pcs []net.PacketConn, c ServerConfig) (*Listener, error) {
	uc := pcs[0]
	fail := func(err error) (*Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: "cute", Addr: uc.LocalAddr(), Err: err}
	}
	addrs, err := transport.ServerAddrs(c.PublicAddr, uc.LocalAddr())
	if err != nil {
		return fail(fmt.Errorf("cute: %w", err))
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
		return fail(err)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{
		core:    srv,
		addr:    uc.LocalAddr(),
		log:     log,
		cfg:     c,
		max:     maxClients,
		conns:   make([]atomic.Pointer[Conn], maxClients),
		accept:  msgconn.NewAcceptQueue[*Conn](c.AcceptQueue, maxClients),
		closing: make(chan struct{}),
		ticker:  engine.NewTicker(),
		fb:      engine.NewFallback(),
	}
	l.outs.New = func() any { return new(core.ServerOutput) }
	for _, pc := range pcs {
		tc := transport.New(pc)
		// It takes a client's train (a GSO sender's) as one read, where
		// the kernel can.
		transport.EnableGRO(tc)
		sh := &shard{l: l, tc: tc, sq: sendq.New(tc, isKeepAlive, sendq.Len)}
		sh.sock = engine.NewSocket(tc, engine.Many, readBatch, sh, l.closing)
		l.shards = append(l.shards, sh)
	}
	l.wg.Add(len(l.shards) + 1)
	for _, sh := range l.shards {
		go sh.readLoop()
	}
	go l.updater()
	return l, nil
}

// readBatch is how many datagrams a Listener's reader takes from its
// socket at once.
const readBatch = 64

// readLoop is the socket's reader: the engine's loop (Socket.Run), which
// gives the socket to a Conn's Read that pulls while one waits.
func (sh *shard) readLoop() {
	l := sh.l
	defer l.wg.Done()
	err := sh.sock.Run(func(err error) {
		l.log.Debug("cute: read error", "addr", l.addr.String(), "err", err)
	})
	if err != nil {
		l.log.Error("cute: the socket failed; the listener stops reading it", "addr", l.addr.String(), "err", err)
	}
}

// Receive is engine.Receiver's: it hands a batch to the core and acts on
// each Output, in the read turn (the reader's, or a pulling Read's).
func (sh *shard) Receive(ms []transport.Message) {
	if len(ms) > 1 {
		sh.sq.Burst() // their replies leave together
	}
	sh.l.received.AddAll(ms)
	now := monoclock.TimeNow() // a packet's path: one clock read
	for i := range ms {
		from := netip.AddrPortFrom(ms[i].Addr.Addr().Unmap(), ms[i].Addr.Port())
		sh.l.core.Receive(now, from, ms[i].Buf, &sh.rout)
		// Handshake replies never wait on the socket: the client
		// resends at 10 Hz.
		sh.l.act(sh, now, &sh.rout, sendq.NoWait)
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
		l.act(l.shards[0], now, out, sendq.NoWait) // keepalives: dropped on a full queue, never waited for
		return next
	})
}

// act sends out's datagrams through sh's send queue and acts on its
// events, with no lock held: a connection made is sh's.
func (l *Listener) act(sh *shard, now time.Time, out *core.ServerOutput, stop <-chan struct{}) {
	if len(out.Datagrams) > 0 {
		_ = sh.sq.Send(out.Datagrams, stop, nil, nil)
	}
	for i := range out.Events {
		ev := &out.Events[i]
		switch ev.Kind {
		case core.EventConnected:
			l.connected(sh, now, ev)
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

// connected makes the Conn of a new connection, whose handshake sh heard,
// and queues it for Accept.
func (l *Listener) connected(sh *shard, now time.Time, ev *core.Event) {
	e := &serverEndpoint{l: l, sh: sh, index: ev.Index, g: ev.Gen, turn: engine.NewWriteTurn(), wake: make(chan struct{}, 1)}
	c := &Conn{clientID: ev.ClientID, index: ev.Index, gen: ev.Gen, maxClients: l.max, userData: ev.UserData}
	e.c = c
	q := msgconn.NewQueue(l.cfg.ReadQueue, DefaultReadQueue)
	e.hw.InitQueue(sh.sq, e.wake, e.turn, q.Done(), l.fb)
	e.hw.Enable(true)
	e.Reader = sh.sock.NewReader(q.Len, q.Done(), e.hw.Flush)
	c.m.Init(e, &connRules, l.addr, net.UDPAddrFromAddrPort(ev.Addr), q)
	if !l.cfg.BareProtocol {
		_ = c.startMessages(now, l.cfg.Messages, e.hw.Flush) // checked by Listen
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
	sh    *shard // the socket that heard its handshake: its queue and reads
	c     *Conn
	index int
	g     uint64           // the connection's generation in its slot
	turn  engine.WriteTurn // the write turn: one Write seals and queues at a time
	wake  chan struct{}    // the send queue's room signal for this Conn
	out   core.ServerOutput
	// hw holds the Writes made while a Read would find something at once
	// (Conn.readable: a burst being answered) and sends them as one
	// train through the send queue with the burst's last Write, a Read
	// that finds nothing, or at the latest by the Listener's fallback
	// (the engine's Held, as netcode's server Conns').
	hw engine.Held
	// Reader is the Conn's pulling Reads of the socket (msgconn.Puller):
	// the engine's.
	*engine.Reader
}

// SendPayload seals p and queues it, in sequence order, or holds it for a
// train while a Read would find something at once (engine.Held).
func (e *serverEndpoint) SendPayload(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !e.turn.Take(stop, deadline) {
		return engine.TurnErr(stop)
	}
	defer e.turn.Give()
	if err := e.l.core.SendConn(now, e.index, e.g, p, &e.out); err != nil {
		return sendErr(err)
	}
	return e.hw.Send(e.out.Datagrams, e.c.readable(), now, deadline)
}

// SendPayloads is msgconn.BatchEndpoint's: it seals ps and hands their
// packets to the send queue a train at a time (engine.SendTrains), so that
// the socket sends each train in one system call; it holds the write turn
// throughout, as SendPayload does.
func (e *serverEndpoint) SendPayloads(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	return engine.SendTrains(e.turn, ps, payloadOverhead, stop, deadline, func(train [][]byte) (int, error) {
		n, err := e.l.core.SendConnBatch(now, e.index, e.g, train, &e.out)
		if err != nil {
			return 0, sendErr(err)
		}
		return n, e.hw.WriteUntil(e.out.Datagrams, false, stop, deadline) // behind those held
	})
}

// sendErr is a server Conn's Write error for the core's: the connection
// ended (sendq.ErrStopped, which the Conn turns into its end), or a
// payload too large (which msgconn refuses before).
func sendErr(err error) error {
	if errors.Is(err, core.ErrPayloadSize) {
		return ErrPayloadTooLarge
	}
	return sendq.ErrStopped
}

// ClosePeer disconnects the client, with its DISCONNECT packets, behind
// the Writes held.
func (e *serverEndpoint) ClosePeer() {
	e.turn.Wait() // the Writes waiting for it gave up: the Conn ended
	_ = e.hw.WriteUntil(nil, false, sendq.NoWait, nil)
	e.turn.Give()
	out := e.l.outs.Get().(*core.ServerOutput)
	if e.l.core.DisconnectConn(time.Now(), e.index, e.g, true, out) == nil {
		e.l.act(e.sh, time.Now(), out, sendq.NoWait) // Close never waits on the socket: through the Conn's queue, behind its Writes
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

// sendCount sums a counter of the send queues.
func (l *Listener) sendCount(count func(*sendq.Queue) uint64) uint64 {
	n := uint64(0)
	for _, sh := range l.shards {
		n += count(sh.sq)
	}
	return n
}

// Close disconnects every client (with DISCONNECT packets), stops the
// read loop and the writer, and closes the socket. Conns end with
// net.ErrClosed; Accept returns net.ErrClosed.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() {
		first = true
		close(l.closing)
		l.fb.Close()
		// The Writes the Conns hold leave before the disconnects (a
		// Write that races Close may follow them, as it may fail).
		for i := range l.conns {
			if c := l.conns[i].Load(); c != nil {
				if e, ok := c.m.Endpoint().(*serverEndpoint); ok {
					e.hw.Flush()
				}
			}
		}
		out := l.outs.Get().(*core.ServerOutput)
		l.core.DisconnectAll(time.Now(), true, out)
		l.act(l.shards[0], time.Now(), out, sendq.NoWait)
		for _, sh := range l.shards {
			sh.sq.Close() // sends what is queued
		}
		for _, sh := range l.shards {
			sh.tc.Close()
		}
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
