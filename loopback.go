package netcode

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/gonetcode/netcode/internal/server"

	"github.com/gonetcode/netcode/token"
)

// ConnectLoopback connects a loopback client: a client in the server's own
// process, such as the local player of a listen server, which takes a slot
// like any client but exchanges no packets. It returns both ends of the
// connection: srv is the server's side (what Accept would have returned
// for a remote client; it is not queued for Accept), cli the player's.
//
// Both are message-oriented *Conns with the same Read, Write, Close and
// deadline semantics and errors as a connection over the network: a payload
// written on one end is read on the other (dropped and counted in Dropped
// when the reader's queue is full); closing the client end makes the server
// end read io.EOF and frees the slot; closing the server end, or the
// Listener, makes the client end read io.EOF. A loopback client counts
// toward MaxClients, never times out, and has the client id and user data
// given here. It fails with ErrFull when every slot is taken, with
// ErrClientIDInUse when a client with that id is connected, and with
// net.ErrClosed after Close.
func (l *Listener) ConnectLoopback(clientID uint64, userData [token.UserDataBytes]byte) (srv, cli *Conn, err error) {
	out := l.getOut()
	sc, err := l.core.ConnectLoopback(clientID, userData, out)
	l.act(out, nil, nil) // its log record
	l.putOut(out)
	if err != nil {
		switch {
		case errors.Is(err, server.ErrFull):
			err = ErrFull
		case errors.Is(err, server.ErrClientIDInUse):
			err = ErrClientIDInUse
		default:
			err = net.ErrClosed
		}
		return nil, nil, &net.OpError{Op: "connect loopback", Net: "netcode", Addr: l.addr, Err: err}
	}
	addr := loopbackAddr(sc.Index())
	srv = newConn(&loopbackEnd{l: l, sc: sc, server: true}, l.addr, addr, sc.Queue())
	cli = newConn(&loopbackEnd{l: l, sc: sc}, addr, l.addr, sc.LoopbackQueue())
	srv.clientID = sc.ID()
	srv.userData = sc.UserData()
	for _, c := range []*Conn{srv, cli} {
		c.clientIndex = sc.Index()
		c.maxClients = sc.MaxClients()
	}
	return srv, cli, nil
}

// loopbackEnd is one end of a loopback connection: the core passes a
// Write on one end to the other end's read queue.
type loopbackEnd struct {
	l      *Listener
	sc     *server.Client
	server bool // the server's end
}

func (e *loopbackEnd) send(now time.Time, p []byte, _, _ <-chan struct{}) error {
	var err error
	if e.server {
		err = e.sc.Send(now, p, nil) // to the other end's queue: no packet
	} else {
		err = e.sc.LoopbackSend(p)
	}
	if errors.Is(err, server.ErrClientGone) {
		return net.ErrClosed
	}
	return err
}

func (e *loopbackEnd) sendBatch(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	for i, p := range ps {
		if err := e.send(now, p, stop, deadline); err != nil {
			return i, err
		}
	}
	return len(ps), nil
}

func (e *loopbackEnd) close() {
	out := e.l.getOut()
	if e.server {
		e.l.core.Disconnect(e.sc, out)
	} else {
		e.l.core.LoopbackLeft(e.sc, out)
	}
	e.l.act(out, nil, nil) // log records only: a loopback client has no packets
	e.l.putOut(out)
}

// loopbackAddr is the address of a loopback client: its slot.
type loopbackAddr int

// Network is "netcode-loopback".
func (a loopbackAddr) Network() string { return "netcode-loopback" }

// String is "loopback:" and the client's slot index.
func (a loopbackAddr) String() string { return "loopback:" + strconv.Itoa(int(a)) }
