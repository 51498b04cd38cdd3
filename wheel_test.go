package netcode_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/timerwheel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDialedConnsOnWheel dials Conns through a context carrying a
// timerwheel.Wheel, as the bridge's relay does, over real UDP: their
// handshakes, keep-alives and timeouts run on the wheel. Idle for 3 s,
// past the token's 2 s timeout, each stays connected on both sides (its
// keep-alives went out, and the server's were taken in), echoes, then
// closes, leaving nothing armed.
func TestDialedConnsOnWheel(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go echoUntilError(c)
				}
			}()
			w := timerwheel.New(0)
			defer w.Close()
			ctx, cancel := context.WithTimeout(timerwheel.With(context.Background(), w), 10*time.Second)
			defer cancel()
			const n = 4
			conns := make([]*netcode.Conn, n)
			for i := range conns {
				c, err := netcode.DialContext(ctx, mint(t, l.Addr(), withTimeout(2), withClientID(uint64(100+i))))
				require.NoError(t, err)
				conns[i] = c
			}
			require.Equal(t, n, w.Armed(), "each Conn's timer is armed on the wheel")
			fired := w.Fired()
			time.Sleep(3 * time.Second) // past the timeout: only keep-alives keep them up
			// About 10 keep-alives a second each; a quarter of that
			// shows they run on the wheel.
			assert.Greater(t, w.Fired()-fired, uint64(n*3*10/4), "keep-alive timers run on the wheel")
			assert.Equal(t, n, l.Stats().Connected, "the server kept every client")
			for _, c := range conns {
				require.NoError(t, c.Err())
				send(t, c, c, []byte("still here"))
				require.NoError(t, c.Close())
			}
			require.Eventually(t, func() bool { return w.Armed() == 0 }, 5*time.Second, time.Millisecond,
				"a closed Conn left its timer armed")
		})
	}
}

// TestDialedConnOnWheelTimesOut checks that a Conn on a wheel still ends
// with ErrConnectionTimedOut when its server goes silent: its timeout
// runs on the wheel too.
func TestDialedConnOnWheelTimesOut(t *testing.T) {
	uc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	pc := &opaqueConn{PacketConn: uc}
	l, err := netcode.NewListener(pc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
	require.NoError(t, err)
	defer l.Close()
	w := timerwheel.New(0)
	defer w.Close()
	ctx, cancel := context.WithTimeout(timerwheel.With(context.Background(), w), 10*time.Second)
	defer cancel()
	c, err := netcode.DialContext(ctx, mint(t, l.Addr(), withTimeout(1)))
	require.NoError(t, err)
	defer c.Close()
	pc.muted.Store(true) // the server says nothing more
	start := time.Now()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the Conn did not time out")
	}
	require.ErrorIs(t, c.Err(), netcode.ErrConnectionTimedOut)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "timed out before the token's timeout")
}
