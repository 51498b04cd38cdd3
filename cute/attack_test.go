package cute

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttackOneTokenManyPorts: one valid token (the attacker's own) resent
// from more source ports than the handshake table holds, over real UDP,
// holds one handshake, not the table (before the fix it filled the 64
// entries for the token's lifetime and every new player's dial timed
// out); a player who dials during the attack connects and echoes.
func TestAttackOneTokenManyPorts(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, nil)
			flood := s.token(t, 666, func(p *TokenParams) { p.ExpireSeconds = 60 })[wire.RESTBytes:]
			var socks []net.PacketConn
			for range DefaultMaxPending + 36 {
				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(t, err)
				defer pc.Close()
				socks = append(socks, pc)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					for _, pc := range socks {
						_, _ = pc.WriteTo(flood, s.Addr())
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			})
			defer wg.Wait()
			defer close(stop)
			require.Eventually(t, func() bool { return s.Stats().TokenInUse >= uint64(len(socks)) }, 10*time.Second, 5*time.Millisecond,
				"the flood reached the server: %+v", s.Stats())

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cli, err := DialContext(ctx, s.token(t, 1, func(p *TokenParams) { p.HandshakeTimeoutSeconds = 2 }))
			require.NoError(t, err, "a player dials during the attack: %+v", s.Stats())
			defer cli.Close()
			srv, err := s.AcceptConn(ctx)
			require.NoError(t, err)
			defer srv.Close()
			buf := make([]byte, 8)
			echo(t, cli, srv, []byte("alive"), buf)
			echo(t, srv, cli, []byte("alive"), buf)
			st := s.Stats()
			assert.LessOrEqual(t, st.Pending, 1, "the flood holds one handshake")
			assert.Zero(t, st.PendingFull)
		})
	}
}
