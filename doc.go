// Package netcode implements the netcode 1.02 protocol: secure,
// connection-oriented client/server sessions over UDP for real-time games,
// wire-compatible with the C reference implementation.
//
// A server is a net.Listener:
//
//	l, err := netcode.Listen("udp", ":40000", &netcode.ServerConfig{
//		ProtocolID: protocolID,
//		PrivateKey: privateKey, // shared with the token backend
//	})
//	for {
//		conn, err := l.Accept() // a client completed the handshake
//		...
//	}
//
// A client connects with a connect token minted by the backend (package
// token) and gets a net.Conn:
//
//	conn, err := netcode.Dial(connectToken)
//
// Connections are message-oriented: one Write sends one payload of 1 to
// MaxPayloadBytes bytes as one packet, and one Read returns one payload.
// Payloads are unreliable and unordered, as UDP datagrams are; the protocol
// authenticates and encrypts each one and protects against replays.
// Deadlines, Close and errors behave as in package net: a Read past its
// deadline fails with an error wrapping os.ErrDeadlineExceeded, use after
// Close fails with net.ErrClosed, a clean disconnect by the peer reads as
// io.EOF, and protocol failures wrap the exported Err values.
package netcode
