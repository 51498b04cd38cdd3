package webtransport_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/webtransport"
)

// TestIdleConnectionsCannotHoldTheCap is the attack of issue 36 on the
// WebTransport cap: sources keep more idle QUIC connections open than
// MaxConnections (no session on any), each opened again as soon as the
// Server closes it. A real client still opens its session, at its first
// attempt, while they renew: over IPv4 from sources of their own
// (127.0.0.2 to .5: a connection is never closed for room while another
// source has more waiting), over IPv6 from the client's own address ::1,
// renewing after a pause (the client's connection, the newest of its
// source, outlives MaxWaitingPerSource-1 renewals). Before, the idle
// connections held the cap for SessionWait (10 s) and the client was
// refused at once.
func TestIdleConnectionsCannotHoldTheCap(t *testing.T) {
	tests := []struct {
		network   string
		sources   []string // the renewing sources' addresses
		workers   int      // connections each source keeps trying to hold
		perSource int      // Config.MaxWaitingPerSource
		pause     time.Duration
	}{
		{"udp4", []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, 3, 2, 0},
		{"udp6", []string{"::1"}, 12, 8, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.network, func(t *testing.T) {
			r := newRig(t, rigConfig{network: tt.network, wt: webtransport.Config{MaxConnections: 8, MaxWaitingPerSource: tt.perSource}})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			var opened atomic.Int64
			for _, src := range tt.sources {
				udp, err := net.ListenPacket(tt.network, net.JoinHostPort(src, "0"))
				require.NoError(t, err)
				tr := &quic.Transport{Conn: udp}
				defer udp.Close()
				defer tr.Close()
				for range tt.workers {
					wg.Go(func() {
						for ctx.Err() == nil {
							dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
							c, err := tr.Dial(dctx, r.srv.Addr(), r.rawTLS(), rawQUIC())
							dcancel()
							if err == nil {
								opened.Add(1)
								select { // idle until the Server closes it
								case <-c.Context().Done():
								case <-ctx.Done():
									_ = c.CloseWithError(0, "")
									return
								}
							}
							select {
							case <-time.After(tt.pause):
							case <-ctx.Done():
								return
							}
						}
					})
				}
			}
			total := len(tt.sources) * tt.workers
			require.Eventually(t, func() bool { return opened.Load() >= int64(2*total) }, 10*time.Second, time.Millisecond, "the idle connections fill the cap and renew")

			start := time.Now()
			c, err := webtransport.Dial(bridgetest.Ctx(t, 5*time.Second), r.transportURL, r.opts)
			require.NoError(t, err, "a real client opens its session at its first attempt")
			took := time.Since(start)
			t.Logf("%d idle connections opened, %d renewing; the client's session opened in %v", opened.Load(), total, took)
			require.NoError(t, c.Close())
		})
	}
}
