package transport_test

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	bridgetransport "github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/transport"
)

// TestListenerTakesSessionsPushed: a netcode Listener over a Mux acts on
// its WebSocket sessions' datagrams in the sessions' own goroutines (the
// Mux pushes them, transport.Pusher): none goes through the Mux's read
// queue, which then carries the UDP clients' only. A Mux that offers no
// Pusher (here, one wrapped without it) queues them for the Listener's
// reader, as before. Both serve WebSocket and UDP clients alike, and
// both write a lone datagram for a session straight to its WebSocket,
// from the writing goroutine (pushed, past the Listener's send queue):
// the sessions' writers are seldom woken.
func TestListenerTakesSessionsPushed(t *testing.T) {
	for _, pushed := range []bool{true, false} {
		t.Run(map[bool]string{true: "pushed", false: "queued"}[pushed], func(t *testing.T) {
			var cm *countingMux
			s := bridgetest.NewMuxServerVia(t, 8, bridgetransport.MuxConfig{}, func(m *bridgetransport.Mux) net.PacketConn {
				cm = newCountingMux(m)
				if pushed {
					p := transport.CapabilitiesOf(m).Pusher
					require.NotNil(t, p, "a Mux pushes its sessions' datagrams")
					cm.Batched.S = p
				}
				return cm
			})
			ws := []*netcode.Conn{s.DialWS(t), s.DialWS(t)}
			wakes := bridgetransport.WriterWakes(s.Mux)
			const echoes = 50
			errc := make(chan error, len(ws))
			for i, c := range ws {
				go func() { errc <- bridgetest.Echo(t, c, i, echoes, false) }()
			}
			for range ws {
				require.NoError(t, <-errc)
			}
			wakes = bridgetransport.WriterWakes(s.Mux) - wakes
			// Only a write that met another (a keep-alive) wakes one.
			assert.Less(t, wakes, uint64(len(ws)*echoes/2), "session writers woken for %d echoes", len(ws)*echoes)
			require.NoError(t, bridgetest.Echo(t, s.DialUDP(t), 2, 20, true))
			assert.Positive(t, cm.readBatches.Load(), "the UDP client's datagrams are read in batches")
			if pushed {
				assert.Zero(t, cm.sessionReads.Load(), "WebSocket datagrams read from the Mux's queue")
			} else {
				assert.Positive(t, cm.sessionReads.Load(), "WebSocket datagrams read from the Mux's queue")
			}
		})
	}
}

// TestPushedFloodDoesNotBlock: a WebSocket client floods its server Conn
// (which the test server echoes) without reading the echoes. Its
// session's reader, acting on each datagram for the Listener, never waits
// for room: what the Conn's read queue, the session's send queue or the
// client's read queue have no room for is dropped, as over UDP. Other
// clients are served meanwhile, and the flooder's session stays live.
func TestPushedFloodDoesNotBlock(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 8, bridgetransport.MuxConfig{})
	flooder := s.DialWS(t)
	p := make([]byte, 100)
	for range 5000 {
		_, err := flooder.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, bridgetest.Echo(t, s.DialWS(t), 1, 50, false), "another client during the flood")
	// The flooder's session: a payload of its own comes back, behind
	// whatever of the flood's echoes were kept (it may be dropped too,
	// while queues are full: it is sent again).
	live := []byte("still live")
	buf := make([]byte, netcode.MaxPayloadBytes)
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 20, "the flooder's session answers")
		_, err := flooder.Write(live)
		require.NoError(t, err)
		require.NoError(t, flooder.SetReadDeadline(time.Now().Add(time.Second)))
		for err == nil {
			var n int
			if n, err = flooder.Read(buf); err == nil && string(buf[:n]) == string(live) {
				return
			}
		}
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	}
}

// TestPushedAllocs: a payload from a WebSocket client to its server Conn
// (pushed by the session's reader to the Listener) and the echo back
// allocate nothing in steady state.
func TestPushedAllocs(t *testing.T) {
	race.Skip(t)
	s := bridgetest.NewMuxServer(t, 4, bridgetransport.MuxConfig{})
	c := s.DialWS(t)
	msg := make([]byte, 100)
	buf := make([]byte, netcode.MaxPayloadBytes)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	roundTrip := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		roundTrip()
	}
	assert.Zero(t, testing.AllocsPerRun(1000, roundTrip), "allocations per payload, both ways")
}
