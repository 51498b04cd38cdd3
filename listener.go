package netcode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/transport"
)

// readBatch is how many datagrams the reader takes from the socket at once.
const readBatch = 64

// Listener is a netcode server. It implements net.Listener: Accept returns a
// *Conn for every client that completes the handshake.
//
// A Listener owns one goroutine per socket that reads it (one socket, or
// ServerConfig.Socket.ReadShards of them), one that sends keep-alives and
// applies timeouts, which sleeps until one is due, and the send queue's
// writer; Close stops them all. The package doc draws them with their
// locks.
type Listener struct {
	tc     transport.Conn   // the first socket
	shards []transport.Conn // the sockets it reads and writes; shards[0] is tc
	core   *server.Server
	cfg    ServerConfig
	log    *slog.Logger
	addr   net.Addr

	accept  chan *Conn
	closing chan struct{}
	ticker  *engine.Ticker // when tickLoop runs the core's Update next
	wg      sync.WaitGroup
	once    sync.Once

	// sends are the send paths (sendqueue.go), one per socket, each with
	// its writer goroutine: sends[i] writes from shards[i]. A reader's
	// replies and the Writes and Close of the connections it accepted go
	// through its socket's; the ticker's keep-alives and Listener.Close's
	// disconnects through the first.
	sends []*sendQueue
	// readers are the sockets' read sides (listener_read.go): readers[i]
	// reads shards[i], by its reader goroutine or by a Conn's Read.
	readers []*shard
	// outs holds the server core's Outputs for the calls made outside the
	// readers, the ticker and Conn.Write, which own one each (Conn.Close,
	// Listener.Close, loopback ends).
	outs sync.Pool

	// conns are the server Conns by client slot (server.Client.Index),
	// from their handshake's end to their Close, or to the next client in
	// the slot: Close sends the Writes each holds (engine.Held) before
	// the disconnects. No Write or Read uses it.
	conns []atomic.Pointer[serverEndpoint]
	// fb sends the Conns' held Writes whose writer waits on something
	// else than the Conn, at most engine.HeldFallback after the first.
	fb *engine.Fallback

	received traffic     // datagrams the readers took from the sockets
	draining atomic.Bool // Drain was called
}

// Listen announces a netcode server on the local UDP address. network is
// "udp", "udp4" or "udp6".
func Listen(network, address string, cfg *ServerConfig) (*Listener, error) {
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	sock := &cfg.Socket
	return transport.ListenServer(sock.options(discardIfNil(cfg.Logger)), network, address, sock.ReadShards, func(pcs []net.PacketConn) (*Listener, error) {
		return newListener(pcs, cfg)
	})
}

// NewListener makes a netcode server on any datagram transport. The
// Listener owns pc: Close closes it. On an error pc is left open.
// cfg.Socket applies to pc as SocketConfig says: Buffer and PacketTagging if
// pc is a *net.UDPConn; a Control hook is refused; ReadShards is ignored.
func NewListener(pc net.PacketConn, cfg *ServerConfig) (*Listener, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Socket.options(discardIfNil(cfg.Logger)).Apply(pc); err != nil {
		return nil, err
	}
	return newListener([]net.PacketConn{pc}, cfg)
}

// errZeroKey refuses a ServerConfig.PrivateKey of all zeros, a key anyone
// could mint tokens with: it is crypto.ErrZeroKey for errors.Is.
var errZeroKey = fmt.Errorf("netcode: ServerConfig.PrivateKey: %w", crypto.ErrZeroKey)

// checkConfig refuses a configuration no server should run with.
func checkConfig(cfg *ServerConfig) error {
	switch {
	case cfg == nil:
		return errors.New("netcode: nil ServerConfig")
	case cfg.PrivateKey == crypto.Key{}:
		// Generate one with crypto.GenerateKey (or `netcode keygen`).
		return errZeroKey
	}
	return nil
}

