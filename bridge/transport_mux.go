package bridge

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/transport"
)

// Defaults for the zero fields of MuxConfig.
const (
	// DefaultMuxReadQueue is the least read queue: 0 means the larger of
	// it and DefaultMuxReadQueuePerSession × MaxSessions.
	DefaultMuxReadQueue = 1024
	// DefaultMuxReadQueuePerSession is the read queue's room per session
	// of the cap when MuxConfig.ReadQueue is 0: a connected client sends
	// about 20 datagrams a second (10 keep-alives or payloads, and its
	// payloads at a game's rate), so this is a couple of hundred
	// milliseconds of every session at once, for the server's reader to
	// be late by. The room costs nothing until used (the queue's buffers
	// are pooled and its ring grows as needed).
	DefaultMuxReadQueuePerSession = 4
	DefaultMuxSendQueue           = 256
)

// muxSessionShare is how many of one WebSocket session's datagrams may
// wait in the read queue at once; past it, the session's new ones are
// dropped (counted in Dropped). A peer that floods cannot take the room of
// the others and of the UDP clients.
const muxSessionShare = 64

// muxEndGrace is how long an ended session of a Mux has to write what is
// queued for it and finish the close handshake before its connection is
// cut (a peer that does not read, or that declared a frame longer than it
// sent, would otherwise hold it, and Close, for as long as it likes).
const muxEndGrace = 2 * time.Second

// MuxConfig configures a Mux.
type MuxConfig struct {
	// MaxSessions caps the WebSocket sessions open at once; 0 means
	// DefaultMaxSessions. Past it, the handler accepts the WebSocket and
	// closes it at once with 1013 (try again later), or, when many
	// refusals are already in progress, answers HTTP 503; either response
	// carries RefusedHeader, and DialTransport fails at once with
	// ErrBridgeFull.
	MaxSessions int
	// IdleTimeout ends a session when no message has gone either way (from
	// the peer or to it) for this long (a connected netcode client and its
	// server both send keep-alives ten times a second); 0 means
	// DefaultIdleTimeout, negative disables it.
	IdleTimeout time.Duration
	// WriteTimeout ends a session whose peer does not take a message within
	// this long (a stalled TCP connection); 0 means DefaultWriteTimeout,
	// negative disables it.
	WriteTimeout time.Duration
	// OriginPatterns lists the origins, besides the request's own host,
	// whose pages may open sessions, as in websocket.AcceptOptions.
	// Cross-origin requests are refused by default.
	OriginPatterns []string
	// ReadQueue is how many received datagrams (UDP and WebSocket together)
	// wait for ReadFrom; past it, new ones are dropped as a full socket
	// buffer would. 0 means DefaultMuxReadQueuePerSession per session of
	// MaxSessions, and at least DefaultMuxReadQueue. One WebSocket session
	// has at most 64 datagrams waiting at once, its fair share: past it,
	// its new ones are dropped, so that a peer that floods cannot crowd
	// out the others.
	ReadQueue int
	// SendQueue is how many datagrams wait, per session, to be written to
	// the WebSocket; past it, new ones are dropped. 0 means
	// DefaultMuxSendQueue.
	SendQueue int
	// Logger receives a debug record for every session's start and end;
	// nil is silent.
	Logger *slog.Logger
}

