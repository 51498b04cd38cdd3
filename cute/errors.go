package cute

import "errors"

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
