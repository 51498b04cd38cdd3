package netcode_test

import (
	"context"
	"flag"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/soak"
	"github.com/gonetcode/netcode/token"
)

var soakFor = flag.Duration("soak", 0, "wall-clock duration of the long soak test (0: the short CI version)")

// soakErrors are netcode's sentinels for the soak's oracle (soak.Ends).
var soakErrors = soak.Errors{
	RequestTimedOut:  netcode.ErrConnectionRequestTimedOut,
	ResponseTimedOut: netcode.ErrConnectionResponseTimedOut,
	Denied:           netcode.ErrConnectionDenied,
	TokenExpired:     netcode.ErrConnectTokenExpired,
	InvalidToken:     netcode.ErrInvalidConnectToken,
	TimedOut:         netcode.ErrConnectionTimedOut,
}

func TestSoakNetsimOracle(t *testing.T) {
	tests := []struct {
		side string
		err  error
		e    soak.End
		ok   bool
	}{
		{"client", &net.OpError{Op: "read", Err: io.EOF}, soak.End{Kicked: true}, true},
		{"client", io.EOF, soak.End{Asked: true, Closed: true}, false},
		{"dial", netcode.ErrConnectionResponseTimedOut, soak.End{Restarted: true}, true},
		{"dial", netcode.ErrConnectionResponseTimedOut, soak.End{Kicked: true}, false},
		{"client", netcode.ErrConnectionTimedOut, soak.End{Restarted: true, Kicked: true}, false},
		{"server", io.ErrUnexpectedEOF, soak.End{Asked: true, Closed: true}, false},
		{"server", io.EOF, soak.End{Closed: true}, false},
		{"server", net.ErrClosed, soak.End{Closed: true}, true},
		{"dial", netcode.ErrConnectionRequestTimedOut, soak.End{Restarted: true}, false},
		{"dial", netcode.ErrConnectionRequestTimedOut, soak.End{WS: true, Restarted: true, WSLost: true}, true},
		{"dial", netcode.ErrConnectionRequestTimedOut, soak.End{WS: true, Restarted: true}, false},
		{"dial", netcode.ErrConnectionRequestTimedOut, soak.End{WS: true, WSLost: true}, false},
	}
	ends := soak.Ends(soakErrors)
	for _, tt := range tests {
		bad, _ := soak.Judge(ends, tt.side, tt.err, tt.e)
		require.Equal(t, tt.ok, bad == "", "%s %v %+v: %s", tt.side, tt.err, tt.e, bad)
	}
}

// TestSoakNetsim runs the shared adapter-level soak (internal/testing/soak)
// on netcode's real Listener and Dialer, with all their goroutines, over
// an in-memory network with 10% loss, jitter, duplication and reordering;
// and over the WebSocket transport (a transport.Mux on the in-memory
// network, WebSockets on loopback, 10% of the datagrams lost at the
// clients). 64 clients (soak.Clients) connect with fresh tokens, exchange
// payloads, disconnect and reconnect at random, and the server kicks some;
// the listener restarts while clients are connected. Every session's end,
// on both sides, is judged by the soak's oracle; every slot must be free at
// the end, and TestMain's goleak check proves every goroutine exited.
// package cute's TestSoakNetsim runs the same on the Cute dialect.
func TestSoakNetsim(t *testing.T) {
	run := 4 * time.Second
	if *soakFor > 0 {
		run = *soakFor
	}
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "udp", true: "websocket"}[ws]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			soak.Run(t, soakDialect, ws, run)
		})
	}
}

// soakDialect is netcode for the soak.
var soakDialect = soak.Dialect{
	Listen: func(pc net.PacketConn) (soak.Listener, error) {
		l, err := netcode.NewListener(pc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 64})
		if err != nil {
			return nil, err
		}
		return soak.Adapt(l, func(s netcode.ServerStats) int { return s.Connected }, func(s netcode.ServerStats) uint64 { return s.ConnectionsOpened }), nil
	},
	Token: soakToken,
	Dial: func(ctx context.Context, tok []byte, listenPacket func(context.Context, string, string) (net.PacketConn, error)) (soak.Conn, error) {
		d := netcode.Dialer{ListenPacket: listenPacket}
		c, err := d.DialContext(ctx, tok)
		if err != nil {
			return nil, err
		}
		return c, nil
	},
	MaxMessage: netcode.MaxPayloadBytes,
	Errors:     soakErrors,
}

// soakToken mints a connect token as mint does, for the given client id and
// a 5 s timeout, but returns its error: it is called from the clients'
// goroutines, where require may not be used.
func soakToken(server netip.AddrPort, clientID uint64) ([]byte, error) {
	p := token.Params{
		ProtocolID:     testProtocolID,
		ClientID:       clientID,
		PrivateKey:     testKey,
		ServerAddrs:    []netip.AddrPort{server},
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	}
	copy(p.UserData[:], "hello user data")
	return token.Generate(&p)
}
