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
	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/timerwheel"
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
	// Conn owns the result and closes it. Socket applies to it as
	// SocketConfig says for a caller's transport.
	ListenPacket func(ctx context.Context, network, localAddr string) (net.PacketConn, error)
	// ReadQueue is how many received payloads the Conn holds for Read;
	// 0 means 256.
	ReadQueue int
	// Socket sets up the Conn's UDP socket: its buffers, packet tagging
	// and a Control hook. With ListenPacket, only what SocketConfig says
	// applies to a caller's transport does.
	Socket SocketConfig
	// RequestTimeout bounds the time the Dialer sends connection requests
	// before any of the token's servers answers one (with a challenge or a
	// denial); past it, the dial fails with ErrConnectionRequestTimedOut.
	// A server answers only a token it can open, so a forged token, whose
	// public part may claim any timeout, costs this long of requests and
	// no more. Set it when dialing tokens from untrusted hands, as a
	// bridge's relay does; 0 means only the token's own timeouts and the
	// context bound the dial.
	RequestTimeout time.Duration
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
// context's error. When the context ends first, the error wraps both the
// context's error and where the handshake stood: ErrConnectionRequestTimedOut
// if no server had answered yet, ErrConnectionResponseTimedOut if one had
// sent a challenge but not yet accepted the client.
func (d *Dialer) DialContext(ctx context.Context, connectToken []byte) (*Conn, error) {
	start := time.Now()
	tok, err := token.Parse(connectToken)
	if err != nil {
		return nil, opError("dial", nil, nil, fmt.Errorf("%w: %v", ErrInvalidConnectToken, err))
	}
	network := transport.NetworkFor(tok.ServerAddrs)
	// Errors name the server tried: the first until the handshake moves on.
	first := net.UDPAddrFromAddrPort(netip.AddrPortFrom(tok.ServerAddrs[0].Addr().Unmap(), tok.ServerAddrs[0].Port()))
	log := discardIfNil(d.Logger)
	pc, err := d.Socket.options(log).Dial(ctx, network, d.LocalAddr, d.ListenPacket)
	if err != nil {
		return nil, opError("dial", nil, first, err)
	}
	tc := transport.New(pc)
	dc := &dialConn{
		tc:        tc,
		connected: make(chan struct{}),
		failed:    make(chan struct{}),
		stop:      make(chan struct{}),
	}
	dc.due.Init(timerwheel.From(ctx), dc.stop, dc.update)
	dc.turn = engine.NewWriteTurn()
	dc.sock = engine.NewSocket(tc, engine.One, dialReadBatch, dialReceiver{dc}, dc.stop)
	dc.hw.Init(tc, dc.turn, dc.stop)
	dc.conn = newConn(dc, tc.LocalAddr(), nil, newQueue(d.ReadQueue))
	dc.Reader = dc.sock.NewReader(dc.conn.m.Buffered, nil, dc.hw.Flush)
	dc.core = client.New(time.Now(), connectToken, log)
	dc.core.SetRequestTimeout(d.RequestTimeout)
	if dc.core.State() != client.SendingConnectionRequest {
		tc.Close()
		return nil, opError("dial", nil, first, ErrInvalidConnectToken)
	}
	if err := ctx.Err(); err != nil {
		// A context that ended before the handshake began sends nothing:
		// as net.Dialer does, Dial returns at once, naming the state the
		// handshake never left.
		tc.Close()
		err = fmt.Errorf("%w after %v: %w", err, time.Since(start).Round(time.Millisecond), stateError(dc.core.State()))
		return nil, opError("dial", dc.conn.LocalAddr(), first, err)
	}
	dc.wg.Add(1)
	go dc.readLoop()
	dc.update() // the first request, at once

	select {
	case <-dc.connected:
		if d.ListenPacket == nil {
			// The socket is the Dialer's own: fix its peer to the
			// server (see transport.Connect).
			dc.hw.Enable(transport.Connect(tc, dc.core.ServerAddr()))
		}
		dc.conn.m.SetRemote(net.UDPAddrFromAddrPort(dc.core.ServerAddr()))
		dc.conn.clientIndex = dc.core.ClientIndex()
		dc.conn.maxClients = dc.core.MaxClients()
		return dc.conn, nil
	case <-dc.failed:
		dc.shutdown()
		return nil, opError("dial", dc.conn.LocalAddr(), dc.serverTried(), dc.failErr)
	case <-ctx.Done():
		// Where the handshake stood says more than the context's error
		// alone: both are in the error.
		state := dc.core.State()
		dc.close()
		err := ctx.Err()
		if e := stateError(state); e != io.EOF {
			err = fmt.Errorf("%w after %v: %w", err, time.Since(start).Round(time.Millisecond), e)
		}
		return nil, opError("dial", dc.conn.LocalAddr(), dc.serverTried(), err)
	}
}

// serverTried is the address of the server the handshake was with last.
func (dc *dialConn) serverTried() net.Addr {
	return net.UDPAddrFromAddrPort(dc.core.ServerAddr())
}