// newListener serves on pcs: it sends from the first and reads them all.
func newListener(pcs []net.PacketConn, cfg *ServerConfig) (*Listener, error) {
	pc := pcs[0]
	c := *cfg
	if c.MaxClients == 0 {
		c.MaxClients = server.DefaultMaxClients
	}
	if c.MaxClients < 1 || c.MaxClients > server.MaxMaxClients {
		return nil, fmt.Errorf("netcode: MaxClients %d out of range 1..%d", c.MaxClients, server.MaxMaxClients)
	}
	log := discardIfNil(c.Logger)
	addrs, err := transport.ServerAddrs(c.PublicAddr, pc.LocalAddr())
	if err != nil {
		return nil, fmt.Errorf("netcode: %w", err)
	}
	var shards []transport.Conn
	for _, p := range pcs {
		tc := transport.New(p)
		// A server's socket reads many datagrams: it takes a client's
		// train (a GSO sender's over loopback, or what the network
		// card's GRO merged) as one, where the kernel can.
		transport.EnableGRO(tc)
		shards = append(shards, tc)
	}
	tc := shards[0]
	l := &Listener{
		tc:      tc,
		shards:  shards,
		cfg:     c,
		log:     log,
		addr:    tc.LocalAddr(),
		accept:  msgconn.NewAcceptQueue[*Conn](c.AcceptBacklog, c.MaxClients),
		closing: make(chan struct{}),
		ticker:  engine.NewTicker(),
		conns:   make([]atomic.Pointer[serverEndpoint], c.MaxClients),
		fb:      engine.NewFallback(),
	}
	l.outs.New = func() any { return new(server.Output) }
	core, err := server.New(server.Config{
		ProtocolID:         c.ProtocolID,
		PrivateKey:         c.PrivateKey,
		PreviousPrivateKey: c.PreviousPrivateKey,
		MaxClients:         c.MaxClients,
		ReadQueue:          c.ReadQueue,
		History:            server.HistorySize(c.MaxClients, c.TokenRate, c.TokenExpiry),
		EndErrors:          endErrors,
		Addrs:              addrs,
		Now:                time.Now(),     // seeds the global sequence (no nonce reuse across restarts); the monotonic clock's origin
		TickInterval:       c.TickInterval, // 0: the core's default
		Logger:             c.Logger,
	})
	if err != nil {
		return nil, err
	}
	l.core = core
	for _, sh := range shards {
		l.sends = append(l.sends, newSendQueue(sh))
	}
	l.wg.Add(len(shards) + 1)
	for i, sock := range shards {
		sh := l.newShard(sock, l.sends[i])
		l.readers = append(l.readers, sh)
		go l.readLoop(sh)
	}
	for i, pc := range pcs {
		if caps := transport.CapabilitiesOf(pc); caps.Pusher != nil {
			l.readers[i].push(caps.Pusher, caps.Direct)
		}
	}
	go l.tickLoop()
	return l, nil
}

// tickLoop sends keep-alives and applies timeouts and the core's sweeps,
// on the engine's Ticker: it sleeps until the core next has work
// (Update's answer): at most TickInterval past a deadline, a second when
// nothing is connected. A client that connects meanwhile wakes it
// (wakeTicker), since its first keep-alive may be due before then.
func (l *Listener) tickLoop() {
	defer l.wg.Done()
	var out server.Output
	l.ticker.Run(l.closing, time.Second, func(now time.Time) time.Time {
		next := l.core.Update(now, &out)
		l.act(&out, noWait, nil) // keep-alives: dropped, never waited for
		return next
	})
}

// act does what the core's calls put in out, with no lock held: it sends
// the datagrams through the first socket's send queue (waiting for room
// until stop or deadline), logs the records, and empties out.
func (l *Listener) act(out *server.Output, stop, deadline <-chan struct{}) error {
	return l.actOn(l.sends[0], out, stop, deadline)
}

// actOn is act with the datagrams sent through q. (A Conn's Writes go
// through its Held, which passes the send queue the Conn's own wake
// channel; a call into the core here has none, and the queue makes one if
// it must wait.)
func (l *Listener) actOn(q *sendQueue, out *server.Output, stop, deadline <-chan struct{}) error {
	var err error
	if len(out.Datagrams) > 0 {
		err = q.Send(out.Datagrams, stop, deadline, nil)
	}
	l.logOut(out)
	return err
}

// logOut logs out's records, if any, and empties out: its datagrams were
// sent.
func (l *Listener) logOut(out *server.Output) {
	if len(out.Records) > 0 {
		l.core.Log(out)
	}
	out.Reset()
}

// actNow is actOn for datagrams to a peer of a pushing socket (a Mux's
// WebSocket session): they are written at once, from this goroutine, since
// the socket's writes to such a peer never block and may run beside the
// send queue's.
func (l *Listener) actNow(q *sendQueue, out *server.Output) {
	if len(out.Datagrams) > 0 {
		q.WriteNow(out.Datagrams)
	}
	l.logOut(out)
}

// getOut and putOut lend an Output for a call into the core outside the
// readers, the ticker and Conn.Write (which own theirs): Close, Disconnect,
// loopback ends.
func (l *Listener) getOut() *server.Output  { return l.outs.Get().(*server.Output) }
func (l *Listener) putOut(o *server.Output) { l.outs.Put(o) }

