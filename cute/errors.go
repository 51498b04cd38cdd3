package cute

import (
	"errors"
	"fmt"
)

// Errors a Cute connection or dial ends with, one per failure state of the
// client. Test for them with errors.Is.
var (
	// ErrConnectionDenied: every server in the token was full.
	ErrConnectionDenied = errors.New("cute: connection denied")
	// ErrConnectTokenExpired: the token expired before a server accepted it.
	ErrConnectTokenExpired = errors.New("cute: connect token expired")
	// ErrInvalidConnectToken: the token could not be read.
	ErrInvalidConnectToken = errors.New("cute: invalid connect token")
	// ErrConnectionRequestTimedOut: no server answered the connect token.
	ErrConnectionRequestTimedOut = errors.New("cute: connection request timed out")
	// ErrChallengeResponseTimedOut: the server stopped answering during the
	// handshake.
	ErrChallengeResponseTimedOut = errors.New("cute: challenge response timed out")
	// ErrConnectionTimedOut: nothing arrived from the peer within the
	// connection timeout.
	ErrConnectionTimedOut = errors.New("cute: connection timed out")
	// ErrPayloadTooLarge: a payload of more than MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("cute: payload too large")
	// ErrZeroKey: a secret key of all zeros, which anyone could mint tokens
	// with.
	ErrZeroKey = errors.New("cute: secret key is all zeros")
	// ErrKeyMismatch: the public half of a secret key is not the public key
	// of its scalar, so nothing it signed would verify.
	ErrKeyMismatch = errors.New("cute: secret key's public half does not match its scalar")
)

// errNoAnswer and errNoConfirm explain the two handshake timeouts, as
// netcode's errors do: a server says nothing to a token it refuses (only a
// full server answers, with CONNECTION_DENIED), so a refused client sees
// what a dead server gives it, and the error lists the likely causes.
var (
	errNoAnswer = fmt.Errorf("%w: the server never answered; "+
		"likely causes: the token was already used (each token connects once), "+
		"it was signed with another key pair or made for another application id, "+
		"it does not list the server's address (see ServerConfig.PublicAddr), "+
		"the same token is handshaking from another address, "+
		"or the server is down or unreachable", ErrConnectionRequestTimedOut)
	errNoConfirm = fmt.Errorf("%w: the server challenged the client but never accepted it; "+
		"likely causes: the client id is connected already, "+
		"the server stopped or restarted, or its packets are lost on the way", ErrChallengeResponseTimedOut)
)
