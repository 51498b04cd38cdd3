package netcode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// readBatch is how many datagrams the reader takes from the socket at once.
const readBatch = 64

// Listener is a netcode server. It implements net.Listener: Accept returns a
// *Conn for every client that completes the handshake.
//
// A Listener owns one goroutine per socket that reads it (one socket, or
// ServerConfig.ReadShards of them) and one that sends keep-alives and
// applies timeouts, which sleeps until one is due; Close stops them all.
type Listener struct {
	tc     transport.Conn   // the socket the server sends from
	shards []transport.Conn // the sockets it reads; shards[0] is tc
	core   *server.Server
	cfg    ServerConfig
	log    *slog.Logger
	addr   net.Addr

	accept  chan *Conn
	closing chan struct{}
	wake    chan struct{} // capacity 1: a client connected; the ticker looks again
	wg      sync.WaitGroup
	once    sync.Once

	// send is the one send path, shared by the readers, the ticker,
	// Conn.Write and Close (sink.go); it owns the writer goroutine.
	send *sendQueue

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
	shards := cfg.ReadShards
	if shards > 1 && !transport.ReusePortSupported {
		shards = 1 // SO_REUSEPORT read shards are Linux's; one reader elsewhere
	}
	ucs, err := transport.ListenUDPShards(network, address, shards)
	if err != nil {
		return nil, err
	}
	pcs := make([]net.PacketConn, len(ucs))
	for i, uc := range ucs {
		pcs[i] = uc
	}
	l, err := newListener(pcs, cfg)
	if err != nil {
		for _, pc := range pcs {
			pc.Close()
		}
		return nil, err
	}
	return l, nil
}

// NewListener makes a netcode server on any datagram transport. The
// Listener owns pc: Close closes it. On an error pc is left open.
func NewListener(pc net.PacketConn, cfg *ServerConfig) (*Listener, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	return newListener([]net.PacketConn{pc}, cfg)
}

