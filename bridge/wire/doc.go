// Package wire is the bridge's third mode: a datagram wire between a
// browser and one UDP game server, the relay Cute Framework's web builds
// dial (cf_client_web_wire) and the simplest browser path to any UDP
// server that encrypts its own packets, netcode's included.
//
// A page opens a session at <prefix>/<port> (by convention
// https://game.example/wire/5601): WebTransport first, whose datagrams
// carry the game's datagrams (served by package bridge/webtransport's
// Server, Config.Wire), and, where that fails, a WebSocket at the same URL
// (https becomes wss), one binary message per datagram (served by the
// Handler itself). For each session the Handler opens one UDP socket,
// connected to the target the URL's port names, and forwards datagrams
// both ways, unchanged, until either side closes or the session idles. It
// never parses, rewrites or originates a datagram: the game's protocol
// (netcode's, Cute's) encrypts and authenticates them end to end, so the
// wire can only drop them. The connect token of a wired client still
// needs a server address the client never dials: 127.0.0.1:<port> does.
//
//	w := wire.NewHandler(&wire.Config{Allow: []wire.Range{{Addr: gameIP, First: 5600, Last: 5699}}})
//	wts, err := webtransport.NewServer(&webtransport.Config{Wire: w, TLSConfig: tlsConfig})
//	go wts.Serve(udpSocket)      // WebTransport, on UDP :443
//	http.Handle(wire.DefaultPath, w) // WebSocket, on the HTTPS server (TCP :443)
//
// # Not an open proxy
//
// A session reaches only a port of Config.Allow (empty: none), on the
// address its range names, and takes datagrams only from that address
// (its socket is connected). Sessions are capped in total and per source
// address; each idles out; datagrams are bounded in size (over WebSocket,
// Config.MaxDatagram, the UDP maximum by default; over WebTransport, what
// the QUIC path carries) and, from the browser, in rate
// (Config.MaxDatagramsPerSecond). The wire never sends more bytes of
// datagrams than it received, toward either side.
//
// # Close codes
//
// A session, or a refusal, ends with a close code and a reason (a
// WebSocket close frame; over WebTransport, the session's close and, for
// a page, the {"type":"closed"} message of package bridge/webtransport):
//
//	code  name                 why
//	1000  normal closure       the browser closed the session
//	1001  going away           Close, or writing to the browser failed or stalled (WriteTimeout)
//	1003  unsupported data     a text message
//	1009  message too big      a datagram from the browser over the wire's limit
//	1011  internal error       the session's UDP socket failed
//	1013  try again later      MaxSessions reached (the header Netcode-Bridge-Refused: full)
//	4010  target not allowed   the URL's port is in no allowed range (Netcode-Bridge-Refused: not-allowed)
//	4012  idle timeout         no datagram either way within IdleTimeout
//	4020  source full          MaxSessionsPerSource reached (Netcode-Bridge-Refused: source)
//
// Refusals the session's terms cannot tell are plain HTTP: 403 for a page
// of an origin not allowed, 404 for a URL that does not end with a port,
// 503 after Close (and for a refusal while many are in progress).
//
// # Goroutines
//
//	wire.(*session).serve   per session: the browser's datagrams to the target, then the session's end
//	wire.(*session).down    per session: the target's datagrams to the browser
//	timerwheel.(*Wheel).advance  per Handler: the sessions' watchdogs
package wire
