package cute

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/cute/internal/core"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The due time a run sets no longer overwrites one set meanwhile: that is
// the engine's Due now (TestDueKeepsDeadlineGivenDuringCallback in
// internal/engine); this is the dialed Conn's whole path.
//
// TestDialWakeUpNotLost dials on simulated time with a 50 ms one-way
// delay, so that the challenge request reaches the client at the instant
// its updater resends the token, and lets the read loop handle it just
// after the updater's Update (the live race's bad order, made certain by a
// hook): the challenge response still goes at once and every dial
// connects in exactly two round trips. With the read loop's due time
// overwritten by the updater's, such a dial took 100 ms more (about one
// dial in five did, live).
func TestDialWakeUpNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 50 * time.Millisecond
		var start time.Time
		testHookUpdated = func(dc *dialConn) {
			if time.Since(start) != 2*latency {
				return
			}
			for dc.core.State() == core.SendingConnectionRequest { // the challenge is being read
				runtime.Gosched()
			}
		}
		defer func() { testHookUpdated = nil }()
		nw := netsim.New(1, netsim.Config{Latency: latency})
		defer nw.Close()
		srvAP := netip.MustParseAddrPort("10.8.0.1:40000")
		pc, err := nw.Listen(srvAP)
		require.NoError(t, err)
		pk, sk := GenerateKeyPair()
		l, err := newListener(pc, ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: sk})
		require.NoError(t, err)
		defer l.Close()
		for i := range 20 {
			tok, err := GenerateToken(&TokenParams{ApplicationID: testApp, ClientID: uint64(i + 1), SecretKey: sk, ServerAddrs: []netip.AddrPort{srvAP}})
			require.NoError(t, err)
			d := Dialer{listenPacket: func(string, string) (net.PacketConn, error) {
				return nw.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 8, 1, byte(i)}), 5000))
			}}
			start = time.Now()
			c, err := d.DialContext(context.Background(), tok)
			require.NoError(t, err)
			assert.Equal(t, 4*latency, time.Since(start), "dial %d: token, challenge, response, accepted", i)
			require.NoError(t, c.Close())
		}
	})
}
