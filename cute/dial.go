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
	"time"

	"github.com/gonetcode/netcode/cute/internal/core"
	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/monoclock"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/timerwheel"
	"github.com/gonetcode/netcode/internal/transport"
)

// Dialer connects to Cute servers. The zero value is ready to use.
type Dialer struct {
	// ApplicationID, if not 0, is the application the token must be for
	// (cn_client_create's application id); 0 accepts the token's own.
	ApplicationID uint64
	// LocalAddr is the optional local "host:port" to send from.
	LocalAddr string
	// ReadQueue is how many received PAYLOAD packets the Conn holds (see
	// ServerConfig.ReadQueue); 0 means DefaultReadQueue.
	ReadQueue int
	// Messages tunes the client/server layer the Conn speaks (see Conn).
	Messages MessageConfig
	// BareProtocol makes the Conn speak the bare protocol layer, without
	// Cute Framework's client/server layer (see ServerConfig.BareProtocol).
	BareProtocol bool
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger
	// ListenPacket, if set, opens the datagram transport the client uses
	// instead of a UDP socket (an in-memory network in tests, or a
	// tunnel), as netcode's Dialer.ListenPacket does. network is "udp",
	// "udp4" or "udp6" as the token's addresses need; the Conn owns the
	// result and closes it. Socket applies to it as SocketConfig says for
	// a caller's transport.
	ListenPacket func(ctx context.Context, network, localAddr string) (net.PacketConn, error)
	// Socket sets up the Conn's UDP socket: its buffers, packet tagging
	// and a Control hook. With ListenPacket, only what SocketConfig says
	// applies to a caller's transport does.
	Socket SocketConfig
}

// Dial connects with a 1114-byte connect token, trying its servers in
// order, and returns once connected.
func Dial(connectToken []byte) (*Conn, error) {
	return DialContext(context.Background(), connectToken)
}

// DialContext is Dial with a context that can cancel the handshake.
func DialContext(ctx context.Context, connectToken []byte) (*Conn, error) {
	var d Dialer
	return d.DialContext(ctx, connectToken)
}

// stateErr is the sentinel of a failure state of the client core.
func stateErr(s core.State) error {
	switch s {
	case core.ConnectTokenExpired:
		return ErrConnectTokenExpired
	case core.InvalidConnectToken:
		return ErrInvalidConnectToken
	case core.ConnectionTimedOut:
		return ErrConnectionTimedOut
	case core.ChallengeResponseTimedOut:
		return errNoConfirm
	case core.ConnectionRequestTimedOut:
		return errNoAnswer
	case core.ConnectionDenied:
		return ErrConnectionDenied
	}
	return io.EOF // Disconnected: the server said goodbye
}

// DialContext connects with a connect token, trying its servers in order,
// and returns once connected. Its errors wrap ErrInvalidConnectToken,
// ErrConnectTokenExpired, ErrConnectionDenied,
// ErrConnectionRequestTimedOut, ErrChallengeResponseTimedOut or the
// context's error, and name the server tried.
func (d *Dialer) DialContext(ctx context.Context, connectToken []byte) (*Conn, error) {
	ct, err := ParseToken(connectToken)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "cute", Err: err}
	}
	if err := d.Messages.check(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "cute", Err: err}
	}
	first := net.UDPAddrFromAddrPort(ct.ServerAddrs[0])
	app := d.ApplicationID
	if app == 0 {
		app = ct.ApplicationID
	}
	cc, err := core.NewClient(time.Now(), connectToken, app)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "cute", Addr: first, Err: fmt.Errorf("%w: %w", stateErr(cc.State()), err)}
	}
	uc, err := d.Socket.options(d.Logger).Dial(ctx, transport.NetworkFor(ct.ServerAddrs), d.LocalAddr, d.ListenPacket)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "cute", Addr: first, Err: err}
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tc := transport.New(uc)
	dc := &dialConn{
		tc:        tc,
		core:      cc,
		log:       log,
		stop:      make(chan struct{}),
		turn:      engine.NewWriteTurn(),
		connected: make(chan struct{}),
		ended:     make(chan struct{}),
	}
	dc.conn = &Conn{}
	dc.sock = engine.NewSocket(tc, engine.One, dialReadBatch, dialReceiver{dc}, dc.stop)
	dc.Reader = dc.sock.NewReader(dc.conn.m.Buffered, nil, dc.hw.Flush)
	dc.hw.Init(tc, dc.turn, dc.stop)
	dc.due.Init(timerwheel.From(ctx), dc.stop, dc.update)
	dc.conn.m.Init(dc, &connRules, uc.LocalAddr(), first, msgconn.NewQueue(d.ReadQueue, DefaultReadQueue))
	dc.wg.Add(1)
	go dc.readLoop()
	dc.update() // the first request, at once

	select {
	case <-dc.connected:
		if d.ListenPacket == nil {
			// The socket is the Dialer's own: fix its peer to the server
			// (transport.Connect), which lets Writes be held for a train.
			dc.hw.Enable(transport.Connect(tc, cc.ServerAddr()))
		}
		dc.conn.m.SetRemote(net.UDPAddrFromAddrPort(cc.ServerAddr()))
		dc.conn.clientID = cc.ClientID()
		dc.conn.maxClients = cc.MaxClients()
		if !d.BareProtocol {
			_ = dc.conn.startMessages(time.Now(), d.Messages, dc.hw.Flush) // checked before dialing
		}
		return dc.conn, nil
	case <-dc.ended:
		err := dc.conn.m.Err()
		dc.shutdown()
		return nil, &net.OpError{Op: "dial", Net: "cute", Source: uc.LocalAddr(), Addr: net.UDPAddrFromAddrPort(cc.ServerAddr()), Err: err}
	case <-ctx.Done():
		state := cc.State()
		dc.conn.Close()
		err := ctx.Err()
		switch state {
		case core.SendingConnectionRequest:
			err = fmt.Errorf("%w: %w", err, errNoAnswer)
		case core.SendingChallengeResponse:
			err = fmt.Errorf("%w: %w", err, errNoConfirm)
		}
		return nil, &net.OpError{Op: "dial", Net: "cute", Source: uc.LocalAddr(), Addr: net.UDPAddrFromAddrPort(cc.ServerAddr()), Err: err}
	}
}

