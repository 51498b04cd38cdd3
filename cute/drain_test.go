package cute

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrain (real UDP, IPv4 and IPv6, both layers): after Drain a new dial
// is denied with CONNECTION_DENIED, a connected client keeps exchanging
// messages both ways, the Stats say so, and a token that lists another
// server after the draining one connects to that one.
func TestDrain(t *testing.T) {
	for _, f := range families {
		for _, layer := range []struct {
			name string
			edit func(*ServerConfig)
		}{{"messages", nil}, {"bare", bare}} {
			t.Run(f.name+"/"+layer.name, func(t *testing.T) {
				s := listen(t, f.network, f.addr, layer.edit)
				cli, srv := pair(t, s, 1)
				assert.False(t, s.Stats().Draining)

				s.Drain()
				s.Drain() // idempotent
				assert.True(t, s.Stats().Draining)

				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				d := Dialer{BareProtocol: s.cfg.BareProtocol}
				_, err := d.DialContext(ctx, s.token(t, 2, nil))
				require.ErrorIs(t, err, ErrConnectionDenied)
				st := s.Stats()
				assert.Positive(t, st.Denied)
				assert.Equal(t, 1, st.Connected)
				assert.Equal(t, uint64(1), st.ConnectionsOpened)

				// The existing session works both ways.
				buf := make([]byte, MaxPayloadBytes)
				for _, msg := range []string{"still", "here"} {
					echo(t, cli, srv, []byte(msg), buf)
					echo(t, srv, cli, []byte(msg), buf)
				}

				// A fleet token: the draining server first, a live one
				// (the same key pair) second.
				other, err := Listen(f.network, f.addr, &s.cfg)
				require.NoError(t, err)
				defer other.Close()
				tok := s.token(t, 3, func(p *TokenParams) {
					p.ServerAddrs = []netip.AddrPort{
						s.Addr().(*net.UDPAddr).AddrPort(),
						other.Addr().(*net.UDPAddr).AddrPort(),
					}
				})
				c3, err := d.DialContext(ctx, tok)
				require.NoError(t, err)
				defer c3.Close()
				assert.Equal(t, other.Addr().String(), c3.RemoteAddr().String())
				s3, err := other.AcceptConn(ctx)
				require.NoError(t, err)
				defer s3.Close()
				assert.Equal(t, uint64(3), s3.ClientID())
				assert.Equal(t, 1, s.Stats().Connected)
				assert.False(t, other.Stats().Draining)
			})
		}
	}
}
