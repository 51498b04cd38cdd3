package scenario

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/protocol"
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

func kick(s *srvNode) { s.disconnect(s.connected[0]); s.ev.collect() }

func closeServer(s *srvNode) { s.close(); s.ev.collect() }

// referenceHandshake makes c ignore disconnect packets while it is in
// "sending connection response", as the reference client does.
func referenceHandshake(c *cliNode) {
	c.ignore = func(b []byte) bool { return ignoredByReference(b, c.core.State()) }
}

// ignoredByReference reports whether the reference client would ignore
// datagram b in state st, where this module's client does not: a
// disconnect in "sending connection response".
func ignoredByReference(b []byte, st client.State) bool {
	return len(b) > 0 && protocol.PacketType(b[0]&0x0f) == protocol.Disconnect && st == client.SendingConnectionResponse
}

// TestKickedReferenceClientIsReminded: a client that behaves as the
// reference (it ignores disconnects before it is connected) is kicked
// right after the server accepted it, and a keep-alive delayed behind the
// disconnects connects it. The server, which remembers the keys of the
// clients it kicked for a while, answers its next keep-alive with one more
// disconnect, so it learns within a keep-alive interval instead of timing
// out 5 s later.
func TestKickedReferenceClientIsReminded(t *testing.T) {
	const latency = 10 * time.Millisecond
	w := newWorld(t, netsim.Config{Latency: latency})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	referenceHandshake(c)
	w.runUntil(time.Second, c.is(client.SendingConnectionResponse))
	w.net.SetLink(s.addr, c.addr, netsim.Config{Latency: 800 * time.Millisecond})
	w.runUntil(time.Second, func() bool { return len(s.connected) == 1 })
	w.net.SetLink(s.addr, c.addr, netsim.Config{Latency: latency})
	kickedAt := w.now
	kick(s)

	w.runUntil(2*time.Second, c.is(client.Connected)) // the late keep-alive; the disconnects were ignored
	w.runUntil(time.Second, c.final())
	require.Equal(t, client.Disconnected, c.core.State())
	require.Less(t, w.now.Sub(kickedAt), time.Second, "learned long after the kick")
}

// TestKickReminders checks the bounds of the server's reminders to a kicked
// client: one disconnect per authenticated keep-alive or payload from its
// address, never larger than it, at most ten, only while the client could
// still be waiting; nothing for a forged, replayed or other packet.
func TestKickReminders(t *testing.T) {
	const timeout = 5
	tests := []struct {
		name string
		// send returns the datagrams the kicked client sends, given a
		// function sealing a packet with its key at a sequence.
		send  func(k *crypto.PacketAEAD) [][]byte
		after time.Duration // wait this long after the kick before sending
		want  int           // disconnects expected back
	}{
		{"keep-alive", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendKeepAlive(nil, k, 1<<30, 0, 0)}
		}, 0, 1},
		{"payload", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendPayload(nil, k, 1<<30, []byte("8 bytes!"))}
		}, 0, 1},
		// The server's sequence numbers take 8 bytes (its clock), so a
		// reminder is 25 bytes: a 22-byte packet is not answered.
		{"payload smaller than a reminder", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendPayload(nil, k, 1<<30, []byte{1})}
		}, 0, 0},
		{"at most ten", func(k *crypto.PacketAEAD) [][]byte {
			var out [][]byte
			for i := range 15 {
				out = append(out, protocol.AppendKeepAlive(nil, k, 1<<30+uint64(i), 0, 0))
			}
			return out
		}, 0, 10},
		{"replayed", func(k *crypto.PacketAEAD) [][]byte {
			p := protocol.AppendKeepAlive(nil, k, 1<<30, 0, 0)
			return [][]byte{p, p, p}
		}, 0, 1},
		{"forged", func(*crypto.PacketAEAD) [][]byte {
			other := crypto.NewPacketAEAD(&crypto.Key{9}, protocolID)
			return [][]byte{protocol.AppendKeepAlive(nil, other, 1<<30, 0, 0)}
		}, 0, 0},
		{"disconnect", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendDisconnect(nil, k, 1<<30)}
		}, 0, 0},
		{"connection response", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendResponse(nil, k, 1<<30, 0, make([]byte, 300))}
		}, 0, 0},
		{"after the client's timeout", func(k *crypto.PacketAEAD) [][]byte {
			return [][]byte{protocol.AppendKeepAlive(nil, k, 1<<30, 0, 0)}
		}, (timeout + 2) * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, netsim.Config{Latency: time.Millisecond})
			s := w.addServer(srvAddr, 4)
			c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, timeout, srvAddr))
			w.runUntil(time.Second, c.is(client.Connected))
			key := crypto.NewPacketAEAD(&c.core.Token().ClientToServerKey, protocolID)
			kick(s)
			w.run(100 * time.Millisecond)
			require.Equal(t, client.Disconnected, c.core.State())
			w.run(tt.after)

			var got, tooBig int
			var sent []int
			w.tap = func(from, to netip.AddrPort, b []byte) {
				if from == s.addr && to == c.addr && protocol.PacketType(b[0]&0x0f) == protocol.Disconnect {
					got++
					if len(b) > slices.Min(sent) {
						tooBig++
					}
				}
			}
			for _, p := range tt.send(key) {
				sent = append(sent, len(p))
				w.net.Send(w.now, c.addr, s.addr, p)
			}
			w.run(100 * time.Millisecond)
			require.Equal(t, tt.want, got)
			require.Zero(t, tooBig, "a reminder larger than what it answered")
		})
	}
}