// dialReadBatch is how many datagrams a dialed Conn's reader takes from
// its socket at once.
const dialReadBatch = 16

// dialConn is a dialed Conn's side, a binding to the socket engine
// (internal/engine): the client core, its socket (a One socket: a reader
// goroutine that gives the socket to a Read that pulls), and a timer
// (engine.Due) whose callback runs the core's Update when it is due. Its
// packets are written directly, in the Conn's write turn, and a Write made
// while Reads have payloads queued is held for a train (engine.Held).
//
// Order: the read turn → the write turn (turn: Writes, Update, Close; held
// from a packet's sealing to its write, so that packets leave in sequence
// order) → the core's lock; the timer's lock is a leaf.
type dialConn struct {
	tc   transport.Conn
	sock *engine.Socket // the socket's reader and read turn
	// Reader is the Conn's pulling Reads of the socket (msgconn.Puller):
	// the engine's.
	*engine.Reader
	hw   engine.Held // the Writes held for a train; in the write turn
	due  engine.Due  // runs update when the core is due
	core *core.Client
	conn *Conn
	log  *slog.Logger

	stop      chan struct{} // closed by shutdown: the reader exits
	stopOnce  sync.Once
	turn      engine.WriteTurn // the write turn
	connected chan struct{}    // closed on CONNECTED
	ended     chan struct{}    // closed when the core reaches a final state
	endOnce   sync.Once
	wg        sync.WaitGroup // the reader

	rout core.ClientOutput // the read turn's
	uout core.ClientOutput // Update's and Close's; in the write turn
	wout core.ClientOutput // the Writes'; in the write turn
}

// act follows the core's state change and delivers its payload; the
// datagrams were written by the caller, in its write turn.
func (dc *dialConn) act(out *core.ClientOutput) {
	if out.Payload != nil {
		dc.conn.deliver(out.Payload)
	}
	if out.Changed() {
		switch {
		case out.To == core.Connected:
			close(dc.connected)
			dc.log.Debug("cute: connected", "server", dc.core.ServerAddr().String())
		case out.To <= core.Disconnected:
			dc.end(stateErr(out.To))
		}
	}
}

// end ends the Conn with err (from the reader or the timer: shutdown,
// which waits for them, is for the user's goroutines).
func (dc *dialConn) end(err error) {
	dc.endOnce.Do(func() {
		dc.conn.m.End(err)
		close(dc.ended)
		dc.log.Debug("cute: connection ended", "server", dc.core.ServerAddr().String(), "err", err)
	})
}

// readLoop is the Conn's reader: the engine's loop (Socket.Run).
func (dc *dialConn) readLoop() {
	defer dc.wg.Done()
	if err := dc.sock.Run(nil); err != nil {
		dc.end(fmt.Errorf("reading from %v: %w", dc.core.ServerAddr(), err))
	}
}

// dialReceiver is a dialed Conn's binding to its socket (engine.Receiver).
type dialReceiver struct{ dc *dialConn }