// wakeTicker makes the ticker call Update now and sleep afresh.
func (l *Listener) wakeTicker() { l.ticker.Earlier(time.Now()) }

// Accept waits for the next connected client and returns its connection, a
// *Conn. After Close it returns an error wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept with a context and the concrete type.
func (l *Listener) AcceptConn(ctx context.Context) (*Conn, error) {
	return msgconn.Accept(ctx, l.accept, l.closing, "netcode", l.addr)
}

// Close disconnects every client cleanly (each is sent the protocol's
// redundant disconnect packets), stops the Listener's goroutines and closes
// its socket. Connections then return net.ErrClosed.
func (l *Listener) Close() error {
	err := error(nil)
	first := false
	l.once.Do(func() {
		first = true
		close(l.closing)
		l.fb.Close()
		// The Writes the Conns hold leave before the disconnects (a Write
		// that races Close may follow them, as it may fail).
		for i := range l.conns {
			if e := l.conns[i].Load(); e != nil {
				e.hw.Flush()
			}
		}
		// The goroutines may be inside the core; Close serialises with them
		// and leaves the core ignoring everything.
		out := l.getOut()
		l.core.Close(out)
		l.act(out, nil, nil) // the disconnects, in batches
		l.putOut(out)
		for _, q := range l.sends {
			q.Close() // sends the disconnects still queued
		}
		for _, sh := range l.shards {
			if cerr := sh.Close(); err == nil {
				err = cerr
			}
		}
		l.wg.Wait()
		for {
			select {
			case c := <-l.accept:
				c.end(net.ErrClosed)
			default:
				return
			}
		}
	})
	if !first {
		return &net.OpError{Op: "close", Net: "netcode", Addr: l.addr, Err: net.ErrClosed}
	}
	return err
}

// MaxClients returns the Listener's number of client slots
// (ServerConfig.MaxClients, or its default): with Stats().Connected, what
// a registry of servers (package fleet) reports as the server's room.
func (l *Listener) MaxClients() int { return l.cfg.MaxClients }

// Addr returns the listener's local address.
func (l *Listener) Addr() net.Addr { return l.addr }

// AddrPort returns the listener's local address as a netip.AddrPort, an
// IPv4-mapped address unmapped. A Listener bound to a wildcard address
// returns the unspecified address with the bound port: mint tokens with an
// address clients can reach and this port. It is the zero AddrPort when the
// transport given to NewListener has no IP address.
func (l *Listener) AddrPort() netip.AddrPort { return transport.AddrPortOf(l.addr) }

// Drain starts a graceful shutdown: from now on every connection request
// is answered with a connection-denied packet, so a client dialing with a
// token that lists other servers moves on to the next one at once, and a
// client that only knows this server gets ErrConnectionDenied. Connected
// clients are not affected: let them finish, then Close. Drain returns at
// once, may be called more than once, and cannot be undone.
func (l *Listener) Drain() {
	l.draining.Store(true)
	l.core.Drain()
}

// endErrors are what a connection's Read returns once its client left,
// by the core's reason.
var endErrors = [...]error{
	server.ReasonPeerDisconnected: eofError,
	server.ReasonTimedOut:         ErrConnectionTimedOut,
	server.ReasonLocal:            net.ErrClosed,
}

// connected makes the Conn of a client that completed its handshake and
// queues it for Accept; a client the backlog has no room for is
// disconnected at once, its disconnects sealed into out. Its Writes go
// through the send queue of sh, the socket that heard its handshake, and
// its Reads may read that socket. With now (the socket pushed its
// handshake), its Writes write at once, bypassing the send queue (actNow).
func (l *Listener) connected(sc *server.Client, out *server.Output, sh *shard, now bool) {
	ap := sc.Addr()
	e := &serverEndpoint{l: l, c: sc, q: sh.q, now: now, turn: engine.NewWriteTurn(), wake: make(chan struct{}, 1)}
	e.hw.InitQueue(sh.q, e.wake, e.turn, sc.Queue().Done(), l.fb)
	e.hw.Enable(!now) // a pushing socket's peer is written at once
	e.Reader = sh.sock.NewReader(sc.Queue().Len, sc.Queue().Done(), e.hw.Flush)
	c := newConn(e, l.addr, net.UDPAddrFromAddrPort(ap), sc.Queue())
	c.clientID = sc.ID()
	c.clientIndex = sc.Index()
	c.maxClients = sc.MaxClients()
	c.userData = sc.UserData()
	l.conns[sc.Index()].Store(e)
	select {
	case l.accept <- c:
	default:
		l.conns[sc.Index()].CompareAndSwap(e, nil)
		l.log.Warn("netcode: accept backlog full; disconnecting client", "addr", ap)
		l.core.Disconnect(sc, out)
	}
}