// Mux is a net.PacketConn that merges a UDP socket with WebSocket clients
// of the end-to-end encrypted transport (subprotocol
// [TransportSubprotocol]), so that one netcode server serves both:
//
//	udp, _ := net.ListenUDP("udp", addr)
//	mux := bridge.NewMux(udp, bridge.MuxConfig{})
//	ln, _ := netcode.NewListener(mux, cfg) // the Listener owns mux
//	http.Handle("/netcode", mux.Handler())
//
// ReadFrom returns datagrams from the UDP socket and from every WebSocket
// session (one binary message is one datagram). WebSocket peers are known by
// synthetic addresses from the IPv6 discard-only prefix 100::/64 (see
// [IsTransportAddr]), one per session, never reused; WriteTo sends to such
// an address as a binary message on that session's WebSocket, and to any
// other address over UDP. LocalAddr is the UDP socket's address, so the
// netcode server checks connect tokens against its UDP address: tokens for
// WebSocket clients name the server's UDP address as usual.
//
// A Mux is a transport.Batcher: a netcode Listener over it reads and
// writes it in batches (ReadBatch, WriteBatch), as it does a UDP socket.
// The Mux reads its UDP socket in batches too (recvmmsg on Linux) into its
// read queue (ReadQueue), where the WebSocket sessions' messages join them,
// and writes UDP batches with sendmmsg.
//
// Writes to a session are queued (SendQueue) and written by the session's
// own goroutine, so that a slow browser never blocks the server; what is
// queued when it writes goes out together, in one write to the connection
// (a message per datagram still, up to 16 KiB at once). Like UDP,
// a datagram for a full queue or a session that has ended is dropped
// without an error. Close ends every session (after writing what is
// queued, such as the server's disconnect packets), closes the UDP socket
// and waits for every goroutine of the Mux to exit; a session that cannot
// finish within a couple of seconds (its peer does not read) is cut
// without a close handshake, so Close always returns.
type Mux struct {
	udp    net.PacketConn
	tc     transport.Conn // udp, with batched I/O where the platform has it
	cfg    MuxConfig
	log    *slog.Logger
	accept websocket.AcceptOptions
	refuse websocket.AcceptOptions // accept's, agreeing to transportFullSubprotocol if offered
	period time.Duration           // how often a session's watchdog checks

	q    *packetq.Queue // the read queue: UDP and WebSocket datagrams
	once sync.Once
	err  error

	// Lock order: mu, then a session's queue or watchdog (leaves).
	mu       sync.RWMutex
	sessions map[netip.AddrPort]*muxSession
	active   int // sessions from the cap check to their end
	closed   bool
	next     uint64

	wg          sync.WaitGroup // the UDP reader
	swg         sync.WaitGroup // ServeHTTP calls in progress, and the sessions they started
	refusing    atomic.Int64
	sessDropped atomic.Uint64 // send queue drops of the sessions that have ended; guarded by mu
	overShare   atomic.Uint64 // datagrams dropped because their session had its share queued
}

// NewMux returns a Mux over the UDP socket udp, which it owns: Close closes
// it. It starts a goroutine that reads udp.
func NewMux(udp net.PacketConn, cfg MuxConfig) *Mux {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.ReadQueue <= 0 {
		cfg.ReadQueue = max(DefaultMuxReadQueue, DefaultMuxReadQueuePerSession*cfg.MaxSessions)
	}
	if cfg.SendQueue <= 0 {
		cfg.SendQueue = DefaultMuxSendQueue
	}
	m := &Mux{
		udp: udp,
		tc:  transport.New(udp),
		cfg: cfg,
		log: cfg.Logger,
		accept: websocket.AcceptOptions{
			Subprotocols:    []string{TransportSubprotocol},
			OriginPatterns:  cfg.OriginPatterns,
			CompressionMode: websocket.CompressionDisabled,
		},
		q:        packetq.New(cfg.ReadQueue),
		sessions: make(map[netip.AddrPort]*muxSession),
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.refuse = m.accept
	m.refuse.Subprotocols = []string{transportFullSubprotocol, TransportSubprotocol}
	m.period = watchPeriod(muxEndGrace/4, cfg.IdleTimeout, cfg.WriteTimeout)
	m.wg.Add(1)
	go m.readUDP()
	return m
}

// muxReadBatch is how many UDP datagrams the Mux's reader takes from the
// socket at once.
const muxReadBatch = 64

// readUDP feeds UDP datagrams to the read queue until Close. If the socket
// fails for good, it ends the queue with the error: ReadFrom returns what
// is queued, then that error.
func (m *Mux) readUDP() {
	defer m.wg.Done()
	err := transport.ReadLoop(m.tc, muxReadBatch, m.q.Done(), m.pushUDP, func(err error) {
		m.log.Debug("netcode bridge: UDP read error, retrying", "addr", m.udp.LocalAddr().String(), "err", err)
	})
	if err != nil {
		m.log.Error("netcode bridge: UDP socket failed; the Mux stops", "addr", m.udp.LocalAddr().String(), "err", err)
		m.q.End(err)
	}
}

// pushUDP queues datagrams read from the UDP socket.
func (m *Mux) pushUDP(ms []transport.Message) {
	for i := range ms {
		// Nobody can send from the reserved prefix: forged.
		if a := ms[i].Addr; a.IsValid() && !IsTransportAddr(a) {
			m.q.Push(a, ms[i].Buf)
		}
	}
}

// Dropped returns how many datagrams were dropped so far because a queue
// (the read queue or a session's send queue) was full.
func (m *Mux) Dropped() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := m.q.Dropped() + m.sessDropped.Load() + m.overShare.Load()
	for _, s := range m.sessions {
		n += s.out.Dropped()
	}
	return n
}

