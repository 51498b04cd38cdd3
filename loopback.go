package netcode

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/gonetcode/netcode/internal/server"
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
func (l *Listener) ConnectLoopback(clientID uint64, userData [UserDataBytes]byte) (srv, cli *Conn, err error) {
	sc, err := l.core.ConnectLoopback(clientID, userData)
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
	srv = sc.Tag.(*Conn)
	return srv, srv.ep.(*loopbackEnd).peer, nil
}

// newLoopback makes the two Conns of loopback client sc (from the core's
// Connected event).
func (l *Listener) newLoopback(sc *server.Client) {
	addr := loopbackAddr(sc.Index())
	se := &loopbackEnd{l: l, sc: sc, server: true}
	ce := &loopbackEnd{l: l, sc: sc}
	srv := newConn(se, l.addr, addr, l.cfg.ReadQueue)
	cli := newConn(ce, addr, l.addr, l.cfg.ReadQueue)
	se.peer, ce.peer = cli, srv
	srv.clientID = sc.ID()
	srv.userData = sc.UserData()
	for _, c := range []*Conn{srv, cli} {
		c.clientIndex = sc.Index()
		c.maxClients = sc.MaxClients()
	}
	sc.Tag = srv
}

// loopbackEnd is one end of a loopback connection: a Write on it is a
// payload delivered to the other end's read queue.
type loopbackEnd struct {
	l      *Listener
	sc     *server.Client
	peer   *Conn // the other end
	server bool  // the server's end
}

func (e *loopbackEnd) send(_ time.Time, p []byte) error {
	e.peer.deliver(p)
	return nil
}

func (e *loopbackEnd) close() {
	if e.server {
		e.l.core.Disconnect(e.sc, e.l.direct)
		return
	}
	e.l.core.LoopbackLeft(e.sc)
}

// loopbackAddr is the address of a loopback client: its slot.
type loopbackAddr int

// Network is "netcode-loopback".
func (a loopbackAddr) Network() string { return "netcode-loopback" }

// String is "loopback:" and the client's slot index.
func (a loopbackAddr) String() string { return "loopback:" + strconv.Itoa(int(a)) }
