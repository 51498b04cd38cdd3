package scenario

import (
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/netsim"
	"github.com/stretchr/testify/require"
)

// TestKickDuringHandshakeCompletion forces the ordering issue 15 found in
// the soak: the server accepts the client's connection response and at once
// ends the connection, and its disconnect packets overtake the keep-alive
// that announces the slot, so they reach the client while it is still in
// "sending connection response". The keep-alive arrives later (or never).
// The client must learn at once that it was disconnected, and a late
// keep-alive must not revive a connection the server has forgotten: with
// the reference's rule (disconnects count only once connected) the client
// either connected and timed out 5 s later, or its responses timed out.
func TestKickDuringHandshakeCompletion(t *testing.T) {
	tests := []struct {
		name string
		// end ends the connection on the server: a kick or a Close.
		end func(s *srvNode)
		// keepAlive is the fate of the server's first keep-alive: true
		// delays it behind the disconnects, false loses it.
		keepAliveLate bool
	}{
		{"kick, keep-alive late", kick, true},
		{"kick, keep-alive lost", kick, false},
		{"server close, keep-alive late", closeServer, true},
		{"server close, keep-alive lost", closeServer, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const latency = 10 * time.Millisecond
			w := newWorld(t, netsim.Config{Latency: latency})
			s := w.addServer(srvAddr, 4)
			c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
			w.runUntil(time.Second, c.is(client.SendingConnectionResponse))

			// Hold back (or lose) what the server sends next: the
			// keep-alive it sends when it accepts the response.
			slow := netsim.Config{Latency: 500 * time.Millisecond}
			if !tt.keepAliveLate {
				slow = netsim.Config{Loss: 1}
			}
			w.net.SetLink(s.addr, c.addr, slow)
			w.runUntil(time.Second, func() bool { return len(s.connected) == 1 })
			require.Equal(t, client.SendingConnectionResponse, c.core.State(), "the keep-alive must still be on its way")

			// The disconnects travel fast and arrive first.
			w.net.SetLink(s.addr, c.addr, netsim.Config{Latency: latency})
			tt.end(s)
			require.Contains(t, s.left, s.connected[0])
			w.run(2 * latency)
			require.Equal(t, client.Disconnected, c.core.State(), "disconnects reached the client in sending connection response")

			// The late keep-alive, then long past the 5 s timeout: the
			// client stays disconnected and never was connected.
			w.run(7 * time.Second)
			require.Equal(t, client.Disconnected, c.core.State())
			require.Equal(t, []client.State{client.SendingConnectionRequest, client.SendingConnectionResponse, client.Disconnected}, c.states)
		})
	}
}

func kick(s *srvNode) { s.core.Disconnect(s.connected[0], s.sink) }

func closeServer(s *srvNode) { s.core.Close(s.sink) }
