package cute

import (
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
		s := newSimServer(t, nw)
		defer s.Close()
		for i := range 20 {
			start = time.Now()
			c := s.dial(t, nw, i)
			assert.Equal(t, 4*latency, time.Since(start), "dial %d: token, challenge, response, accepted", i)
			require.NoError(t, c.Close())
		}
	})
}
