package wsbridge

import "github.com/coder/websocket"

// The relay's own close codes, 4000 to 4011 (CodeIdleTimeout, 4012, is
// both bridges'; CodeFull is WebSocket's 1013). Package bridge's
// documentation tables them, with the standard codes it uses, for clients
// in any language: the numbers are the contract.
const (
	// CodeDisconnected: the server disconnected the client cleanly.
	CodeDisconnected websocket.StatusCode = 4000
	// CodeConnectionDenied: every server in the token was full or refused
	// the client (netcode.ErrConnectionDenied).
	CodeConnectionDenied websocket.StatusCode = 4001
	// CodeConnectTokenExpired: the token expired before a server accepted
	// it (netcode.ErrConnectTokenExpired).
	CodeConnectTokenExpired websocket.StatusCode = 4002
	// CodeInvalidConnectToken: the first message was not a readable
	// 2048-byte connect token (netcode.ErrInvalidConnectToken).
	CodeInvalidConnectToken websocket.StatusCode = 4003
	// CodeConnectionRequestTimedOut: no server answered the connection
	// request (netcode.ErrConnectionRequestTimedOut).
	CodeConnectionRequestTimedOut websocket.StatusCode = 4004
	// CodeConnectionResponseTimedOut: the server stopped answering during
	// the handshake (netcode.ErrConnectionResponseTimedOut).
	CodeConnectionResponseTimedOut websocket.StatusCode = 4005
	// CodeConnectionTimedOut: nothing arrived from the server within the
	// token's timeout (netcode.ErrConnectionTimedOut).
	CodeConnectionTimedOut websocket.StatusCode = 4006
	// CodeServerNotAllowed: the token names a server the bridge may not
	// dial; the reason names the address.
	CodeServerNotAllowed websocket.StatusCode = 4010
	// CodeHandshakeTimeout: the connect token did not arrive within the
	// relay's HandshakeTimeout, or the dial took longer than its
	// DialTimeout.
	CodeHandshakeTimeout websocket.StatusCode = 4011
)
