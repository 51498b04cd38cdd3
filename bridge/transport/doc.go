// Package transport is the end-to-end encrypted WebSocket transport of
// netcode: every binary WebSocket message is one netcode packet, exactly as
// it would travel in a UDP datagram, so nothing between a netcode client
// (such as the Go client compiled to WebAssembly, in a browser) and the
// netcode server can read or forge the payloads; the relay of package
// bridge, by contrast, sees them in the clear.
//
// The server side is a [Mux]: a net.PacketConn that merges a UDP socket with
// WebSocket peers, to be given to netcode.NewListener so that one server
// serves both kinds of client; [Mux.Handler] accepts the WebSockets. The
// client side is [Dial], or [ListenPacket] for netcode.Dialer.ListenPacket.
// Sessions are admitted, refused for MaxSessions (close code 1013,
// the header Netcode-Bridge-Refused, bridge.ErrBridgeFull) and closed within a bound
// exactly as the relay's are, by the same code; the close codes are
// package bridge's. See examples/wasm. Package bridge/webtransport adds
// WebTransport peers to a Mux, beside its WebSocket ones, under the same
// cap.
//
// # Goroutines, locks and queues
//
// Every goroutine, by the function it runs (TestGoroutineInventory fails
// if another runs):
//
//	transport.(*Mux).readUDP         per Mux: reads the UDP socket in batches into the read queue
//	transport.(*muxSession).serve    per session: reads the peer's messages into the read queue, or for the Listener
//	transport.(*muxSession).writer   per session: writes its send queue to the peer, in one write per batch
//	transport.(*Conn).reader         per client Conn: reads the server's messages into its read queue
//	timerwheel.(*Wheel).advance      per Mux: its timer wheel, a tick at a time while it runs the sessions' due watchdog checks
//
// Queues: the Mux's read queue (MuxConfig.ReadQueue datagrams, UDP and
// WebSocket together, each session at most its share), read by the
// netcode Listener; under a netcode Listener, though, a session's reader
// hands each datagram to the Listener itself, which acts on it in that
// goroutine (decrypts it and queues its payload for the Conn, or answers a
// handshake) without waiting on anything: what has no room is dropped, as
// over UDP, and only UDP datagrams go through the read queue. Each
// session's send queue (MuxConfig.SendQueue), a
// full one dropping datagrams as UDP would; a client Conn's read queue
// (Options.ReadQueue). Locks, in order: the admission's lock (session
// count, Close's mark) → the Mux's lock (its sessions, read-locked to
// route a datagram) → a session's queue or watchdog lock (leaves). A
// session's write turn (muxSession.wmu) is held across its WebSocket
// writes: by its writer (drain, and the close), and by a direct write from
// the goroutine that acts on a pushed datagram, which only tries it
// (TryLock) and writes without blocking (TryWrite); under it, the
// connection's write lock (wsbridge.BatchConn.mu, a leaf) is held across
// the TCP write. No other lock is held across a socket or WebSocket read
// or write, and no lock shared by sessions ever is. The netcode Listener
// over a Mux runs on the socket engine (internal/engine, whose doc draws
// its goroutines and locks): the Mux is its socket, with batch I/O, the
// push path and direct writes as named capabilities (internal/transport).
package transport