// Receive hands a batch to the core and acts on each Output, in the read
// turn (the reader's, or a pulling Read's). The client core's Receive
// sends nothing: what it answers (a challenge response) is due at once,
// and Update sends it.
func (r dialReceiver) Receive(ms []transport.Message) {
	dc := r.dc
	out := &dc.rout
	now := monoclock.TimeNow() // a packet's path: one clock read
	var next time.Time
	payloads := 0
	for i := range ms {
		from := netip.AddrPortFrom(ms[i].Addr.Addr().Unmap(), ms[i].Addr.Port())
		dc.core.Receive(now, from, ms[i].Buf, out)
		if out.Payload != nil {
			payloads++
		}
		dc.act(out)
		next = out.Next
	}
	dc.hw.Received(payloads, now)
	dc.due.Settle(now, next)
}

// update runs the core's Update in the write turn, writes what it sealed,
// and sets the timer for the next.
func (dc *dialConn) update() {
	if !dc.turn.Take(dc.stop, nil) {
		return
	}
	out := &dc.uout
	dc.core.Update(time.Now(), out)
	_ = dc.hw.Write(out.Datagrams, false)
	dc.act(out)
	next := out.Next
	dc.turn.Give()
	if testHookUpdated != nil {
		testHookUpdated(dc)
	}
	// A deadline the reader gave meanwhile (a challenge to answer) is
	// kept: Schedule only ever moves the timer earlier, and the timer's
	// callback cleared its own deadline as it began (engine.Due).
	dc.due.Schedule(next)
}

// testHookUpdated, when a test sets it, runs between an Update and the
// scheduling of the next, where the reader may act meanwhile.
var testHookUpdated func(*dialConn)

// SendPayload seals p and writes it, in the write turn; a payload sent
// while Reads have payloads queued is held for a train.
func (dc *dialConn) SendPayload(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !dc.turn.Take(stop, deadline) {
		return engine.TurnErr(stop)
	}
	out := &dc.wout
	if err := dc.core.Send(now, p, out); err != nil {
		dc.turn.Give()
		if errors.Is(err, core.ErrPayloadSize) {
			return ErrPayloadTooLarge
		}
		return dc.notConnected()
	}
	err := dc.hw.Send(out.Datagrams, dc.conn.readable(), now, nil)
	next := out.Next
	dc.turn.Give()
	// The payload put the next keep-alive off: the timer moves later
	// rather than fire for nothing.
	dc.due.Postpone(next)
	if err != nil {
		return fmt.Errorf("%w: %d-byte payload: %w", ErrPayloadTooLarge, len(p), err)
	}
	return nil
}

// SendPayloads is msgconn.BatchEndpoint's: it seals ps and writes them a
// train at a time (engine.SendTrains), each with one batched write after
// the Writes held, in the write turn, as SendPayload does.
func (dc *dialConn) SendPayloads(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	var next time.Time
	n, err := engine.SendTrains(dc.turn, ps, payloadOverhead, stop, deadline, func(train [][]byte) (int, error) {
		out := &dc.wout
		n, err := dc.core.SendBatch(now, train, out)
		if err != nil {
			if errors.Is(err, core.ErrPayloadSize) {
				return 0, ErrPayloadTooLarge
			}
			return 0, dc.notConnected()
		}
		_ = dc.hw.Write(out.Datagrams, false)
		next = out.Next
		return n, nil
	})
	dc.due.Postpone(next) // as SendPayload's
	return n, err
}

// notConnected is what a Write that found the core not connected fails
// with: sendq.ErrStopped, which the Conn turns into its end; or, before the
// Conn has one (the reader between the core's Receive that ended the
// connection and act, which ends the Conn), the end the core's final state
// means, not the net.ErrClosed of a Conn closed on this side (Close ends
// the Conn before it disconnects the core).
func (dc *dialConn) notConnected() error {
	if dc.conn.m.Err() != nil {
		return sendq.ErrStopped
	}
	return stateErr(dc.core.State())
}

// ClosePeer sends the DISCONNECT packets (if connected), after the Writes
// held, and releases the socket, the reader and the timer. The Writes
// waiting for the write turn gave up (the Conn ended): Close waits at
// most for one socket write.
func (dc *dialConn) ClosePeer() {
	dc.turn.Wait()
	out := &dc.uout
	dc.core.Disconnect(time.Now(), out)
	_ = dc.hw.Write(out.Datagrams, false)
	dc.turn.Give()
	dc.shutdown()
}

// shutdown stops the reader, the timer and the socket, and waits for
// them.
func (dc *dialConn) shutdown() {
	dc.stopOnce.Do(func() {
		close(dc.stop)
		dc.tc.Close()
		dc.wg.Wait()
		dc.due.Stop()
	})
}
