package netcode_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokenFloodLocksNoOneOut is the lock-out of issue 36 on real UDP: a
// holder of three times more valid tokens than the token history holds
// sends one connection request per token and never answers a challenge,
// then keeps sending its last requests again, from more sockets than
// there are encryption mappings. A fresh client still connects while the
// flood runs: a token is recorded only once its challenge is answered, so
// the requests fill no history, and each request that finds the mappings
// full drops the oldest handshake in progress, so the flood holds none.
// (Before, the history filled and refused the fresh token, and the
// resent requests held every mapping.)
func TestTokenFloodLocksNoOneOut(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) {
				c.MaxClients = 4 // 16 encryption mappings
				c.TokenRate = 10
				c.TokenExpiry = 30 * time.Second
			})
			start := l.Stats()
			require.Equal(t, 300, start.HistoryLimit)
			const sockets = 32 // twice the mappings
			tokens := 3 * start.HistoryLimit
			reqs := make([][]byte, tokens)
			for i := range reqs {
				pt, err := token.Parse(mint(t, l.Addr(), withClientID(uint64(100_000+i))))
				require.NoError(t, err)
				reqs[i] = protocol.AppendConnectionRequest(nil, pt.ProtocolID, pt.ExpireTimestamp, &pt.Nonce, pt.PrivateData[:])
			}
			pcs := make([]net.PacketConn, sockets)
			for i := range pcs {
				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(t, err)
				defer pc.Close()
				pcs[i] = pc
			}

			// Every token once, 64 requests at a time, each batch once the
			// server has handled the last (none lost in a socket buffer).
			for sent := 0; sent < tokens; {
				for range min(64, tokens-sent) {
					_, err := pcs[sent%sockets].WriteTo(reqs[sent], l.Addr())
					require.NoError(t, err)
					sent++
				}
				require.Eventually(t, func() bool { return handled(l.Stats(), start) >= uint64(sent) }, 10*time.Second, time.Millisecond)
			}
			st := l.Stats()
			assert.Zero(t, st.History, "no token recorded before its challenge is answered")
			assert.Zero(t, st.HistoryFull-start.HistoryFull)

			// Then each socket sends its last token again every 100 ms, as
			// a client in its handshake does, while a fresh client dials.
			done := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(done)
			wg.Go(func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					for i, pc := range pcs {
						_, _ = pc.WriteTo(reqs[tokens-sockets+i], l.Addr())
					}
					select {
					case <-done:
						return
					case <-tick.C:
					}
				}
			})
			require.Eventually(t, func() bool { return l.Stats().MappingsFull > st.MappingsFull }, 10*time.Second, time.Millisecond, "the resent requests fill the mappings")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cli, err := (&netcode.Dialer{}).DialContext(ctx, mint(t, l.Addr(), withClientID(7)))
			require.NoError(t, err, "a fresh client connects during the flood")
			defer cli.Close()
			srv, err := l.AcceptConn(ctx)
			require.NoError(t, err)
			defer srv.Close()
			send(t, cli, srv, []byte("through the flood"))
			assert.Equal(t, 1, l.Stats().History, "its token is recorded when it connects")
		})
	}
}