// Sessions returns the number of WebSocket sessions open now.
func (m *Mux) Sessions() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.sessions)
}

func (m *Mux) opError(op string, addr net.Addr, err error) error {
	return &net.OpError{Op: op, Net: "netcode-mux", Source: m.udp.LocalAddr(), Addr: addr, Err: err}
}

// ReadFromUDPAddrPort reads one datagram, from UDP or from a WebSocket
// session, into b and returns its length and sender. A datagram longer than
// b is truncated. It allocates nothing. After Close it returns an error
// wrapping net.ErrClosed; if the UDP socket failed for good (not for a
// transient error such as an ICMP one, which the Mux rides out), it returns
// what is queued, then that error.
func (m *Mux) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, addr, err := m.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, m.opError("read", nil, err)
	}
	if IsTransportAddr(addr) {
		m.mu.RLock()
		m.dequeued(addr)
		m.mu.RUnlock()
	}
	return n, addr, nil
}

// ReadFrom implements net.PacketConn; the address is a *net.UDPAddr.
func (m *Mux) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := m.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

// WriteToUDPAddrPort sends one datagram: to a WebSocket session if addr is
// a transport address, over UDP otherwise. Like UDP, it reports success for
// a session that has ended or whose send queue is full (the datagram is
// dropped). It allocates nothing.
func (m *Mux) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	var err error
	if IsTransportAddr(addr) {
		err = m.toSession(b, addr)
	} else {
		err = m.tc.WriteTo(b, addr)
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// toSession queues b for the session with the transport address addr, or
// drops it if there is none (any more) or its queue is full.
func (m *Mux) toSession(b []byte, addr netip.AddrPort) error {
	switch {
	case len(b) == 0:
		return m.opError("write", net.UDPAddrFromAddrPort(addr), errEmptyPacket)
	case len(b) > MaxTransportMessage:
		return m.opError("write", net.UDPAddrFromAddrPort(addr), errPacketTooBig)
	}
	m.mu.RLock()
	s := m.sessions[addr]
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return m.opError("write", net.UDPAddrFromAddrPort(addr), net.ErrClosed)
	}
	if s != nil {
		s.send(b)
	}
	return nil
}

// ReadBatch reads up to len(ms) datagrams in one call, from UDP and from
// WebSocket sessions, as transport.Batcher: it blocks until one is queued,
// then takes as many as are queued and fit. Each goes into
// ms[i].Buf[:cap(ms[i].Buf)], truncated if longer; Buf is resliced to it
// and Addr is its sender. A netcode Listener over a Mux reads with it.
// The errors are those of ReadFromUDPAddrPort. It allocates nothing.
func (m *Mux) ReadBatch(ms []transport.Message) (int, error) {
	n, err := m.q.ReadBatch(ms)
	if err != nil {
		return 0, m.opError("read", nil, err)
	}
	locked := false
	for i := range ms[:n] {
		if IsTransportAddr(ms[i].Addr) {
			if !locked {
				m.mu.RLock()
				locked = true
			}
			m.dequeued(ms[i].Addr)
		}
	}
	if locked {
		m.mu.RUnlock()
	}
	return n, nil
}