// serverEndpoint is the server side of a Conn.
type serverEndpoint struct {
	l *Listener
	c *server.Client
	q *sendQueue // its socket's
	// Reader is the Conn's pulling Reads of its socket (msgconn.Puller):
	// the engine's.
	*engine.Reader
	// now: its peer is a pushing socket's, whose writes to it never
	// block: its packets are written at once (actNow), not queued.
	now bool
	// turn (capacity 1) is the Conn's write turn, held from the sealing
	// of a Write's packet to its hand-off to the send queue, so that the
	// Conn's packets leave in sequence order (the peer's replay window
	// drops a packet more than 256 behind the newest). It is a channel so
	// that waiting for it is a select that also watches the Conn's end
	// and its write deadline.
	turn engine.WriteTurn
	wake chan struct{} // capacity 1: the send queue says there is room; used in the turn
	// out is what a Write's call into the core fills: the Conn's own,
	// used in the turn, so that Writes waiting for room hold no shared
	// buffer (and a pool emptied by a collection makes no new ones).
	out server.Output
	// hw holds the Writes made while the Conn's read queue still holds
	// payloads (a burst being answered) and sends them as one train
	// through q with the burst's last Write, a Read that finds the queue
	// empty, or at the latest by the Listener's fallback (fb); in the
	// write turn. Not enabled for a pushing socket's peer.
	hw engine.Held
}

// send seals p under the client's send lock (the core's, released when
// Send returns), then hands the packet to the send queue, or holds it for
// a train while the Conn's read queue holds payloads (engine.Held); a full
// queue makes it wait until stop (the Conn's end: Close or the client
// leaving) or deadline. It holds the Conn's write turn throughout, and no
// other lock.
func (e *serverEndpoint) send(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !e.turn.Take(stop, deadline) {
		return engine.TurnErr(stop)
	}
	out := &e.out
	err := e.c.Send(now, p, out)
	switch {
	case err == nil && !e.now:
		err = e.hw.Send(out.Datagrams, e.c.Queue().Len() > 0, now, deadline)
		e.l.logOut(out)
	case err == nil:
		err = e.act(out, stop, deadline)
	default:
		out.Reset()
	}
	e.turn.Give()
	if errors.Is(err, server.ErrClientGone) {
		return net.ErrClosed
	}
	return err
}

// sendBatch seals ps and hands their packets to the send queue a train at
// a time (sendTrains), so that the socket sends each train in one system
// call; it holds the Conn's write turn throughout, as send does.
func (e *serverEndpoint) sendBatch(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	n, err := sendTrains(e.turn, ps, stop, deadline, func(train [][]byte) (int, error) {
		out := &e.out
		sealed := 0
		var err error
		for _, p := range train {
			if err = e.c.Send(now, p, out); err != nil {
				break
			}
			sealed++
		}
		if qerr := e.act(out, stop, deadline); qerr != nil {
			return 0, qerr
		}
		return sealed, err
	})
	if errors.Is(err, server.ErrClientGone) {
		return n, net.ErrClosed
	}
	return n, err
}

// act sends what a call into the core for e's client put in out, in the
// write turn: at once for a pushing socket's peer, else through the send
// queue behind the datagrams held, waiting for room until stop or
// deadline.
func (e *serverEndpoint) act(out *server.Output, stop, deadline <-chan struct{}) error {
	if e.now {
		e.l.actNow(e.q, out)
		return nil
	}
	err := e.hw.WriteUntil(out.Datagrams, false, stop, deadline)
	e.l.logOut(out)
	return err
}

func (e *serverEndpoint) close() {
	out := e.l.getOut()
	e.turn.Wait() // the Writes waiting for it gave up: the Conn ended
	e.l.core.Disconnect(e.c, out)
	// Through the Conn's own queue, behind its Writes, those held among
	// them, and the keep-alive that confirmed it; Close never waits on
	// the socket.
	e.act(out, noWait, nil)
	e.turn.Give()
	e.l.putOut(out)
	e.l.conns[e.c.Index()].CompareAndSwap(e, nil)
	e.Stop() // a Read reading the socket does not wait for its next datagram
}
