package server

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWallClockSteps runs a live core whose wall clock (Config.Wall) is
// stepped by -10 s, +40 s and +1 h while its monotonic time (the times
// passed in) runs steadily, as an NTP step does to a real server: the
// keep-alives go on at 10 Hz through every step, the connected clients do
// not time out, the kicked client's reminders and a silent client's
// timeout still come when due, and Update's next deadline stays within a
// keep-alive interval (a timer set for it is not moved by the step).
func TestWallClockSteps(t *testing.T) {
	var step time.Duration // the wall clock's offset from the monotonic one
	var now time.Time
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Addrs: []netip.AddrPort{self}, Now: epoch,
		Wall: func() time.Time { return now.Add(step) }})
	require.NoError(t, err)
	now = epoch
	talker := connectPeer(t, s, 1, now, 5)  // sends a keep-alive every 100 ms
	silent := connectPeer(t, s, 2, now, 20) // sends nothing: times out 20 s in
	var out recSink
	steps := []struct {
		at   time.Duration // monotonic time since the start
		wall time.Duration // the step
	}{{2 * time.Second, -10 * time.Second}, {4 * time.Second, 40 * time.Second}, {6 * time.Second, time.Hour}, {8 * time.Second, 0}}
	from := time.Duration(0)
	for _, st := range steps {
		kas := 0
		for elapsed := from; elapsed < st.at; elapsed += 10 * time.Millisecond {
			now = epoch.Add(elapsed)
			if elapsed%(100*time.Millisecond) == 0 {
				talker.keepAlive(s, now, &out.Output)
			}
			next := s.Update(now, &out.Output)
			require.True(t, next.After(now), "at %v: next %v", elapsed, next)
			require.LessOrEqual(t, next.Sub(now), KeepAliveInterval+DefaultTickInterval, "at %v (wall stepped %v): next is a keep-alive away", elapsed, step)
			kas += keepAlivesTo(&out)[talker.addr]
			out.Reset()
		}
		assert.InDelta(t, 20, kas, 2, "keep-alives in the 2 s before the wall clock stepped %v (offset %v)", st.wall, step)
		assert.Zero(t, talker.c.Reason(), "no spurious timeout with the wall clock at %v", step)
		assert.Zero(t, silent.c.Reason(), "not yet timed out, 20 s after its last packet")
		step += st.wall
		from = st.at
	}
	assert.Zero(t, s.Stats().ConnectionsTimeout)

	// The silent client times out 20 s after its handshake on the
	// monotonic clock, whatever the wall clock did meanwhile.
	now = epoch.Add(20*time.Second - time.Millisecond)
	talker.keepAlive(s, now, &out.Output)
	s.Update(now, &out.Output)
	require.Zero(t, silent.c.Reason())
	now = epoch.Add(20*time.Second + DefaultTickInterval)
	talker.keepAlive(s, now, &out.Output)
	s.Update(now, &out.Output)
	assert.Equal(t, ReasonTimedOut, silent.c.Reason())
	assert.Zero(t, talker.c.Reason())
}

// TestTimeoutTakesNoClientLock: Update times a client out (under
// Server.mu) while another goroutine holds that client's send lock, as a
// Write sealing a packet does: Update does not wait for it.
func TestTimeoutTakesNoClientLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 2, Addrs: []netip.AddrPort{self}, Now: epoch})
		require.NoError(t, err)
		p := connectPeer(t, s, 1, epoch, 1)
		p.c.sendLocked.mu.Lock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var out Output
			s.Update(epoch.Add(2*time.Second), &out)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Update waits on the timed-out client's send lock")
		}
		p.c.sendLocked.mu.Unlock()
		require.Equal(t, ReasonTimedOut, p.c.Reason())
		var out Output
		require.ErrorIs(t, p.c.Send(epoch.Add(2*time.Second), []byte{1}, &out), ErrClientGone)
		require.Empty(t, out.Datagrams)
	})
}
