package transport

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/timerwheel"
	dgram "github.com/gonetcode/netcode/internal/transport"
)

// MuxConfig configures a Mux.
type MuxConfig struct {
	// MaxSessions caps the sessions open at once, WebSocket and
	// WebTransport (package bridge/webtransport) together; 0 means
	// 1024, as in the relay's Config. Past it, the handler accepts the WebSocket and
	// closes it at once with 1013 (try again later), or, when many
	// refusals are already in progress, answers HTTP 503; either response
	// carries the header Netcode-Bridge-Refused, and Dial fails at once with
	// bridge.ErrBridgeFull.
	MaxSessions int
	// IdleTimeout ends a session when no message has gone either way (from
	// the peer or to it) for this long (a connected netcode client and its
	// server both send keep-alives ten times a second); 0 means
	// 30 s, negative disables it.
	IdleTimeout time.Duration
	// WriteTimeout ends a session whose peer does not take a message within
	// this long (a stalled TCP connection); 0 means 10 s,
	// negative disables it.
	WriteTimeout time.Duration
	// OriginPatterns lists the origins, besides the request's own host,
	// whose pages may open sessions, as in websocket.AcceptOptions.
	// Cross-origin requests are refused by default.
	OriginPatterns []string
	// ReadQueue is how many received datagrams (UDP and WebSocket together)
	// wait for ReadFrom; past it, new ones are dropped as a full socket
	// buffer would. 0 means 4 per session of MaxSessions
	// (a couple of hundred milliseconds of every session's traffic at
	// once), and at least 1024. One WebSocket session
	// has at most 64 datagrams waiting at once, its fair share: past it,
	// its new ones are dropped, so that a peer that floods cannot crowd
	// out the others.
	ReadQueue int
	// SendQueue is how many datagrams wait, per session, to be written to
	// the WebSocket; past it, new ones are dropped. 0 means 256.
	SendQueue int
	// Logger receives a debug record for every session's start and end;
	// nil is silent.
	Logger *slog.Logger
}

// Mux is a net.PacketConn that merges a UDP socket with WebSocket clients
// of the end-to-end encrypted transport (subprotocol
// [Subprotocol]), so that one netcode server serves both:
//
//	udp, _ := net.ListenUDP("udp", addr)
//	mux := transport.NewMux(udp, nil)
//	ln, _ := netcode.NewListener(mux, cfg) // the Listener owns mux
//	http.Handle("/netcode", mux.Handler())
//
// ReadFrom returns datagrams from the UDP socket and from every WebSocket
// session (one binary message is one datagram). WebSocket peers are known by
// synthetic addresses from the IPv6 discard-only prefix 100::/64 (see
// [IsSessionAddr]), one per session, never reused; WriteTo sends to such
// an address as a binary message on that session's WebSocket, and to any
// other address over UDP. LocalAddr is the UDP socket's address, so the
// netcode server checks connect tokens against its UDP address: tokens for
// WebSocket clients name the server's UDP address as usual.
//
// A netcode Listener over a Mux reads and writes it in batches, as it
// does a UDP socket, and takes the WebSocket sessions' datagrams straight
// from their sessions: each session's reader goroutine acts on its
// datagrams for the Listener, with no hand-off to the Listener's reader
// and none to the read queue, which then carries UDP datagrams only.
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
	batchHook // the I/O a netcode Listener finds: muxBatcher, batched and by netip.AddrPort
	hostHook  // what package bridge/webtransport starts its sessions through

	udp    net.PacketConn
	tc     dgram.Conn // udp, with batched I/O where the platform has it
	cfg    MuxConfig
	log    *slog.Logger
	gate   wsbridge.Gate     // admission, shared with the relay
	period time.Duration     // how often a session's watchdog checks
	wheel  *timerwheel.Wheel // runs the sessions' watchdogs: one runtime timer for all

	q *packetq.Queue // the read queue: UDP datagrams, and WebSocket ones while nothing takes them pushed
	// sink, once a netcode Listener has set it (Push), acts on a
	// session's datagrams in the session's reader goroutine, at once:
	// they skip the read queue and the Listener's reader.
	sink atomic.Pointer[func([]dgram.Message)]
	once sync.Once
	err  error

	// Lock order: the gate's lock, then mu, then a session's queue or
	// watchdog (leaves).
	mu       sync.RWMutex
	sessions map[netip.AddrPort]*muxSession
	closed   bool
	next     uint64

	wg          sync.WaitGroup // the UDP reader
	sessDropped atomic.Uint64  // send queue drops of the sessions that have ended; guarded by mu
	overShare   atomic.Uint64  // datagrams dropped because their session had its share queued
}