// dequeued counts a datagram of the session at addr out of the read
// queue. m.mu is read-locked.
func (m *Mux) dequeued(addr netip.AddrPort) {
	if s := m.sessions[addr]; s != nil {
		s.queued.Add(-1)
	}
}

// WriteBatch sends ms in order, as transport.Batcher: each run of
// datagrams for UDP peers goes through the UDP socket's batched path
// (sendmmsg on Linux), and datagrams for transport addresses to their
// sessions' send queues, as WriteToUDPAddrPort does. It returns how many
// were sent; if fewer than len(ms), the error concerns ms[n]. It allocates
// nothing.
func (m *Mux) WriteBatch(ms []transport.Message) (int, error) {
	sent := 0
	for sent < len(ms) {
		if IsTransportAddr(ms[sent].Addr) {
			if err := m.toSession(ms[sent].Buf, ms[sent].Addr); err != nil {
				return sent, err
			}
			sent++
			continue
		}
		end := sent + 1
		for end < len(ms) && !IsTransportAddr(ms[end].Addr) {
			end++
		}
		n, err := m.tc.WriteBatch(ms[sent:end])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

var _ transport.Batcher = (*Mux)(nil)

// WriteTo implements net.PacketConn. addr must be a *net.UDPAddr or have
// the form "host:port".
func (m *Mux) WriteTo(b []byte, addr net.Addr) (int, error) {
	ap := transport.AddrPortOf(addr)
	if !ap.IsValid() {
		return 0, m.opError("write", addr, errors.New("netcode bridge: not an IP address"))
	}
	return m.WriteToUDPAddrPort(b, ap)
}

// LocalAddr returns the UDP socket's address.
func (m *Mux) LocalAddr() net.Addr { return m.udp.LocalAddr() }

// SetDeadline sets the read and write deadlines.
func (m *Mux) SetDeadline(t time.Time) error {
	m.q.SetReadDeadline(t)
	return m.udp.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for ReadFrom and ReadFromUDPAddrPort.
func (m *Mux) SetReadDeadline(t time.Time) error {
	m.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the UDP socket's write deadline. Writes to
// WebSocket sessions never block (they are queued), so it does not apply to
// them.
func (m *Mux) SetWriteDeadline(t time.Time) error { return m.udp.SetWriteDeadline(t) }

// Close ends every session with 1001 (going away) after writing what is
// queued for it, closes the UDP socket, and waits until every goroutine of
// the Mux, including the handlers of its sessions, has exited. A session
// whose peer does not take what is queued and finish the close handshake
// within two seconds has its TCP connection cut, whatever WriteTimeout
// says and whatever the peer sends, so Close returns within about two
// seconds. Later calls return an error wrapping net.ErrClosed.
func (m *Mux) Close() error {
	first := false
	m.once.Do(func() {
		first = true
		m.mu.Lock()
		m.closed = true
		ss := make([]*muxSession, 0, len(m.sessions))
		for _, s := range m.sessions {
			ss = append(ss, s)
		}
		m.mu.Unlock()
		m.q.Close()
		for _, s := range ss {
			s.end(websocket.StatusGoingAway, "netcode bridge: shutting down")
		}
		m.err = m.udp.Close()
		m.swg.Wait()
		m.wg.Wait()
	})
	if !first {
		return m.opError("close", nil, net.ErrClosed)
	}
	return m.err
}

// Handler returns the http.Handler that accepts WebSocket sessions of the
// transport (subprotocol [TransportSubprotocol]; a request that does not
// offer it is refused with HTTP 400). Each binary message is one netcode
// packet of 1 to [MaxTransportMessage] bytes; a longer message ends the
// session with 1009, a text message with 1003, and empty messages are
// ignored.
func (m *Mux) Handler() http.Handler { return (*muxHandler)(m) }

type muxHandler Mux

// ServeHTTP upgrades the request and serves the session until it ends.
func (h *muxHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := (*Mux)(h)
	if !offers(r, TransportSubprotocol) {
		http.Error(w, "netcode bridge: WebSocket subprotocol "+TransportSubprotocol+" required", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		http.Error(w, "netcode bridge: shutting down", http.StatusServiceUnavailable)
		return
	}
	m.swg.Add(1)
	if m.active >= m.cfg.MaxSessions {
		m.mu.Unlock()
		defer m.swg.Done()
		m.refuseSession(w, r)
		return
	}
	m.active++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		m.active--
		m.mu.Unlock()
		m.swg.Done()
	}

	clearDeadlines(w)
	ws, bc, err := accept(w, r, &m.accept)
	if err != nil {
		release()
		return // Accept has answered the request.
	}
	ws.SetReadLimit(MaxTransportMessage)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		closeWS(ws, bc, websocket.StatusGoingAway, "netcode bridge: shutting down")
		release()
		return
	}
	m.next++
	s := &muxSession{
		m:          m,
		ws:         ws,
		bc:         bc,
		addr:       transportAddr(m.next),
		out:        packetq.New(m.cfg.SendQueue),
		wd:         newWatchdog(m.period, m.cfg.IdleTimeout, m.cfg.WriteTimeout),
		writerDone: make(chan struct{}),
	}
	m.sessions[s.addr] = s
	m.mu.Unlock()

	// The session goes on in goroutines of its own (Close waits for
	// them), and net/http's for the connection ends, with what it holds.
	remote := r.RemoteAddr
	go func() {
		defer release()
		s.serve(remote)
	}()
}

// serve runs the session until it ends: it reads the peer, and its writer
// writes to it.
func (s *muxSession) serve(remote string) {
	m := s.m
	start := time.Now()
	m.log.Debug("netcode bridge: transport session start", "remote", remote, "addr", s.addr)
	s.wd.run(s.watch)
	go s.writer()
	s.readLoop()
	s.end(websocket.StatusNormalClosure, "")
	<-s.writerDone
	s.wd.stop()
	s.out.Close() // frees what the writer left
	m.mu.Lock()
	delete(m.sessions, s.addr)
	m.sessDropped.Add(s.out.Dropped())
	m.mu.Unlock()
	m.log.Debug("netcode bridge: transport session end", "remote", remote, "addr", s.addr,
		"code", int(s.code), "reason", s.reason, "duration", time.Since(start))
}

// refuse turns a request away because of the session cap.
// The WebSocket of a refusal agrees to transportFullSubprotocol if the
// client offers it, as DialTransport does: a client that cannot read the
// response's headers (in a browser) tells the refusal from a session at
// once by that. A client that offers only TransportSubprotocol gets it,
// and the close.
func (m *Mux) refuseSession(w http.ResponseWriter, r *http.Request) {
	refuseOverCap(w, r, &m.refusing, &m.refuse, m.log, "netcode bridge: too many transport sessions")
}

// errSessionEnded ends a session's send queue: its writer writes what is
// queued, then closes the WebSocket.
var errSessionEnded = errors.New("netcode bridge: session ended")

// muxSession is one WebSocket peer of a Mux.
type muxSession struct {
	m    *Mux
	ws   *websocket.Conn
	bc   *batchConn // under ws
	addr netip.AddrPort
	out  *packetq.Queue // datagrams for the peer; ended when the session ends
	wd   *watchdog

	endOnce    sync.Once
	code       websocket.StatusCode
	reason     string // code and reason are written before out is ended
	writerDone chan struct{}

	endedAt atomic.Int64 // wd.now() + 1 of the end; 0 while running
	queued  atomic.Int32 // datagrams of the session in the Mux's read queue
}

// end ends the session once, recording why; the writer then writes what is
// queued and closes the WebSocket with code and reason, all within
// muxEndGrace: the connection's deadline bounds them (and the watchdog
// cuts the connection if that did not do).
func (s *muxSession) end(code websocket.StatusCode, reason string) {
	s.endOnce.Do(func() {
		s.code, s.reason = code, reason
		s.endedAt.Store(s.wd.now() + 1)
		s.bc.closeBy(time.Now().Add(muxEndGrace))
		s.out.End(errSessionEnded)
	})
}

// send queues a copy of p for the peer, or drops it (counted) if the queue
// is full; after the end it is refused.
func (s *muxSession) send(p []byte) { s.out.Push(netip.AddrPort{}, p) }

// writer writes the queued datagrams to the WebSocket until the session
// ends, then the rest of the queue, then closes the WebSocket. When several
// are queued, their messages go out together, in one write to the
// connection (up to batchBytes).
func (s *muxSession) writer() {
	defer close(s.writerDone)
	defer s.bc.release()
	buf := make([]byte, MaxTransportMessage)
	for s.writeBatch(buf) {
	}
	s.ws.Close(s.code, s.reason)
}

// writeBatch waits for a datagram and writes it with the others queued
// behind it. It reports false once the session has ended and the queue is
// drained, or a write failed: code and reason are set.
func (s *muxSession) writeBatch(buf []byte) bool {
	n, _, err := s.out.Read(buf)
	if err != nil {
		return false
	}
	if s.out.Len() == 0 {
		return s.write(buf[:n])
	}
	s.bc.hold()
	ok := s.write(buf[:n])
	for ok && s.out.Len() > 0 {
		// Only this goroutine reads: what Len counts is there.
		if n, _, err = s.out.Read(buf); err != nil {
			break
		}
		ok = s.write(buf[:n])
	}
	if err := s.wd.flush(s.bc); err != nil && ok {
		s.end(websocket.StatusGoingAway, "netcode bridge: write failed")
		return false
	}
	return ok
}

// write writes one datagram; it reports false (having ended the session)
// if that failed. A datagram written counts as activity for the idle
// timeout.
func (s *muxSession) write(p []byte) bool {
	if err := s.wd.writeMessage(s.ws, websocket.MessageBinary, p); err != nil {
		s.end(websocket.StatusGoingAway, "netcode bridge: write failed")
		return false
	}
	return true
}

// readLoop feeds the peer's messages to the Mux's read queue until reading
// fails or the session ends.
func (s *muxSession) readLoop() {
	buf := make([]byte, MaxTransportMessage+1)
	for {
		typ, n, err := readMessage(s.ws, buf)
		if err != nil {
			s.end(readEnd(err))
			return
		}
		switch {
		case typ != websocket.MessageBinary:
			s.end(websocket.StatusUnsupportedData, "netcode bridge: only binary messages are accepted")
			return
		case n == 0:
			continue // not a datagram, and not activity either
		case n > MaxTransportMessage:
			s.end(websocket.StatusMessageTooBig, "netcode bridge: message larger than 1300 bytes")
			return
		}
		s.wd.active()
		select {
		case <-s.out.Done():
			return
		default:
		}
		if s.queued.Load() >= muxSessionShare {
			s.m.overShare.Add(1)
			continue
		}
		if s.m.q.Push(s.addr, buf[:n]) {
			s.queued.Add(1)
		}
	}
}

// watch applies the idle and write timeouts, and cuts the connection of a
// session that ended more than muxEndGrace ago but is still writing or
// closing. It runs every period from the session's watchdog until the
// session is gone, so that Close, which waits for every session, cannot
// wait forever.
func (s *muxSession) watch(now int64) bool {
	if e := s.endedAt.Load(); e != 0 {
		if now-(e-1) >= int64(muxEndGrace) {
			// Ended long ago and still writing or closing: the writer
			// and the reader return once the connection is gone. (Not
			// CloseNow, which waits for a Close in progress.)
			s.bc.cut()
		}
	} else if s.wd.idleFor(now) {
		s.end(CodeIdleTimeout, "netcode bridge: idle timeout")
	}
	if s.wd.stalled(now) {
		// The peer does not read: no close handshake is possible.
		s.bc.cut()
		s.end(websocket.StatusGoingAway, "netcode bridge: write timeout")
	}
	return true
}
