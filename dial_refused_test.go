package netcode_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// dropKeepAlives is a client socket that never hears the server's
// keep-alives: its handshake stops after the challenge.
type dropKeepAlives struct{ net.PacketConn }

func (c dropKeepAlives) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := c.PacketConn.ReadFrom(b)
		if err != nil {
			return n, from, err
		}
		if t, ok := protocol.PeekType(b[:n]); !ok || t != protocol.KeepAlive {
			return n, from, nil
		}
	}
}

// TestDialRefusedSaysWhatHappened dials, on simulated time, each way a
// server can refuse or fail to answer a client, with no deadline (the
// token's timeout ends the handshake) and with a context that ends first.
// A refused request is never answered, so the error names the protocol's
// state and lists the likely causes; when the context ends first, both its
// error and the protocol's are visible to errors.Is.
func TestDialRefusedSaysWhatHappened(t *testing.T) {
	const timeout = 2 // the token's timeout, in seconds
	srvAP := netip.MustParseAddrPort("10.9.0.1:40000")
	type setup struct {
		p      *token.Params    // the token, changed by the case
		listen bool             // whether a server runs
		before func(tok []byte) // runs with the token before the dial
		wrap   func(net.PacketConn) net.PacketConn
	}
	noAnswer := []string{"never answered", "already used", "private key or protocol id", "down or unreachable"}
	tests := []struct {
		name  string
		setup func(s *setup)
		want  error
		says  []string
	}{
		{"server down", func(s *setup) { s.listen = false }, netcode.ErrConnectionRequestTimedOut, noAnswer},
		{"wrong private key", func(s *setup) { s.p.PrivateKey = crypto.Key{9, 9, 9} }, netcode.ErrConnectionRequestTimedOut, noAnswer},
		{"wrong protocol id", func(s *setup) { s.p.ProtocolID++ }, netcode.ErrConnectionRequestTimedOut, noAnswer},
		{"token already used", func(s *setup) { s.before = func([]byte) {} }, netcode.ErrConnectionRequestTimedOut, noAnswer},
		{"no keep-alive after the challenge", func(s *setup) { s.wrap = func(pc net.PacketConn) net.PacketConn { return dropKeepAlives{pc} } },
			netcode.ErrConnectionResponseTimedOut, []string{"answered the request but never accepted"}},
	}
	for _, tt := range tests {
		for _, withDeadline := range []bool{false, true} {
			name := tt.name
			if withDeadline {
				name += ", the context ends first"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
					defer nw.Close()
					p := token.Params{
						ProtocolID: testProtocolID, ClientID: 7, PrivateKey: testKey,
						ServerAddrs: []netip.AddrPort{srvAP}, ExpireSeconds: 30, TimeoutSeconds: timeout,
					}
					s := setup{p: &p, listen: true, wrap: func(pc net.PacketConn) net.PacketConn { return pc }}
					tt.setup(&s)
					if s.listen {
						spc, err := nw.Listen(srvAP)
						require.NoError(t, err)
						l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey})
						require.NoError(t, err)
						defer l.Close()
					}
					tok, err := token.Generate(&p)
					require.NoError(t, err)
					port := uint16(5000)
					dialer := func() *netcode.Dialer {
						port++
						return &netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
							pc, err := nw.Listen(netip.AddrPortFrom(netip.MustParseAddr("10.9.1.1"), port))
							return s.wrap(pc), err
						}}
					}
					if s.before != nil {
						// The likeliest mistake: the same token twice.
						c, err := (&netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
							return nw.Listen(netip.MustParseAddrPort("10.9.1.1:4999"))
						}}).DialContext(t.Context(), tok)
						require.NoError(t, err, "the first use of the token")
						require.NoError(t, c.Close())
					}

					ctx := t.Context()
					if withDeadline {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, timeout*time.Second/2)
						defer cancel()
					}
					c, err := dialer().DialContext(ctx, tok)
					require.Nil(t, c)
					require.Error(t, err)
					assert.ErrorIs(t, err, tt.want)
					var oe *net.OpError
					assert.True(t, errors.As(err, &oe), "a *net.OpError, as package net returns")
					for _, s := range tt.says {
						assert.Contains(t, err.Error(), s)
					}
					assert.Contains(t, err.Error(), srvAP.String(), "the error names the server")
					if withDeadline {
						assert.ErrorIs(t, err, context.DeadlineExceeded)
						assert.Contains(t, err.Error(), "context deadline exceeded after 1s")
					} else {
						assert.NotErrorIs(t, err, context.DeadlineExceeded)
					}
					t.Log(err)
				})
			})
		}
	}
}
