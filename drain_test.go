package netcode_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/token"
)

// TestDrain: after Drain a new dial is denied, a connected client keeps
// exchanging payloads, and a token that lists another server after the
// draining one connects to that one.
func TestDrain(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withClientID(1))

			l.Drain()
			l.Drain() // idempotent

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := netcode.DialContext(ctx, mint(t, l.Addr(), withClientID(2)))
			require.ErrorIs(t, err, netcode.ErrConnectionDenied)
			assert.Positive(t, l.Stats().DeniedSent)
			assert.Equal(t, 1, l.Stats().Connected)

			// The existing session works both ways.
			for _, msg := range []string{"still", "here"} {
				_, err = cli.Write([]byte(msg))
				require.NoError(t, err)
				got, err := readWithin(t, srv, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, msg, string(got))
				_, err = srv.Write(got)
				require.NoError(t, err)
				got, err = readWithin(t, cli, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, msg, string(got))
			}

			// A fleet token: the draining server first, a live one second.
			other := listen(t, f.network, f.addr, nil)
			tok := mint(t, nil, withClientID(3), func(p *token.Params) {
				p.ServerAddrs = []netip.AddrPort{
					netip.MustParseAddrPort(l.Addr().String()),
					netip.MustParseAddrPort(other.Addr().String()),
				}
			})
			c3, err := netcode.DialContext(ctx, tok)
			require.NoError(t, err)
			defer c3.Close()
			assert.Equal(t, other.Addr().String(), c3.RemoteAddr().String())
			s3, err := other.AcceptConn(ctx)
			require.NoError(t, err)
			defer s3.Close()
			assert.Equal(t, uint64(3), s3.ClientID())
			assert.Equal(t, 1, l.Stats().Connected)
		})
	}
}
