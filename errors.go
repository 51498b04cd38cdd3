package netcode

import (
	"errors"
	"fmt"
	"net"
)

// Errors a connection or a dial can end with. Test for them with errors.Is:
// the errors returned by Conn and Dial methods wrap them in a *net.OpError,
// as package net does.
var (
	// ErrConnectionDenied: every server in the token was full (or refused).
	ErrConnectionDenied = errors.New("netcode: connection denied")
	// ErrConnectTokenExpired: the token expired before a server accepted it.
	ErrConnectTokenExpired = errors.New("netcode: connect token expired")
	// ErrInvalidConnectToken: the token could not be read.
	ErrInvalidConnectToken = errors.New("netcode: invalid connect token")
	// ErrConnectionRequestTimedOut: no server answered the connection request.
	ErrConnectionRequestTimedOut = errors.New("netcode: connection request timed out")
	// ErrConnectionResponseTimedOut: the server stopped answering during the handshake.
	ErrConnectionResponseTimedOut = errors.New("netcode: connection response timed out")
	// ErrConnectionTimedOut: nothing arrived from the peer within the token's timeout.
	ErrConnectionTimedOut = errors.New("netcode: connection timed out")
	// ErrPayloadTooLarge: a Write of more than MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("netcode: payload too large")
	// ErrEmptyPayload: a Write of zero bytes; netcode payloads are 1 to
	// MaxPayloadBytes long.
	ErrEmptyPayload = errors.New("netcode: empty payload")
	// ErrFull: every client slot is taken (ConnectLoopback).
	ErrFull = errors.New("netcode: server full")
	// ErrClientIDInUse: a client with that id is connected (ConnectLoopback).
	ErrClientIDInUse = errors.New("netcode: client id already connected")
)

// errNoAnswer and errNoConfirm explain the two handshake timeouts. A
// server answers nothing to a request it refuses (the protocol forbids
// telling a stranger why), so a refused client sees what a dead server
// gives it: the error lists the causes.
var (
	errNoAnswer = fmt.Errorf("%w: the server never answered; "+
		"likely causes: the token was already used (each token connects once), "+
		"the token's private key or protocol id is not the server's, "+
		"or the server is down or unreachable", ErrConnectionRequestTimedOut)
	errNoConfirm = fmt.Errorf("%w: the server answered the request but never accepted the client; "+
		"likely causes: the server stopped or restarted, or its packets are lost on the way", ErrConnectionResponseTimedOut)
)

// opError wraps err as package net does, so that errors.Is sees err and a
// deadline error satisfies net.Error with Timeout() true. A local address
// on no particular interface (a socket bound to 0.0.0.0 or ::) shows as
// ":PORT": its IP is none that a reader could look for.
func opError(op string, local, remote net.Addr, err error) error {
	if a, ok := local.(*net.UDPAddr); ok && a != nil && a.IP.IsUnspecified() {
		local = &net.UDPAddr{Port: a.Port}
	}
	return &net.OpError{Op: op, Net: "netcode", Source: local, Addr: remote, Err: err}
}