// NewMux returns a Mux over the UDP socket udp, which it owns: Close closes
// it. A nil config is the zero MuxConfig: every default. It starts a goroutine that reads udp.
func NewMux(udp net.PacketConn, config *MuxConfig) *Mux {
	var cfg MuxConfig
	if config != nil {
		cfg = *config
	}
	wsbridge.SetDefaults(&cfg.MaxSessions, &cfg.IdleTimeout, &cfg.WriteTimeout)
	if cfg.ReadQueue <= 0 {
		cfg.ReadQueue = max(defaultMuxReadQueue, defaultMuxReadQueuePerSession*cfg.MaxSessions)
	}
	if cfg.SendQueue <= 0 {
		cfg.SendQueue = defaultMuxSendQueue
	}
	m := &Mux{
		udp:      udp,
		tc:       dgram.New(udp),
		cfg:      cfg,
		log:      cfg.Logger,
		q:        packetq.New(cfg.ReadQueue),
		sessions: make(map[netip.AddrPort]*muxSession),
		wheel:    timerwheel.New(0),
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.batchHook = batchHook{B: muxBatcher{m}, P: muxBatcher{m}, S: muxBatcher{m}}
	m.hostHook = hostHook{H: (*muxHost)(m)}
	m.gate.Init("transport", Subprotocol, cfg.MaxSessions, cfg.OriginPatterns, m.log)
	// A refusal agrees to fullSubprotocol if the client offers it, as Dial
	// does: a client that cannot read the response's headers (in a
	// browser) tells the refusal from a session at once by that. A client
	// that offers only Subprotocol gets it, and the close.
	m.gate.Refuse.Subprotocols = []string{fullSubprotocol, Subprotocol}
	m.period = wsbridge.WatchPeriod(wsbridge.MuxEndGrace/4, cfg.IdleTimeout, cfg.WriteTimeout)
	m.wg.Add(1)
	go m.readUDP()
	return m
}

// readUDP feeds UDP datagrams to the read queue until Close. If the socket
// fails for good, it ends the queue with the error: ReadFrom returns what
// is queued, then that error.
func (m *Mux) readUDP() {
	defer m.wg.Done()
	err := dgram.ReadLoop(m.tc, muxReadBatch, m.q.Done(), m.pushUDP, func(err error) {
		m.log.Debug("netcode/bridge: UDP read error, retrying", "addr", m.udp.LocalAddr().String(), "err", err)
	})
	if err != nil {
		m.log.Error("netcode/bridge: UDP socket failed; the Mux stops", "addr", m.udp.LocalAddr().String(), "err", err)
		m.q.End(err)
	}
}

// pushUDP queues datagrams read from the UDP socket.
func (m *Mux) pushUDP(ms []dgram.Message) {
	for i := range ms {
		// Nobody can send from the reserved prefix: forged.
		if a := ms[i].Addr; a.IsValid() && !IsSessionAddr(a) {
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

// readFromAddrPort is ReadFrom without the *net.UDPAddr, which a netcode
// Listener reaches through the hook (muxBatcher).
func (m *Mux) readFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, addr, err := m.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, m.opError("read", nil, err)
	}
	if IsSessionAddr(addr) {
		m.mu.RLock()
		m.dequeued(addr)
		m.mu.RUnlock()
	}
	return n, addr, nil
}

// ReadFrom reads one datagram, from UDP or from a WebSocket session, into
// b and returns its length and sender, a *net.UDPAddr. A datagram longer
// than b is truncated. After Close it returns an error wrapping
// net.ErrClosed; if the UDP socket failed for good (not for a transient
// error such as an ICMP one, which the Mux rides out), it returns what is
// queued, then that error. A netcode Listener over the Mux reads it in
// batches, without allocating.
func (m *Mux) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := m.readFromAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

// writeToAddrPort is WriteTo with a netip.AddrPort, which a netcode
// Listener reaches through the hook (muxBatcher).
func (m *Mux) writeToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	var err error
	if IsSessionAddr(addr) {
		err = m.toSession(b, addr, true)
	} else {
		err = m.tc.WriteTo(b, addr)
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// toSession sends b to the session with the transport address addr (see
// muxSession.send; direct allows it to write b at once), or drops it if
// there is none (any more) or its queue is full.
func (m *Mux) toSession(b []byte, addr netip.AddrPort, direct bool) error {
	switch {
	case len(b) == 0:
		return m.opError("write", net.UDPAddrFromAddrPort(addr), errEmptyPacket)
	case len(b) > maxMessage:
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
		if err := s.link.CheckWrite(len(b)); err != nil {
			return m.opError("write", net.UDPAddrFromAddrPort(addr), err)
		}
		s.send(b, direct)
	}
	return nil
}

// readBatch reads up to len(ms) datagrams in one call, from UDP and from
// WebSocket sessions: it blocks until one is queued,
// then takes as many as are queued and fit. Each goes into
// ms[i].Buf[:cap(ms[i].Buf)], truncated if longer; Buf is resliced to it
// and Addr is its sender. A netcode Listener over a Mux reads with it.
// The errors are those of ReadFrom. It allocates nothing.
func (m *Mux) readBatch(ms []dgram.Message) (int, error) {
	n, err := m.q.ReadBatch(ms)
	if err != nil {
		return 0, m.opError("read", nil, err)
	}
	locked := false
	for i := range ms[:n] {
		if IsSessionAddr(ms[i].Addr) {
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

// writeBatch sends ms in order: each run of
// datagrams for UDP peers goes through the UDP socket's batched path
// (sendmmsg on Linux), and datagrams for transport addresses to their
// sessions, as WriteTo does: a lone one may be written at once, a run of
// several for one session (a send queue groups a batch by destination)
// is queued whole, for its writer to send in one write. It returns how
// many were sent; if fewer than len(ms), the error concerns ms[n]. It
// allocates nothing.
func (m *Mux) writeBatch(ms []dgram.Message) (int, error) {
	sent := 0
	for sent < len(ms) {
		if a := ms[sent].Addr; IsSessionAddr(a) {
			end := sent + 1
			for end < len(ms) && ms[end].Addr == a {
				end++
			}
			lone := end-sent == 1
			for ; sent < end; sent++ {
				if err := m.toSession(ms[sent].Buf, a, lone); err != nil {
					return sent, err
				}
			}
			continue
		}
		end := sent + 1
		for end < len(ms) && !IsSessionAddr(ms[end].Addr) {
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

var _ dgram.Batcher = muxBatcher{}

// WriteTo sends one datagram: to a WebSocket session if addr is a
// transport address, over UDP otherwise. addr must be a *net.UDPAddr or
// have the form "host:port". Like UDP, it reports success for a session
// that has ended or whose send queue is full (the datagram is dropped). A
// netcode Listener over the Mux writes it without allocating.
func (m *Mux) WriteTo(b []byte, addr net.Addr) (int, error) {
	ap := dgram.AddrPortOf(addr)
	if !ap.IsValid() {
		return 0, m.opError("write", addr, errors.New("netcode/bridge: not an IP address"))
	}
	return m.writeToAddrPort(b, ap)
}

// LocalAddr returns the UDP socket's address.
func (m *Mux) LocalAddr() net.Addr { return m.udp.LocalAddr() }

// SetDeadline sets the read and write deadlines.
func (m *Mux) SetDeadline(t time.Time) error {
	m.q.SetReadDeadline(t)
	return m.udp.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for ReadFrom.
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
		m.gate.Close()
		m.mu.Lock()
		m.closed = true
		ss := make([]*muxSession, 0, len(m.sessions))
		for _, s := range m.sessions {
			ss = append(ss, s)
		}
		m.mu.Unlock()
		m.q.Close()
		for _, s := range ss {
			s.end(websocket.StatusGoingAway, "netcode/bridge: shutting down")
		}
		m.err = m.udp.Close()
		m.gate.Wait()
		m.wheel.Close() // every session's watchdog is stopped
		m.wg.Wait()
	})
	if !first {
		return m.opError("close", nil, net.ErrClosed)
	}
	return m.err
}

// Handler returns the http.Handler that accepts WebSocket sessions of the
// transport (subprotocol [Subprotocol]; a request that does not
// offer it is refused with HTTP 400). Each binary message is one netcode
// packet of 1 to protocol.MaxPacketBytes bytes; a longer message ends the
// session with 1009, a text message with 1003, and empty messages are
// ignored.
func (m *Mux) Handler() http.Handler { return (*muxHandler)(m) }

type muxHandler Mux

// ServeHTTP upgrades the request and serves the session until it ends.
func (h *muxHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := (*Mux)(h)
	m.gate.Admit(w, r, func(ws *websocket.Conn, bc *wsbridge.BatchConn, release func()) {
		ws.SetReadLimit(maxMessage)
		m.start(wsbridge.WSLink{WS: ws, BC: bc}, r.RemoteAddr, release)
	})
}

// start starts a session over l under the gate's lock; release frees its
// slot once it has ended.
func (m *Mux) start(l wsbridge.Link, remote string, release func()) {
	m.mu.Lock()
	m.next++
	s := &muxSession{
		m:          m,
		link:       l,
		addr:       sessionAddr(m.next),
		out:        packetq.New(m.cfg.SendQueue),
		wd:         wsbridge.NewWatchdog(m.period, m.cfg.IdleTimeout, m.cfg.WriteTimeout),
		writerDone: make(chan struct{}),
		kick:       make(chan struct{}, 1),
	}
	s.wd.Sched = m.wheel
	s.direct, _ = l.(wsbridge.DirectLink)
	m.sessions[s.addr] = s
	m.mu.Unlock()
	// The session goes on in goroutines of its own (Close waits for
	// them), and net/http's for the connection ends, with what it holds.
	go func() {
		defer release()
		s.serve(remote)
	}()
}

// muxHost is a Mux as a wsbridge.Host: package bridge/webtransport starts
// its sessions through it.
type muxHost Mux

func (h *muxHost) Gate() *wsbridge.Gate { return &h.gate }

func (h *muxHost) Start(l wsbridge.Link, remote string, release func()) {
	(*Mux)(h).start(l, remote, release)
}

// hostHook is the hook a Mux embeds under an unexported name, so that it
// exports no method of internal types.
type hostHook = wsbridge.Hosted

// batchHook is the hook a Mux and a Conn embed under an unexported name,
// so that they export no method of internal types, nor the netip.AddrPort
// methods that only a netcode Listener or Dialer uses.
type batchHook = dgram.Batched

// muxBatcher is a Mux's I/O for a netcode Listener over it: batched, and
// one datagram at a time by netip.AddrPort, without allocating.
type muxBatcher struct{ m *Mux }

func (b muxBatcher) ReadBatch(ms []dgram.Message) (int, error)  { return b.m.readBatch(ms) }
func (b muxBatcher) WriteBatch(ms []dgram.Message) (int, error) { return b.m.writeBatch(ms) }
func (b muxBatcher) Push(sink func([]dgram.Message))            { b.m.sink.Store(&sink) }

// WritesDirect is dgram.DirectWriter's: a write to a session goes to its
// bounded send queue, never blocking, beside the Listener's writer.
func (b muxBatcher) WritesDirect() bool { return true }
func (b muxBatcher) ReadFromUDPAddrPort(p []byte) (int, netip.AddrPort, error) {
	return b.m.readFromAddrPort(p)
}
func (b muxBatcher) WriteToUDPAddrPort(p []byte, addr netip.AddrPort) (int, error) {
	return b.m.writeToAddrPort(p, addr)
}