// dialConn is the client side of a Conn: the client core, its socket, the
// goroutine that reads the socket, and a timer that runs the core's Update
// when it is due (its callback runs on a goroutine of its own only then).
//
// Every call into the core fills an Output that the caller acts on after
// the call (sending datagrams, delivering the payload, ending the Conn), so
// nothing here runs under the core's lock.
//
// Each call that sends fills an Output of its own (from clientOutputs); no lock of
// the core is held across a socket write or a log call. The Conn's write
// turn (turn, a channel of capacity 1, so that taking it is a select that
// also watches the Conn's end) is held from the sealing of its packets to
// their write, so that they leave in sequence order: the peer's replay
// window drops a packet more than 256 behind the newest. Order: turn →
// the core's lock; the timer's lock (engine.Due's) is a leaf, taken with
// neither held.
//
// Close ends every Write waiting for its turn at once (they select on the
// Conn's end, which Close marks first), then takes the turn itself, so
// that its disconnect packets follow the packets already sealed: it waits
// only for the one socket write in progress, if any, never for a queue.
//
// The socket is read by whoever holds the read turn (rt, a readTurn): the
// reader goroutine, or a Read that finds nothing queued and the turn free,
// which then reads the socket itself (Pull) and takes its payload with no
// goroutine hand-off: both are the engine's (internal/engine.Socket, a
// One socket), which calls receive (dialReceiver) in the read turn; rout
// goes with the turn. Order: the read turn → the write turn → the core's
// lock; the engine's deadline lock is a leaf.
type dialConn struct {
	tc   transport.Conn
	core *client.Client
	conn *Conn

	connected chan struct{} // closed on reaching Connected
	failed    chan struct{} // closed on failing before Connected
	failErr   error         // written before failed is closed

	turn engine.WriteTurn // the write turn
	// bout is the Output of batched sends (sendBatch), the Conn's own so
	// that its buffer, grown to a train's bytes, is kept; used in the
	// write turn.
	bout client.Output
	// rout is the Output for Receive, which never sends, so it has no
	// datagram buffer; used in the read turn.
	rout client.Output

	hw engine.Held // Writes held for a train (the engine's policy); in the write turn

	sock           *engine.Socket // the socket's reader and read turn
	*engine.Reader                // the Conn's pulling Reads (msgconn.Puller)

	// due is the timer that runs update when the core is due (the
	// engine's Due), on the dialer's scheduler (a relay's wheel) or a
	// runtime timer.
	due engine.Due

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // the read loop
}

// update runs the core's Update, acts on it and sets the timer for the
// next one.
func (dc *dialConn) update() {
	out := clientOutputs.Get().(*client.Output)
	if !dc.turn.Take(dc.stop, nil) {
		clientOutputs.Put(out)
		return
	}
	dc.core.Update(time.Now(), out)
	_ = dc.hw.Write(out.Datagrams, false)
	dc.turn.Give()
	dc.act(out)
	next := out.Next
	clientOutputs.Put(out)
	dc.due.Schedule(next)
}

// act carries out what a core call reported in out: it sends the
// datagrams, delivers the payload and acts on a change of state.
// The datagrams were written by the caller, in its write turn.
func (dc *dialConn) act(out *client.Output) {
	dc.core.Log(out)
	if out.Payload != nil {
		dc.conn.deliver(out.Payload)
	}
	if !out.Changed() {
		return
	}
	switch to := out.To; {
	case to == client.Connected:
		// The core enters Connected at most once; the guard keeps a
		// second entry from closing the channel twice all the same.
		select {
		case <-dc.connected:
		default:
			close(dc.connected)
		}
	case to <= client.Disconnected:
		// Final, so reported once. Whether the Conn was up is told by the
		// state left, not by whether another goroutine has closed
		// dc.connected yet.
		err := stateError(to)
		if out.From == client.Connected {
			dc.conn.end(err)
		} else {
			dc.failErr = err
			close(dc.failed)
		}
		dc.halt()
	}
}

// halt stops the read loop and closes the socket without waiting; it is
// safe to call from the read loop and the timer.
func (dc *dialConn) halt() {
	dc.stopOnce.Do(func() {
		close(dc.stop)
		dc.tc.Close()
	})
}

// shutdown halts, stops the timer, and waits for the read loop and any
// timer callback to finish.
func (dc *dialConn) shutdown() {
	dc.halt()
	dc.due.Stop()
	dc.wg.Wait()
}

func (dc *dialConn) send(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	if !dc.turn.Take(stop, deadline) {
		return engine.TurnErr(stop)
	}
	out := clientOutputs.Get().(*client.Output)
	err := dc.core.Send(now, p, out)
	if err != nil {
		_ = dc.hw.Write(out.Datagrams, false)
	} else if werr := dc.hw.Send(out.Datagrams, dc.conn.m.Buffered() > 0, now, nil); werr != nil {
		err = fmt.Errorf("%w: %d-byte payload: %w", ErrPayloadTooLarge, len(p), werr)
	}
	dc.turn.Give()
	dc.act(out)
	next := out.Next
	clientOutputs.Put(out)
	if err == nil {
		// The payload put the next keep-alive off: the timer moves
		// later rather than fire for nothing (a Conn written to every
		// 90 ms would wake it at every Write).
		dc.due.Postpone(next)
	}
	if errors.Is(err, client.ErrNotConnected) {
		return dc.endErr()
	}
	return err
}

