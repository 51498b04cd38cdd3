// Package bridge lets browsers reach netcode servers over WebSocket.
//
// A [Handler] is an http.Handler that relays: the browser opens a WebSocket
// with the subprotocol [Subprotocol] and sends its 2048-byte connect token as
// the first (binary) message. The bridge checks every server address in the
// token against its allow-list, dials the token's servers as an ordinary
// netcode client, and tells the browser it is connected with a text message
//
//	{"type":"connected","clientIndex":3,"maxClients":64}
//
// From then on every binary WebSocket message is one netcode payload (1 to
// netcode.MaxPayloadBytes bytes), in both directions. When either side ends,
// the other is ended too: a browser that goes away makes the bridge
// disconnect from the server cleanly (the server frees the slot at once),
// and a server that disconnects, times out or denies the connection makes
// the bridge close the WebSocket with one of the close codes below and a
// reason naming the netcode error.
//
// The bridge works in front of any netcode 1.02 server. It is not an open
// relay: it dials only the servers its Config allows (none by default),
// caps the number of sessions, checks the size of every message and ends
// idle sessions.
//
// The browser side is the ES module in js/netcode.js, served by
// [JSHandler].
//
// Package [github.com/gonetcode/netcode/bridge/webtransport] serves the
// same Handler (and a transport Mux) over WebTransport: its sessions are
// this Handler's too, under the same cap, timeouts and Close, and end with
// the same codes, as WebTransport session close codes.
//
// # Close codes
//
// The code and reason of the close frame say why a session ended. Codes
// 4000 to 4012 are the bridge's own; the others are WebSocket's. A client
// in any language tells why its session ended by these numbers. R: the relay (Handler); T: the transport (package
// bridge/transport's Mux).
//
//	code  name                           mode why
//	1000  normal closure                 R T  the browser (client) closed the session
//	1001  going away                     R T  the bridge is shutting down (Close), the server's side of the relay ended, writing to the browser failed or stalled (WriteTimeout)
//	1003  unsupported data               R T  a text message
//	1008  policy violation               R    an empty message
//	1009  message too big                R T  a message over 1200 bytes (R), 1300 (T)
//	1011  internal error                 R    an unexpected error of the server's side
//	1013  try again later                R T  MaxSessions reached (ErrBridgeFull, the header Netcode-Bridge-Refused: full; T: see transport.Subprotocol)
//	4000  disconnected                   R    the server disconnected the client
//	4001  connection denied              R    every server in the token was full or refused it
//	4002  connect token expired          R    the token expired before a server accepted it
//	4003  invalid connect token          R    the first message was not a readable 2048-byte token
//	4004  connection request timed out   R    no server answered the connection request
//	4005  connection response timed out  R    the server stopped answering during the handshake
//	4006  connection timed out           R    nothing arrived from the server within the token's timeout
//	4010  server not allowed             R    the token names a server the bridge may not dial
//	4011  handshake timeout              R    no token within HandshakeTimeout, or the dial took longer than DialTimeout
//	4012  idle timeout                   R T  nothing went either way within IdleTimeout
//
// In transport mode the netcode errors travel inside the encrypted
// session, so the Mux's codes are only about the WebSocket itself.
//
// # Transport mode
//
// The relay sees payloads in the clear. Package
// [github.com/gonetcode/netcode/bridge/transport] carries the netcode
// packets themselves in WebSocket binary messages, so that the session is
// encrypted end to end between a Go client (built for js/wasm in the
// browser) and the server: its Mux merges a UDP socket with WebSocket
// peers for a netcode Listener. Both bridges admit sessions the same way
// (MaxSessions, the refusal with 1013 and Netcode-Bridge-Refused, HTTP 503 after
// Close, the bounded close) and use this package's close codes. See
// examples/wasm.
//
// # What a session costs: goroutines, locks and queues
//
// Once upgraded, a session runs in goroutines of the bridge's own, not in
// net/http's, besides its dialed netcode client's (a netcode.Conn: one
// reader), whose UDP socket asks for Config.SocketBuffer. The netcode
// clients' timers (their keep-alives and timeouts) run on one timer wheel
// per Handler, which ticks every 10 ms while any is armed and runs those
// due in one goroutine, instead of a runtime timer per session whose every
// firing starts a goroutine; a keep-alive runs up to a tick late, as a C
// client ticking at 100 Hz sends it, so that a payload relayed within the
// tick puts it off. A session's own timeouts (its watchdog) run on the
// same wheel. Every
// goroutine, by the function it runs (TestGoroutineInventory fails if
// another runs):
//
//	bridge.(*session).serve       per session: reads the token, dials, then reads the server and writes to the browser
//	bridge.(*session).readLoop    per session once the token is read: reads the browser, writes to the server
//	bridge.(*session).end         per session the watchdog ended, for its close (at most a second)
//	bridge.(*Handler).Close       per session at Close, for its close
//	netcode.(*dialConn).readLoop  the session's netcode client's reader (package netcode)
//	timerwheel.(*Wheel).advance   the Handler's timer wheel, a tick at a time while it runs the due timers of the netcode clients and the sessions' watchdogs
//
// Locks, in order: the admission's lock (the session count and Close's
// mark, held to admit a session) → the Handler's lock (its sessions) → a
// session's lock (its WebSocket, its netcode client, why it ended); the
// watchdog's lock and the WebSocket connection's write lock (which gathers
// a session's writes into one) are leaves. The connection's write lock
// (wsbridge.BatchConn.mu) is held across its TCP write, which it
// serializes; no other lock is held across a read, a write or a dial. A
// session's netcode client runs on the socket engine (internal/engine,
// whose doc draws its goroutines, timer callbacks and locks). Queues: none of the relay's own; a netcode client's
// payloads wait in its receive queue (package netcode), the browser's in
// its TCP connection.
//
// Whatever a client sends or withholds, its session ends within a bound
// and frees its slot: closing a WebSocket (a relay session's or a
// refusal's, 1 s; a transport session's, 2 s, what is queued for it
// included) has a deadline on the TCP connection, which is cut when it
// passes, even if the client declared a frame longer than it sent. So
// Handler.Close and Mux.Close return within about those bounds. Refusals
// for MaxSessions are named: [ErrBridgeFull], close code 1013, and the
// response header Netcode-Bridge-Refused: full.
package bridge
