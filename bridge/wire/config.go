package wire

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Config configures a Handler. The zero value refuses every session: name
// the targets it may reach in Allow.
type Config struct {
	// Allow lists the UDP targets sessions may reach: an address and a
	// range of ports each. A session's URL names a port (/wire/<port>);
	// its target is the address of the first range holding that port. A
	// port in no range is refused with close code 4010 before anything is
	// sent anywhere. Empty refuses every session.
	Allow []Range
	// OriginPatterns lists the origins, besides the request's own host,
	// whose pages may open sessions, as in package bridge's Config
	// (path.Match host patterns). Cross-origin requests are refused with
	// HTTP 403 by default.
	OriginPatterns []string
	// MaxSessions caps the sessions open at once, WebSocket and
	// WebTransport together; 0 means 1024. Past it a session is refused
	// with 1013 (try again later).
	MaxSessions int
	// MaxSessionsPerSource caps the sessions open at once from one source:
	// one IPv4 address, or one IPv6 /64 (what one host is usually given);
	// 0 means 16. Past it a session is refused with 4020. Behind a
	// reverse proxy every session comes from the proxy: raise it there.
	MaxSessionsPerSource int
	// IdleTimeout ends a session through which no datagram went either
	// way for this long, with 4012; 0 means 30 s, negative disables it.
	IdleTimeout time.Duration
	// WriteTimeout ends a WebSocket session whose browser does not take a
	// message within this long (a stalled TCP connection); 0 means 10 s,
	// negative disables it. (A WebTransport datagram never waits.)
	WriteTimeout time.Duration
	// MaxDatagram bounds a datagram over WebSocket, either way; 0 means
	// the UDP maximum (65,507 bytes to an IPv4 target, 65,527 to an IPv6
	// one). A session holds two buffers of this size: a game whose
	// datagrams are small (Cute's and netcode's are at most 1,300 bytes)
	// saves memory by saying so. Over WebTransport a datagram is bounded by
	// the QUIC path (see package bridge/webtransport), and by this. A
	// larger message from the browser ends the session with 1009; a larger
	// datagram from the target is dropped, as a UDP path drops it.
	MaxDatagram int
	// MaxDatagramsPerSecond caps what one session sends to its target:
	// past it, the browser's datagrams are dropped (a burst of a second's
	// worth passes). 0 means 1000; negative disables it. The target's
	// datagrams are not capped: they come from the game server, the only
	// address a session's socket takes datagrams from.
	MaxDatagramsPerSecond int
	// SocketBuffer is the receive and send buffer size in bytes of each
	// session's UDP socket; 0 means 256 KiB.
	SocketBuffer int
	// Logger receives a debug record for every session's start and end,
	// and for every refusal; nil is silent.
	Logger *slog.Logger
}

// Defaults of the wire's own zero fields of Config (those of MaxSessions,
// IdleTimeout, WriteTimeout and SocketBuffer are every bridge's:
// wsbridge.SetDefaults, wsbridge.DefaultSocketBuffer).
const (
	defaultMaxSessionsPerSource = 16
	defaultDatagramsPerSecond   = 1000
)

// The largest UDP payloads: of an IPv4 datagram (65,535 less the IPv4 and
// UDP headers) and of an IPv6 one without jumbograms (less the UDP
// header).
const (
	MaxUDP4 = 65535 - 20 - 8
	MaxUDP6 = 65535 - 8
)

// Range is one entry of Config.Allow: an address and the ports First to
// Last (inclusive) on it.
type Range struct {
	Addr        netip.Addr
	First, Last uint16
}

// ParseRange parses "host:port" or "host:first-last", where host is an IP
// address (an IPv6 one in brackets), as in "10.0.0.7:5600-5699" or
// "[::1]:5601".
func ParseRange(s string) (Range, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Range{}, fmt.Errorf("wire target %q: want host:port or host:first-last", s)
	}
	host, ports := strings.Trim(s[:i], "[]"), s[i+1:]
	a, err := netip.ParseAddr(host)
	if err != nil {
		return Range{}, fmt.Errorf("wire target %q: the host must be an IP address: %w", s, err)
	}
	lo, hi, isRange := strings.Cut(ports, "-")
	if !isRange {
		hi = lo
	}
	first, err1 := parsePort(lo)
	last, err2 := parsePort(hi)
	if err := errors.Join(err1, err2); err != nil {
		return Range{}, fmt.Errorf("wire target %q: %w", s, err)
	}
	if first > last {
		return Range{}, fmt.Errorf("wire target %q: the range ends before it starts", s)
	}
	return Range{Addr: a.Unmap().WithZone(""), First: first, Last: last}, nil
}

// parsePort parses a port from 1 to 65535, in decimal digits only.
func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q: want 1 to 65535", s)
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q: want 1 to 65535", s)
	}
	return uint16(p), nil
}

// String returns r as ParseRange reads it.
func (r Range) String() string {
	ports := strconv.Itoa(int(r.First))
	if r.Last != r.First {
		ports += "-" + strconv.Itoa(int(r.Last))
	}
	host := r.Addr.String()
	if r.Addr.Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + ports
}

// Contains reports whether port is in r.
func (r Range) Contains(port uint16) bool { return r.First <= port && port <= r.Last }
