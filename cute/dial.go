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
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
)

// Dialer connects to Cute servers. The zero value is ready to use.
type Dialer struct {
	// ApplicationID, if not 0, is the application the token must be for
	// (cn_client_create's application id); 0 accepts the token's own.
	ApplicationID uint64
	// LocalAddr is the optional local "host:port" to send from.
	LocalAddr string
	// ReadQueue is how many received payloads the Conn holds for Read;
	// 0 means DefaultReadQueue.
	ReadQueue int
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger
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
		return ErrChallengeResponseTimedOut
	case core.ConnectionRequestTimedOut:
		return ErrConnectionRequestTimedOut
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
	first := net.UDPAddrFromAddrPort(ct.ServerAddrs[0])
	app := d.ApplicationID
	if app == 0 {
		app = ct.ApplicationID
	}
	cc, err := core.NewClient(time.Now(), connectToken, app)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "cute", Addr: first, Err: fmt.Errorf("%w: %w", stateErr(cc.State()), err)}
	}
	laddr := d.LocalAddr
	if laddr == "" {
		laddr = ":0"
	}
	uc, err := transport.ListenUDP(transport.NetworkFor(ct.ServerAddrs), laddr, 0, nil)
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
		sq:        sendq.New(tc, isKeepAlive, sendq.ClientLen),
		core:      cc,
		log:       log,
		stop:      make(chan struct{}),
		due:       newDueTime(),
		turn:      make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		connected: make(chan struct{}),
		ended:     make(chan struct{}),
	}
	dc.conn = &Conn{}
	dc.sock = engine.NewSocket(tc, engine.One, 16, dialReceiver{dc}, dc.stop)
	dc.Reader = dc.sock.NewReader(dc.conn.m.Buffered, nil)
	dc.conn.m.Init(dc, &connRules, uc.LocalAddr(), first, msgconn.NewQueue(d.ReadQueue, DefaultReadQueue))
	dc.wg.Add(2)
	go dc.readLoop()
	go dc.updater()

	select {
	case <-dc.connected:
		dc.conn.m.SetRemote(net.UDPAddrFromAddrPort(cc.ServerAddr()))
		dc.conn.clientID = cc.ClientID()
		dc.conn.maxClients = cc.MaxClients()
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
			err = fmt.Errorf("%w: %w", err, ErrConnectionRequestTimedOut)
		case core.SendingChallengeResponse:
			err = fmt.Errorf("%w: %w", err, ErrChallengeResponseTimedOut)
		}
		return nil, &net.OpError{Op: "dial", Net: "cute", Source: uc.LocalAddr(), Addr: net.UDPAddrFromAddrPort(cc.ServerAddr()), Err: err}
	}
}

// dialConn is a dialed Conn's side: its own socket, bound to the socket
// engine (internal/engine: a One socket, whose reader gives the socket to
// a Read that pulls), its send queue and updater goroutine around the
// client core.
type dialConn struct {
	tc   transport.Conn
	sock *engine.Socket // the socket's reader and read turn
	// Reader is the Conn's pulling Reads of the socket (msgconn.Puller):
	// the engine's.
	*engine.Reader
	sq   *sendq.Queue
	core *core.Client
	conn *Conn
	log  *slog.Logger

	stop      chan struct{} // closed by shutdown: the goroutines exit
	stopOnce  sync.Once
	due       *dueTime      // when the updater runs next
	turn      chan struct{} // the write turn: Writes and Update seal in sequence order
	wake      chan struct{} // the send queue's room signal for Writes
	connected chan struct{} // closed on CONNECTED
	ended     chan struct{} // closed when the core reaches a final state
	endOnce   sync.Once
	wg        sync.WaitGroup

	rout core.ClientOutput // the read turn's
	uout core.ClientOutput // the updater's
	wout core.ClientOutput // the write turn holder's
}

// act sends out's datagrams and follows the core's state change.
func (dc *dialConn) act(out *core.ClientOutput, stop, deadline <-chan struct{}, wake chan struct{}) error {
	var err error
	if len(out.Datagrams) > 0 {
		err = dc.sq.Send(out.Datagrams, stop, deadline, wake)
	}
	if out.Payload != nil {
		dc.conn.m.Deliver(out.Payload)
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
	return err
}

// end ends the Conn with err and stops the goroutines (from one of them:
// shutdown, which waits for them, is for the user's goroutines).
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
// turn (the reader's, or a pulling Read's).
func (r dialReceiver) Receive(ms []transport.Message) {
	dc := r.dc
	now := time.Now()
	for i := range ms {
		from := netip.AddrPortFrom(ms[i].Addr.Addr().Unmap(), ms[i].Addr.Port())
		dc.core.Receive(now, from, ms[i].Buf, &dc.rout)
		dc.act(&dc.rout, sendq.NoWait, nil, nil)
		dc.due.earlier(dc.rout.Next)
	}
}

// updater runs the core's Update when it is due, in the write turn.
func (dc *dialConn) updater() {
	defer dc.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-dc.stop:
			return
		case <-dc.due.kick:
			timer.Reset(time.Until(dc.due.get()))
			continue
		case <-timer.C:
		}
		select {
		case dc.turn <- struct{}{}:
		case <-dc.stop:
			return
		}
		dc.core.Update(time.Now(), &dc.uout)
		dc.act(&dc.uout, sendq.NoWait, nil, nil) // keepalives are dropped on a full queue
		next := dc.uout.Next
		<-dc.turn
		dc.due.set(next)
		if !next.IsZero() { // zero: final, end was called
			timer.Reset(time.Until(next))
		}
	}
}

// SendPayload seals p and sends it, in the write turn.
func (dc *dialConn) SendPayload(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !msgconn.TakeTurn(dc.turn, stop, deadline) {
		return msgconn.TurnErr(stop)
	}
	defer func() { <-dc.turn }()
	if err := dc.core.Send(now, p, &dc.wout); err != nil {
		if errors.Is(err, core.ErrPayloadSize) {
			return ErrPayloadTooLarge
		}
		return dc.notConnected()
	}
	err := dc.act(&dc.wout, stop, deadline, dc.wake)
	dc.due.earlier(dc.wout.Next)
	return err
}

// notConnected is what a Write that found the core not connected fails
// with: sendq.ErrStopped, which the Conn turns into its end; or, before the
// Conn has one (the read loop between the core's Receive that ended the
// connection and act, which ends the Conn), the end the core's final state
// means, not the net.ErrClosed of a Conn closed on this side (Close ends
// the Conn before it disconnects the core).
func (dc *dialConn) notConnected() error {
	if dc.conn.m.Err() != nil {
		return sendq.ErrStopped
	}
	return stateErr(dc.core.State())
}

// ClosePeer sends the DISCONNECT packets (if connected) and releases the
// socket and goroutines.
func (dc *dialConn) ClosePeer() {
	var out core.ClientOutput
	dc.core.Disconnect(time.Now(), &out)
	if len(out.Datagrams) > 0 {
		_ = dc.sq.Send(out.Datagrams, sendq.NoWait, nil, nil)
	}
	dc.shutdown()
}

// shutdown stops the goroutines, the writer and the socket, and waits.
func (dc *dialConn) shutdown() {
	dc.stopOnce.Do(func() {
		close(dc.stop)
		dc.sq.Close()
		dc.tc.Close()
		dc.wg.Wait()
	})
}
