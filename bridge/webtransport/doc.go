// Package webtransport serves the bridge's two modes to browsers over
// WebTransport (HTTP/3 over QUIC), beside their WebSocket paths: real
// datagrams, so that a lost packet holds back nothing behind it.
//
// A [Server] serves, on a UDP socket, the sessions of a bridge.Handler (the
// relay) and of a transport.Mux (the end-to-end transport). They are the
// same Handler's and Mux's sessions as their WebSocket ones: admitted by
// the same gate (MaxSessions counts both kinds; refusals say 1013 and
// the header Netcode-Bridge-Refused: full; Close ends both), with the same timeouts, close
// codes (package bridge's table) and counts (Sessions, Dropped):
//
//	relay := bridge.NewHandler(&bridge.Config{AllowedServers: servers})
//	wts, err := webtransport.NewServer(&webtransport.Config{Relay: relay, Mux: mux})
//	go wts.Serve(udpSocket)                         // HTTP/3 on UDP
//	http.Handle("/relay", relay)                    // WebSocket, on the HTTPS server
//	http.Handle("/webtransport", wts.InfoHandler()) // where the page learns URLs and hashes
//
// # Wire format
//
// Relay, at Config.RelayPath ("/relay"): the page opens a session, then one
// bidirectional stream on which it writes its 2048-byte connect token; the
// bridge dials as the WebSocket relay does, writes on that stream
// {"type":"connected","clientIndex":3,"maxClients":64} and ends it. From
// then on each datagram is one netcode payload, both ways.
//
// Transport, at Config.TransportPath ("/transport"): each datagram is one
// netcode packet, exactly as in a UDP datagram, both ways; nothing else.
//
// Wire, under Config.WirePath ("/wire/", at "/wire/<port>"): each datagram
// is one of the game's UDP datagrams, both ways, forwarded unchanged to and
// from the target the port names (package bridge/wire, whose Handler
// admits the session by its own rules and serves the WebSocket fallback
// at the same URL).
//
// A session ends with a WebTransport close (CLOSE_WEBTRANSPORT_SESSION)
// whose code and reason are those a WebSocket session of the same mode
// would close with (package bridge's # Close codes, 1013 for the cap
// included). A page reads them from WebTransport.closed.
//
// # Datagram size
//
// A datagram must fit in one QUIC packet, so the largest payload depends
// on the path: quic-go starts at 1,280-byte packets (1,200 where the path
// refuses those) and path MTU discovery raises it, up to 1,452 bytes. The
// largest datagram a session carries is the packet less the 37 bytes
// quic-go reserves for its header, tag and frame and the 2 of the HTTP/3
// session prefix:
//
//	UDP payload (packet)    largest datagram   relay payload   transport payload (netcode packet)
//	1,200 (floor)           1,161              1,161           1,161 (payloads of 1,136)
//	1,280 (start)           1,241              1,200 (all)     1,241 (all: 1,225 at most)
//	1,452 (loopback, max)   1,413              1,200 (all)     1,300 (all)
//
// Above the limit nothing is dropped silently: the Go clients' writes,
// and the Mux's WriteTo to a WebTransport peer, fail with an error wrapping
// bridge.ErrDatagramTooLarge; a relay session whose server sends a larger
// payload ends with 1009 and a reason naming both sizes; a page reads the
// limit from its session (datagrams.maxDatagramSize).
//
// # Certificates
//
// In production, Config.TLSConfig carries a certificate browsers trust.
// In development (TLSConfig nil), the Server makes self-signed ECDSA P-256
// certificates valid for at most 14 days, which a page pins by their
// SHA-256 hashes (the WebTransport constructor's serverCertificateHashes):
// InfoHandler serves them with the URLs, and the Server rotates them, the
// next one's hash served a third of their validity before it is used.
//
// # Goroutines
//
// The Server runs an accept loop (Serve's own goroutine) and one goroutine
// per QUIC connection; quic-go and webtransport-go run theirs (per
// connection: its run loop and send queue, HTTP/3's stream handling; per
// session: its CONNECT stream's reader and writer). A relay session runs
// the relay's goroutines (package bridge), a transport session the Mux's
// (package bridge/transport). Every goroutine, by the function it runs
// (TestGoroutineInventory fails if another runs):
//
//	webtransport.(*Server).serveConn   per QUIC connection: serves its HTTP/3 requests and WebTransport streams until it ends
//	webtransport.(*client).reader      per Go client (Conn, RelayConn): queues the server's datagrams
//	webtransport.(*Server).serveSession per CONNECT request, in HTTP/3's goroutine: admits the session (a refusal's close: at most a second)
//
// Bounds: a QUIC connection carries one session and ends with it; one
// that opens none is closed after Config.SessionWait (10 s; a second for
// one opened while half of Config.MaxConnections wait). Config.MaxConnections
// (twice the sessions the Relay and the Mux admit) caps the connections:
// a new one past it closes the oldest connection still waiting for its
// session of the source (IP address) with the most waiting, and is closed
// at once only when every connection carries a session; under pressure a
// source has Config.MaxWaitingPerSource (8) waiting at most, its oldest
// closed for its newest. So idle connections, however often their sources renew
// them, never keep out a client that opens its session at once: a
// connection is never closed for room while another source has more
// waiting than its own (TestIdleConnectionsCannotHoldTheCap). Every mode
// served on the Server is admitted so, before its first request: a mode's
// handler takes its connection's one session with claimSession. A connection may open 4 bidirectional and 4
// unidirectional streams with 8 KiB windows (32 KiB for the connection),
// enough for a session and its token and no more; a session's close waits for the
// client to close the connection for a second (the relay's, a refusal's)
// or two (a Mux's, after what is queued), then closes it.
package webtransport
