// Package cute speaks the Cute Protocol 1.00, the dialect of netcode that
// Cute Framework (cute_net.h 1.03) uses, byte for byte as Cute Framework's
// C code writes it (the code is the authority on the wire, not the
// standard's text).
//
// A deployment has one signing key pair, made with GenerateKeyPair. The
// web service that admits players keeps the secret key and mints a connect
// token per player with GenerateToken; the game servers hold the same key
// pair (the secret half also seals the token's secret section); the client
// receives only the 1114-byte token.
//
// The adapters have netcode's shape: Listen returns a Listener whose
// Accept yields a *Conn per connected client, and Dial (or a Dialer)
// connects with a token. A Conn is a message-oriented net.Conn: one Read
// returns one message, one Write sends one; deadlines fail with
// os.ErrDeadlineExceeded, calls after Close with net.ErrClosed, and a Read
// after the peer's DISCONNECT with io.EOF. A failed dial wraps one of the
// client's failure states (ErrConnectionDenied,
// ErrConnectionRequestTimedOut, ...) and names the server. A server says
// nothing to a token it refuses, so a handshake that timed out lists the
// likely causes in its message, as netcode's do.
//
// By default a Conn speaks what a Cute Framework game speaks:
// cute_net.h's client/server layer (ack system and reliability transport,
// internal/layer) inside the protocol's PAYLOAD packets. A Write is a
// reliable-in-order message of any size up to MessageConfig.MaxMessageBytes
// (cf_client_send / cf_server_send with send_reliably true), Send(b, false)
// a fire-and-forget one, and ReadMessage reports which kind a message was
// (was_sent_reliably). ServerConfig.BareProtocol and Dialer.BareProtocol
// give the bare protocol layer instead (one Write is one PAYLOAD of at
// most MaxPayloadBytes), for users who bring their own layer.
//
// The protocol logic lives in I/O-free client and server cores
// (internal/core), on the crypto of internal/hydro and the wire format of
// internal/wire; the adapters bind to the socket engine the netcode
// adapter binds to (internal/engine, whose package doc draws every
// goroutine, timer callback, queue and lock with the lock order): its
// reader and read turn, through which a Read that finds nothing queued
// reads the socket itself, its send queue, the Conn machinery and the
// token history.
//
// Operations are netcode's, through the same code: Listener.Drain denies
// new clients for a deploy (and fleet.CuteSource registers and drains a
// Listener in a fleet), Listener.Stats feeds metrics.NewCuteCollector's
// Prometheus series, and SocketConfig sets packet tagging, buffers and a
// Control hook on the sockets (docs/cute.md, "Operating a Cute server").
//
// Every goroutine, by the function it runs (TestGoroutineInventory in the
// root package fails if another runs); Close stops those it owns:
//
//	cute.(*shard).readLoop      a Listener's reader, one per socket
//	                            (ServerConfig.ReadShards; the engine's Socket.Run)
//	cute.(*Listener).updater    a Listener's ticker: the core's Update when due (the engine's Ticker)
//	cute.(*dialConn).readLoop   a dialed Conn's reader (the engine's Socket.Run)
//	sendq.(*Queue).writer       the writer of a Listener's socket, one per socket (internal/sendq)
//
// and the engine's timer callbacks, listed in its package doc:
// engine.(*Due).fire runs a dialed Conn's Update when it is due, and the
// client/server layer's Update of a Conn on either side (the layer has no
// goroutine: the read turn hands it its PAYLOADs, and its Due runs it when
// due); engine.(*Held).dispatch writes a dialed Conn's held Writes once its
// writer stops; engine.(*Fallback).fire writes a Listener's server Conns'
// held Writes that nothing else sent within engine.HeldFallback.
package cute