// checkConfig refuses a configuration no server should run with.
func checkConfig(cfg *ServerConfig) error {
	switch {
	case cfg == nil:
		return errors.New("netcode: nil ServerConfig")
	case cfg.PrivateKey == [KeyBytes]byte{}:
		return ErrZeroKey
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
	if c.AcceptBacklog <= 0 {
		c.AcceptBacklog = c.MaxClients
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addrs, err := serverAddrs(c.PublicAddr, pc.LocalAddr())
	if err != nil {
		return nil, err
	}
	var shards []transport.Conn
	for _, p := range pcs {
		if c.PacketTagging {
			tagSocket(p, log)
		}
		shards = append(shards, transport.New(p))
	}
	tc := shards[0]
	l := &Listener{
		tc:      tc,
		shards:  shards,
		cfg:     c,
		log:     log,
		addr:    tc.LocalAddr(),
		accept:  make(chan *Conn, c.AcceptBacklog),
		closing: make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	core, err := server.New(server.Config{
		ProtocolID:         c.ProtocolID,
		PrivateKey:         crypto.Key(c.PrivateKey),
		PreviousPrivateKey: crypto.Key(c.PreviousPrivateKey),
		MaxClients:         c.MaxClients,
		ReadQueue:          c.ReadQueue,
		EndErrors:          endErrors,
		Addrs:              addrs,
		Now:                time.Now(),     // seeds the global sequence: no nonce reuse across restarts
		TickInterval:       c.TickInterval, // 0: the core's default
		Logger:             c.Logger,
	})
	if err != nil {
		return nil, err
	}
	l.core = core
	l.send = newSendQueue(tc)
	l.wg.Add(len(shards) + 1)
	for _, sh := range shards {
		go l.readLoop(sh)
	}
	go l.tickLoop()
	return l, nil
}

// tagSocket turns packet tagging on for pc, and logs the operating
// system's refusal as the reference does.
func tagSocket(pc net.PacketConn, log *slog.Logger) {
	if err := transport.SetTrafficClass(pc, transport.ExpeditedForwarding); err != nil {
		log.Warn("netcode: packet tagging refused; packets go untagged", "addr", pc.LocalAddr().String(), "err", err)
	}
}

// serverAddrs returns the addresses a server is known by, for the check of
// connection requests against the token's internal address list: the public
// address, if one is configured, and the bound address (every interface
// address at the bound port, for a wildcard bind). A server behind NAT is
// named by its bound address in the tokens' internal lists and by the public
// one in their client-facing lists; a server reached directly is named by
// the same address in both.
func serverAddrs(public string, bound net.Addr) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	if public != "" {
		ua, err := net.ResolveUDPAddr("udp", public)
		if err != nil {
			return nil, fmt.Errorf("netcode: PublicAddr: %w", err)
		}
		ap := ua.AddrPort()
		out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	local, err := boundAddrs(bound)
	if err != nil {
		if len(out) > 0 {
			return out, nil // the public address is enough
		}
		return nil, fmt.Errorf("%w; set PublicAddr", err)
	}
	for _, a := range local {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// boundAddrs returns the addresses a socket bound to bound is reached at.
func boundAddrs(bound net.Addr) ([]netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(bound.String())
	if err != nil {
		return nil, fmt.Errorf("netcode: cannot tell the server's address from %q", bound)
	}
	ip := ap.Addr().Unmap()
	if !ip.IsUnspecified() {
		return []netip.AddrPort{netip.AddrPortFrom(ip.WithZone(""), ap.Port())}, nil
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("netcode: listing interface addresses: %w", err)
	}
	var out []netip.AddrPort
	for _, a := range ifaddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ia := pfx.Addr().Unmap()
		if ip.Is4() && !ia.Is4() {
			continue // an IPv4 socket cannot be reached at an IPv6 address
		}
		out = append(out, netip.AddrPortFrom(ia.WithZone(""), ap.Port()))
	}
	if len(out) == 0 {
		return nil, errors.New("netcode: no interface address to check tokens against")
	}
	return out, nil
}

// readLoop reads one socket until Close, with its own Receiver (several
// decrypt at once) and its own batch of replies, sent from that socket.
func (l *Listener) readLoop(sock transport.Conn) {
	defer l.wg.Done()
	rcv := l.core.NewReceiver()
	err := transport.ReadLoop(sock, readBatch, l.closing, func(ms []transport.Message) {
		l.received.addAll(ms)
		now := time.Now()
		for i := range ms {
			if len(ms[i].Buf) > protocol.MaxPacketBytes {
				continue
			}
			if sc := rcv.Receive(now, ms[i].Addr, ms[i].Buf, l.send); sc != nil {
				l.connected(sc)
				l.wakeTicker()
			}
		}
	}, func(err error) {
		l.log.Debug("netcode: read error, retrying", "addr", l.addr.String(), "err", err)
	})
	if err != nil {
		l.log.Error("netcode: reading the socket failed; the listener receives nothing more", "addr", l.addr.String(), "err", err)
	}
}

// tickLoop sends keep-alives and applies timeouts and the core's sweeps.
// It sleeps until the core next has work (Update's answer): at most
// TickInterval past a deadline, a second when nothing is connected. A
// client that connects meanwhile wakes it (wakeTicker), since its first
// keep-alive may be due before then.
func (l *Listener) tickLoop() {
	defer l.wg.Done()
	t := time.NewTimer(0) // the core says when next
	defer t.Stop()
	for {
		select {
		case <-l.closing:
			return
		case <-t.C:
		case <-l.wake:
		}
		now := time.Now()
		next := l.core.Update(now, l.send)
		t.Reset(min(max(next.Sub(now), 0), maxTickSleep))
	}
}

// maxTickSleep bounds the ticker's sleep whatever the core answers: the
// core's times are wall-clock times, and a wall clock set back must not
// put the Listener to sleep for as long.
const maxTickSleep = time.Second

// wakeTicker makes the ticker call Update now and sleep afresh.
func (l *Listener) wakeTicker() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

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
	select {
	case c := <-l.accept:
		return c, nil
	default:
	}
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.closing:
		return nil, &net.OpError{Op: "accept", Net: "netcode", Addr: l.addr, Err: net.ErrClosed}
	case <-ctx.Done():
		return nil, &net.OpError{Op: "accept", Net: "netcode", Addr: l.addr, Err: ctx.Err()}
	}
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
		// The goroutines may be inside the core; Close serialises with them
		// and leaves the core ignoring everything.
		l.core.Close(queued{l.send}) // the disconnects, in batches
		l.send.close()               // sends the disconnects still queued
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

// Addr returns the listener's local address.
func (l *Listener) Addr() net.Addr { return l.addr }

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

// Stats returns a snapshot of the server's counters.
func (l *Listener) Stats() ServerStats {
	s := l.core.Stats()
	return ServerStats{
		Connected:          s.Connected,
		Mappings:           s.Mappings,
		MappingsLimit:      s.MappingsLimit,
		History:            s.History,
		HistoryLimit:       s.HistoryLimit,
		Ignored:            s.Ignored,
		Replayed:           s.Replayed,
		ChallengesSent:     s.ChallengesSent,
		DeniedSent:         s.DeniedSent,
		TokenReuseRefused:  s.TokenReuseRefused,
		AddressNotInToken:  s.AddressNotInToken,
		HistoryFull:        s.HistoryFull,
		MappingsFull:       s.MappingsFull,
		ConnectionsOpened:  s.ConnectionsOpened,
		ConnectionsTimeout: s.ConnectionsTimeout,
		PayloadsDropped:    s.PayloadsDropped,
		KeepAlivesDropped:  l.send.dropped.Load(),
		SendErrors:         l.send.refused.Load(),
		Draining:           l.draining.Load(),
		PacketsReceived:    l.received.packets.Load(),
		BytesReceived:      l.received.bytes.Load(),
		PacketsSent:        l.send.sent.packets.Load(),
		BytesSent:          l.send.sent.bytes.Load(),
	}
}

// ServerStats are a Listener's counters: gauges of what it holds now, and
// counts since it started. Package metrics exports each to Prometheus
// under the name given with the field. Each received datagram that is not a valid
// packet for its state is counted once, under the first reason that
// refused it.
type ServerStats struct {
	// Connected is the number of clients connected now (loopback clients
	// included).
	// Metric: netcode_server_clients.
	Connected int
	// Mappings is the number of encryption mappings held now: one for each
	// handshake in progress and each connection.
	// Metric: netcode_server_mappings.
	Mappings int
	// MappingsLimit is the most encryption mappings held at once (4 per
	// client slot); a request that needs one more counts in MappingsFull.
	// Metric: netcode_server_mappings_limit.
	MappingsLimit int
	// History is the number of connect tokens remembered now, each until
	// it expires.
	// Metric: netcode_server_token_history.
	History int
	// HistoryLimit is the most connect tokens remembered at once (32 per
	// client slot, at least 4096); a new token past it counts in
	// HistoryFull.
	// Metric: netcode_server_token_history_limit.
	HistoryLimit int

	// Ignored counts datagrams dropped as malformed, unauthenticated or
	// out of place for their sender's state.
	// Metric: netcode_server_ignored_packets_total.
	Ignored uint64
	// Replayed counts datagrams dropped by replay protection.
	// Metric: netcode_server_replayed_packets_total.
	Replayed uint64
	// ChallengesSent counts connection challenges sent: handshakes begun.
	// Metric: netcode_server_challenges_sent_total.
	ChallengesSent uint64
	// DeniedSent counts connection-denied packets sent: requests and
	// responses that found every slot taken.
	// Metric: netcode_server_denied_sent_total.
	DeniedSent uint64
	// TokenReuseRefused counts requests refused because their token was
	// used from another address, or was already connected with.
	// Metric: netcode_server_token_reuse_refused_total.
	TokenReuseRefused uint64
	// AddressNotInToken counts requests refused because the token names
	// other servers.
	// Metric: netcode_server_address_not_in_token_total.
	AddressNotInToken uint64
	// HistoryFull counts requests with a new token refused because the
	// token history was full.
	// Metric: netcode_server_token_history_full_total.
	HistoryFull uint64
	// MappingsFull counts requests refused because the encryption mapping
	// table was full.
	// Metric: netcode_server_mappings_full_total.
	MappingsFull uint64
	// ConnectionsOpened counts connections made (handshakes completed and
	// loopback clients).
	// Metric: netcode_server_connections_opened_total.
	ConnectionsOpened uint64
	// ConnectionsTimeout counts connections ended because the client fell
	// silent for its token's timeout.
	// Metric: netcode_server_connections_timed_out_total.
	ConnectionsTimeout uint64
	// PayloadsDropped counts received payloads dropped because their
	// connection's read queue was full (the sum of every Conn.Dropped).
	// Metric: netcode_server_payloads_dropped_total.
	PayloadsDropped uint64
	// KeepAlivesDropped counts keep-alives not sent because the send queue
	// was full (the next one follows within 100 ms).
	// Metric: netcode_server_keepalives_dropped_total.
	KeepAlivesDropped uint64
	// SendErrors counts datagrams the socket refused to send.
	// Metric: netcode_server_send_errors_total.
	SendErrors uint64

	// Draining reports that Drain was called: connection requests are
	// denied. Metric: netcode_server_draining (1 while draining).
	Draining bool
	// PacketsReceived and BytesReceived count the datagrams the server's
	// sockets received and their bytes (UDP payload), valid or not.
	// Metrics: netcode_server_received_packets_total,
	// netcode_server_received_bytes_total.
	PacketsReceived, BytesReceived uint64
	// PacketsSent and BytesSent count the datagrams the server's socket
	// took to send and their bytes; those it refused are in SendErrors.
	// Metrics: netcode_server_sent_packets_total,
	// netcode_server_sent_bytes_total.
	PacketsSent, BytesSent uint64
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
// disconnected at once.
func (l *Listener) connected(sc *server.Client) {
	ap := sc.Addr()
	c := newConn(&serverEndpoint{l: l, c: sc}, l.addr, net.UDPAddrFromAddrPort(ap), sc.Queue())
	c.clientID = sc.ID()
	c.clientIndex = sc.Index()
	c.maxClients = sc.MaxClients()
	c.userData = sc.UserData()
	select {
	case l.accept <- c:
	default:
		l.log.Warn("netcode: accept backlog full; disconnecting client", "addr", ap)
		l.core.Disconnect(sc, queued{l.send})
	}
}

// serverEndpoint is the server side of a Conn.
type serverEndpoint struct {
	l *Listener
	c *server.Client
}

func (e *serverEndpoint) send(now time.Time, p []byte) error {
	err := e.c.Send(now, p, e.l.send)
	if errors.Is(err, server.ErrClientGone) {
		return net.ErrClosed
	}
	return err
}

func (e *serverEndpoint) close() { e.l.core.Disconnect(e.c, queued{e.l.send}) }