// sendBatch seals ps and writes them a train at a time (sendTrains),
// each with one batched write, in the Conn's write turn, as send does.
func (dc *dialConn) sendBatch(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	n, err := sendTrains(dc.turn, ps, stop, deadline, func(train [][]byte) (int, error) {
		out := &dc.bout
		n, err := dc.core.SendBatch(now, train, out)
		_ = dc.hw.Write(out.Datagrams, false)
		dc.act(out) // Send changes no state: logs at most
		return n, err
	})
	if errors.Is(err, client.ErrNotConnected) {
		return n, dc.endErr()
	}
	return n, err
}

// endErr is what a Write that found the core no longer connected fails
// with: the Conn's end. The goroutine that moved the core out of Connected
// (the reader, on the server's disconnect; the timer, on a timeout) ends
// the Conn only after the core's call, in act, so a Write between the two
// finds no end yet: it fails with the end that the core's final state
// means (io.EOF, ErrConnectionTimedOut), as act will end the Conn, not
// with net.ErrClosed, which only Close on this side may cause (and which
// Close sets as the end before it disconnects the core).
func (dc *dialConn) endErr() error {
	if e := dc.conn.Err(); e != nil {
		return e
	}
	return stateError(dc.core.State())
}

// close sends the disconnect packets, in one batched write where the
// socket can, and stops everything.
func (dc *dialConn) close() {
	out := clientOutputs.Get().(*client.Output)
	dc.turn.Wait() // the Writes waiting for it gave up: the Conn ended
	dc.core.Disconnect(out)
	_ = dc.hw.Write(out.Datagrams, false)
	dc.turn.Give()
	dc.act(out) // the state change and the log records
	clientOutputs.Put(out)
	dc.shutdown()
}

// clientOutputs holds the Outputs of the client core's calls that send
// (Update, Send, Disconnect), for every dialed Conn: one pool, so that a
// collection, which empties it, costs a few Outputs, not one per Conn.
var clientOutputs = sync.Pool{New: func() any { return new(client.Output) }}

// stateError maps a final client state to the error it ends with, and a
// handshake state to the error it would end with if nothing more arrived.
func stateError(s client.State) error {
	switch s {
	case client.SendingConnectionRequest:
		return errNoAnswer
	case client.SendingConnectionResponse:
		return errNoConfirm
	case client.ConnectTokenExpired:
		return ErrConnectTokenExpired
	case client.InvalidConnectToken:
		return ErrInvalidConnectToken
	case client.ConnectionTimedOut:
		return ErrConnectionTimedOut
	case client.ConnectionResponseTimedOut:
		return errNoConfirm
	case client.ConnectionRequestTimedOut:
		return errNoAnswer
	case client.ConnectionDenied:
		return ErrConnectionDenied
	}
	return io.EOF
}

// dialReadBatch is how many datagrams a dialed Conn's reader takes from its
// socket at once. A server sends one client little at a time (its echoes,
// 10 keep-alives a second), and each slot is a 1500-byte buffer the Conn
// keeps: a bridge's relay holds thousands of Conns.
const dialReadBatch = 8

// dialGROSlots is the most super-datagrams (64 KiB each) a dialed Conn's
// read takes once a bulk transfer turned GRO on (Bulk): its reads start
// with one and add one while trains come faster than a read takes them.
const dialGROSlots = 8

// readLoop is the Conn's reader goroutine: the engine's loop (Socket.Run).
func (dc *dialConn) readLoop() {
	defer dc.wg.Done()
	err := dc.sock.Run(nil)
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

// dialReceiver is a dialed Conn's binding to its socket (engine.Receiver).
type dialReceiver struct{ dc *dialConn }

// Receive hands a batch of datagrams to the core and acts on the
// outcome; it runs in the read turn.
func (r dialReceiver) Receive(ms []transport.Message) {
	dc := r.dc
	out := &dc.rout
	now := time.Now()
	var next time.Time
	payloads := 0
	for i := range ms {
		if len(ms[i].Buf) <= protocol.MaxPacketBytes {
			dc.core.Receive(now, ms[i].Addr, ms[i].Buf, out)
			if out.Payload != nil {
				payloads++
			}
			dc.act(out)
			next = out.Next
		}
	}
	dc.hw.Received(payloads, now)
	dc.due.Settle(now, next)
}

// Bulk is msgconn.Bulker's: package reliable attached (a Stream or a
// Session), and the server's trains (GSO) are to arrive coalesced (GRO)
// rather than cut into one datagram per read. The next read of the
// socket turns it on.
func (dc *dialConn) Bulk() { transport.AskGRO(dc.tc, dialGROSlots) }
