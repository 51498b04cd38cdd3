package wsbridge

import (
	"errors"
	"fmt"
	"syscall"
)

// Host is a bridge (the relay's Handler, a Mux) as the server of another
// kind of session sees it: package bridge/webtransport admits its sessions
// through the host's Gate, so that they share its cap, its refusals and
// its Close, and serves them with the host's own session code.
type Host interface {
	// Gate is the host's admission.
	Gate() *Gate
	// Start starts a session over l, admitted by the Gate (release frees
	// its slot once the session has ended); call it from Gate.Start. A
	// relay's l is a RelayLink.
	Start(l Link, remote string, release func())
}

// Hosted is embedded, under an unexported name, by the types that are
// Hosts (bridge.Handler, transport.Mux): it makes them a Hoster, whose
// method takes a Key, which their users cannot name, so that they export
// no method their users could call.
type Hosted struct{ H Host }

// Key is the argument of Hoster's method (see Hosted).
type Key struct{}

// Hoster is a type that is a Host through a Hosted it embeds. No user
// wrapper can hide it: webtransport.Config takes the concrete
// *bridge.Handler and *transport.Mux.
type Hoster interface {
	BridgeHost(Key) Host
}

// BridgeHost is Hoster's.
func (h Hosted) BridgeHost(Key) Host { return h.H }

// HostOf returns the Host v embeds, or nil.
func HostOf(v any) Host {
	if h, ok := v.(Hoster); ok {
		return h.BridgeHost(Key{})
	}
	return nil
}

// ErrTooBig is what a TooBigError is, for errors.Is (package bridge
// exports it as ErrDatagramTooLarge).
var ErrTooBig = errors.New("netcode/bridge: datagram too large for the WebTransport session")

// TooBigError is the error of a message larger than its link can carry
// now (a WebTransport session's datagrams): Size bytes, at most Max.
type TooBigError struct{ Size, Max int }

func (e *TooBigError) Error() string {
	return fmt.Sprintf("netcode/bridge: %d-byte message over the link's limit of %d bytes", e.Size, e.Max)
}

// Unwrap returns ErrTooBig.
func (e *TooBigError) Unwrap() error { return ErrTooBig }

// Is reports a TooBigError as syscall.EMSGSIZE too: what a UDP socket says
// of a datagram larger than the path carries, which a netcode client's
// Write reports (netcode.ErrPayloadTooLarge) rather than losing it.
func (e *TooBigError) Is(target error) bool { return target == syscall.EMSGSIZE }

// TooBig returns a *TooBigError.
func TooBig(size, max int) error { return &TooBigError{Size: size, Max: max} }
