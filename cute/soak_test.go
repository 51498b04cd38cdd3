package cute

import (
	"context"
	"flag"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/testing/soak"
)

var soakFor = flag.Duration("soak", 0, "wall-clock duration of TestSoakNetsim (0: the short CI version)")

// TestSoakNetsim runs the shared adapter-level soak (internal/testing/soak,
// which netcode's TestSoakNetsim runs too) on the Cute Listener and
// dialed Conns, speaking Cute Framework's client/server layer ("messages")
// and the bare protocol layer ("bare"), over an in-memory network with
// 10% loss, jitter, duplication and reordering: 64 clients (16 under
// -race) with fresh tokens echo, disconnect and reconnect, the server
// kicks some, and the Listener restarts while clients are connected. The
// same oracle judges every session's end on both sides, with Cute's
// sentinels; every slot must be free at the end; TestMain's goleak check
// proves every goroutine exited. CI runs it under -race -tags lockrank.
func TestSoakNetsim(t *testing.T) {
	run := 4 * time.Second
	if *soakFor > 0 {
		run = *soakFor
	}
	for _, bareLayer := range []bool{false, true} {
		name := map[bool]string{false: "messages", true: "bare"}[bareLayer]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			soak.Run(t, soakDialect(bareLayer), false, run)
		})
	}
}

// soakDialect is Cute for the soak, speaking the bare protocol layer or
// the client/server layer.
func soakDialect(bareLayer bool) soak.Dialect {
	pk, sk := GenerateKeyPair()
	return soak.Dialect{
		Listen: func(pc net.PacketConn) (soak.Listener, error) {
			l, err := NewListener(pc, &ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: sk, MaxClients: 64, BareProtocol: bareLayer})
			if err != nil {
				return nil, err
			}
			return soak.Adapt(l, func(s Stats) int { return s.Connected }, func(s Stats) uint64 { return s.ConnectionsOpened }), nil
		},
		Token: func(server netip.AddrPort, clientID uint64) ([]byte, error) {
			return GenerateToken(&TokenParams{ApplicationID: testApp, ClientID: clientID, SecretKey: sk,
				ServerAddrs: []netip.AddrPort{server}, ExpireSeconds: 30, HandshakeTimeoutSeconds: 5})
		},
		Dial: func(ctx context.Context, tok []byte, listenPacket func(context.Context, string, string) (net.PacketConn, error)) (soak.Conn, error) {
			d := Dialer{ListenPacket: listenPacket, BareProtocol: bareLayer}
			c, err := d.DialContext(ctx, tok)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		MaxMessage: MaxPayloadBytes,
		Errors: soak.Errors{
			RequestTimedOut:  ErrConnectionRequestTimedOut,
			ResponseTimedOut: ErrChallengeResponseTimedOut,
			Denied:           ErrConnectionDenied,
			TokenExpired:     ErrConnectTokenExpired,
			InvalidToken:     ErrInvalidConnectToken,
			TimedOut:         ErrConnectionTimedOut,
		},
	}
}
