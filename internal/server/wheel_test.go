package server

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peer is a client made by hand from packets, without the client core:
// enough to connect and to send keep-alives.
type peer struct {
	addr netip.AddrPort
	send *crypto.PacketAEAD // client to server
	seq  uint64
	c    *Client // the server's state for it
}

// connectPeer completes a handshake for client n from addrN(n) at now,
// with a token of the given timeout (token.NoTimeout disables it).
func connectPeer(tb testing.TB, s *Server, n int, now time.Time, timeoutSeconds int32) *peer {
	tb.Helper()
	c2s := crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 1}
	s2c := crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 2}
	tok, err := tokentest.GenerateWith(token.Params{
		ProtocolID:     protocolID,
		ClientID:       uint64(1000 + n),
		PrivateKey:     privKey,
		ServerAddrs:    []netip.AddrPort{self},
		ExpireSeconds:  3600,
		TimeoutSeconds: timeoutSeconds,
	}, uint64(now.Unix()), [crypto.TokenNonceBytes]byte{0: byte(n), 1: byte(n >> 8), 2: byte(n >> 16), 23: 1}, c2s, s2c)
	require.NoError(tb, err)
	p := &peer{addr: addrN(n), send: crypto.NewPacketAEAD(&c2s, protocolID)}
	var out recSink
	s.Receive(now, p.addr, requestOf(tb, tok), &out.Output)
	require.Len(tb, out.pkts(), 1, "a challenge")
	rd := protocol.Reader{ProtocolID: protocolID, Allowed: protocol.ClientAccepts}
	var ch protocol.Packet
	require.NoError(tb, rd.Read(out.pkts()[0], uint64(now.Unix()), crypto.NewPacketAEAD(&s2c, protocolID), nil, &ch))
	require.Equal(tb, protocol.ConnectionChallenge, ch.Type)
	resp := protocol.AppendResponse(nil, p.send, p.seq, ch.ChallengeSequence, ch.ChallengeToken)
	p.seq++
	p.c = s.Receive(now, p.addr, resp, &out.Output)
	require.NotNil(tb, p.c, "connected")
	return p
}

// keepAlive delivers a keep-alive from p to s at now.
func (p *peer) keepAlive(s *Server, now time.Time, out *Output) {
	pkt := protocol.AppendKeepAlive(nil, p.send, p.seq, 0, 0)
	p.seq++
	s.Receive(now, p.addr, pkt, out)
}

// filed is the number of clients in s's deadline wheel.
func filed(s *Server) int {
	s.wheel.mu.Lock()
	defer s.wheel.mu.Unlock()
	return s.wheel.n
}

// filedClients counts the times each client is in s's deadline wheel.
func filedClients(s *Server) map[*Client]int {
	s.wheel.mu.Lock()
	defer s.wheel.mu.Unlock()
	m := map[*Client]int{}
	for _, b := range s.wheel.buckets {
		for _, c := range b {
			m[c]++
		}
	}
	return m
}

// keepAlivesTo counts the keep-alives in out, by address.
func keepAlivesTo(out *recSink) map[netip.AddrPort]int {
	m := map[netip.AddrPort]int{}
	for i, p := range out.pkts() {
		if t, ok := protocol.PeekType(p); ok && t == protocol.KeepAlive {
			m[out.to()[i]]++
		}
	}
	return m
}

var tickIntervals = []time.Duration{time.Millisecond, 7 * time.Millisecond, DefaultTickInterval, 100 * time.Millisecond, time.Second}

// TestWheelKeepAliveExact: a keep-alive goes at the first Update at or
// after KeepAliveInterval without a packet sent, and not a nanosecond
// before; a payload sent moves it; the next time Update returns is the end
// of the tick holding that deadline.
func TestWheelKeepAliveExact(t *testing.T) {
	for _, tick := range tickIntervals {
		t.Run(tick.String(), func(t *testing.T) {
			t0 := epoch.Add(3 * time.Millisecond)
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Addrs: []netip.AddrPort{self}, Now: epoch, TickInterval: tick})
			require.NoError(t, err)
			p := connectPeer(t, s, 1, t0, 5)
			require.Equal(t, 1, filed(s))

			var out recSink
			next := s.Update(t0, &out.Output)
			require.Empty(t, out.pkts())
			ka := t0.Add(KeepAliveInterval)
			endOfTick := epoch.Add(time.Duration((int64(ka.Sub(epoch))/int64(tick) + 1) * int64(tick))) // ticks count from the start
			sweep := epoch.Add(sweepInterval)
			if endOfTick.After(sweep) {
				endOfTick = sweep
			}
			assert.Equal(t, endOfTick, next, "the end of the tick holding the keep-alive, or the sweep if sooner")

			s.Update(ka.Add(-time.Nanosecond), &out.Output)
			require.Empty(t, out.pkts(), "not yet due")
			s.Update(ka, &out.Output)
			require.Equal(t, map[netip.AddrPort]int{p.addr: 1}, keepAlivesTo(&out))
			out.take()
			s.Update(ka, &out.Output)
			require.Empty(t, out.pkts(), "sent once")

			// A payload at ka+50ms: the next keep-alive is 100 ms after it.
			require.NoError(t, p.c.Send(ka.Add(50*time.Millisecond), []byte{1}, &out.Output))
			out.take()
			s.Update(ka.Add(KeepAliveInterval), &out.Output) // the old deadline
			require.Empty(t, out.pkts())
			s.Update(ka.Add(150*time.Millisecond-time.Nanosecond), &out.Output)
			require.Empty(t, out.pkts())
			s.Update(ka.Add(150*time.Millisecond), &out.Output)
			require.Equal(t, map[netip.AddrPort]int{p.addr: 1}, keepAlivesTo(&out))
			require.Equal(t, 1, filed(s))
		})
	}
}

// TestWheelTimeoutExact: a client times out at the first Update at or
// after its timeout without a packet received, and not before; a packet
// received moves it.
func TestWheelTimeoutExact(t *testing.T) {
	for _, tick := range tickIntervals {
		t.Run(tick.String(), func(t *testing.T) {
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Addrs: []netip.AddrPort{self}, Now: epoch, TickInterval: tick})
			require.NoError(t, err)
			p := connectPeer(t, s, 1, epoch, 5)
			var out recSink
			heard := epoch.Add(1234 * time.Millisecond)
			p.keepAlive(s, heard, &out.Output)
			end := heard.Add(5 * time.Second)
			// Updates every tick, as the Listener makes them, up to a
			// nanosecond before the timeout.
			for now := epoch; now.Before(end); now = now.Add(tick) {
				s.Update(now, &out.Output)
			}
			s.Update(end.Add(-time.Nanosecond), &out.Output)
			require.Zero(t, p.c.Reason(), "connected until its timeout")
			require.Equal(t, 1, s.Stats().Connected)
			s.Update(end, &out.Output)
			require.Equal(t, ReasonTimedOut, p.c.Reason())
			st := s.Stats()
			require.Zero(t, st.Connected)
			require.Equal(t, uint64(1), st.ConnectionsTimeout)
			require.Zero(t, filed(s), "a client that left is filed no more")
		})
	}
}

// TestWheelMatchesScan runs many clients through random traffic and
// random Update times, and checks every Update against the rule the wheel
// replaces, applied to every slot: a client times out when it heard
// nothing for its timeout, and otherwise gets a keep-alive when it sent
// nothing for KeepAliveInterval.
func TestWheelMatchesScan(t *testing.T) {
	for _, tick := range tickIntervals {
		t.Run(tick.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tick)))
			const clients = 24
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: clients, Addrs: []netip.AddrPort{self}, Now: epoch, TickInterval: tick})
			require.NoError(t, err)
			now := epoch
			peers := map[int]*peer{}
			made := 0
			var out recSink
			var sentKA, timedOut int
			for step := range 4000 {
				now = now.Add(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
				// Traffic: connect, hear from, send to and disconnect
				// clients at random.
				for range rng.IntN(4) {
					switch r := rng.IntN(10); {
					case r == 0 && len(peers) < clients:
						made++
						peers[made] = connectPeer(t, s, made, now, int32(1+rng.IntN(2)))
					case r <= 4:
						for _, p := range peers {
							p.keepAlive(s, now, &out.Output)
							break
						}
					case r <= 8:
						for _, p := range peers {
							_ = p.c.Send(now, []byte{1}, &out.Output)
							break
						}
					default:
						for _, p := range peers {
							s.Disconnect(p.c, &out.Output)
							break
						}
					}
				}
				for id, p := range peers {
					if p.c.Reason() != 0 {
						delete(peers, id)
					}
				}
				out.take()

				// What scanning every slot would do now.
				ns := s.mono(now)
				wantKA := map[netip.AddrPort]int{}
				var wantTO []*Client
				for _, c := range s.slots {
					switch {
					case c == nil:
					case c.timeout > 0 && ns-c.lastRecv.Load() >= int64(c.timeout):
						wantTO = append(wantTO, c)
					case ns-c.sendLocked.lastSend.Load() >= int64(KeepAliveInterval):
						wantKA[c.addr]++
					}
				}
				next := s.Update(now, &out.Output)
				require.Equal(t, wantKA, keepAlivesTo(&out), "step %d", step)
				for _, c := range wantTO {
					require.Equal(t, ReasonTimedOut, c.Reason(), "step %d", step)
				}
				in := filedClients(s)
				for _, c := range s.slots {
					if c != nil {
						require.Equal(t, 1, in[c], "step %d: every connected client is filed once", step)
					}
				}
				require.True(t, next.After(now), "step %d: next %v is after now", step, next.Sub(now))
				sentKA += len(out.pkts())
				timedOut += len(wantTO)
				out.take()
			}
			require.Positive(t, sentKA)
			require.Positive(t, timedOut)
		})
	}
}

// TestWheelSlotReusedWhileFiled: a client that left while filed is
// dropped when its deadline comes, and the client that took its slot is
// kept to its own deadline.
func TestWheelSlotReusedWhileFiled(t *testing.T) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 1, Addrs: []netip.AddrPort{self}, Now: epoch})
	require.NoError(t, err)
	var out recSink
	a := connectPeer(t, s, 1, epoch, 5)
	s.Disconnect(a.c, &out.Output)
	t1 := epoch.Add(30 * time.Millisecond)
	b := connectPeer(t, s, 2, t1, 5)
	require.Equal(t, a.c.Index(), b.c.Index(), "the slot was reused")
	require.Equal(t, 2, filed(s), "a's entry waits for its deadline")
	out.take()

	s.Update(epoch.Add(KeepAliveInterval), &out.Output) // a's deadline
	assert.Empty(t, out.pkts(), "nothing for the client that left, nor early for the new one")
	assert.Equal(t, 1, filed(s))
	s.Update(t1.Add(KeepAliveInterval), &out.Output)
	assert.Equal(t, map[netip.AddrPort]int{b.addr: 1}, keepAlivesTo(&out))
	assert.Equal(t, 1, filed(s))

	// A client that times out while another is in the middle of its
	// interval leaves the other filed.
	s.Update(t1.Add(5*time.Second), &out.Output)
	assert.Equal(t, ReasonTimedOut, b.c.Reason())
	assert.Zero(t, filed(s))
}

// TestWheelLoopbackNeverFiled: loopback clients exchange no packets, so
// they have no deadline and are never in the wheel.
func TestWheelLoopbackNeverFiled(t *testing.T) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 3, Addrs: []netip.AddrPort{self}, Now: epoch})
	require.NoError(t, err)
	_, err = s.ConnectLoopback(1, [token.UserDataBytes]byte{}, &Output{})
	require.NoError(t, err)
	assert.Zero(t, filed(s))
	p := connectPeer(t, s, 2, epoch, 5)
	assert.Equal(t, 1, filed(s))
	var out recSink
	s.Update(epoch.Add(time.Minute), &out.Output)
	assert.Equal(t, ReasonTimedOut, p.c.Reason())
	assert.Equal(t, 1, s.Stats().Connected, "the loopback client stays")
	assert.Zero(t, filed(s))
}

// TestWheelCloseEmpties: Close forgets every filed client, and Update
// after it sends nothing.
func TestWheelCloseEmpties(t *testing.T) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 3, Addrs: []netip.AddrPort{self}, Now: epoch})
	require.NoError(t, err)
	connectPeer(t, s, 1, epoch, 5)
	connectPeer(t, s, 2, epoch, 5)
	var out recSink
	s.Close(&out.Output)
	assert.Zero(t, filed(s))
	out.take()
	s.Update(epoch.Add(time.Second), &out.Output)
	assert.Empty(t, out.pkts())
}

// TestWheelSize: enough buckets for a keep-alive interval, bounded for
// tiny ticks.
func TestWheelSize(t *testing.T) {
	for _, tt := range []struct {
		tick time.Duration
		want int
	}{
		{0, 16},
		{10 * time.Millisecond, 16},
		{time.Millisecond, 128},
		{time.Second, 2},
		{time.Hour, 2},
		{time.Microsecond, maxWheelBuckets},
	} {
		w := newDeadlineWheel(tt.tick)
		assert.Equal(t, tt.want, len(w.buckets), "tick %v", tt.tick)
	}
}

// TestUpdateIdleAllocatesNothing: Update with connected idle clients, in
// steady state, allocates nothing.
func TestUpdateIdleAllocatesNothing(t *testing.T) {
	const clients = 64
	s, now := idleServer(t, clients, DefaultTickInterval)
	var sink countSink
	for range 20 { // warm the scratch lists
		now = now.Add(DefaultTickInterval)
		s.Update(now, &sink.Output)
	}
	before := sink.n()
	allocs := testing.AllocsPerRun(200, func() {
		now = now.Add(DefaultTickInterval)
		s.Update(now, &sink.Output)
	})
	require.Zero(t, allocs)
	// 201 ticks of 10 ms: about 20 keep-alives per client.
	require.InDelta(t, clients*20, sink.n()-before, clients)
}

// idleServer connects n clients that never time out, their connections
// spread over one keep-alive interval, and returns the server and the
// time after the last one.
func idleServer(tb testing.TB, n int, tick time.Duration) (*Server, time.Time) {
	tb.Helper()
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: n, Addrs: []netip.AddrPort{self}, Now: epoch, TickInterval: tick})
	require.NoError(tb, err)
	now := epoch
	var sink countSink
	for i := range n {
		now = epoch.Add(time.Duration(i) * KeepAliveInterval / time.Duration(n))
		connectPeer(tb, s, i, now, token.NoTimeout)
		s.Update(now, &sink.Output)
	}
	return s, now
}

// BenchmarkUpdateIdle: the server's Update, every 10 ms of simulated time,
// with every slot taken by an idle client (one that sends nothing, so that
// each gets a keep-alive every 100 ms). ns/keepalive is the cost per
// keep-alive sent, sealing included: it must not grow with the slot count.
func BenchmarkUpdateIdle(b *testing.B) {
	for _, n := range []int{1024, 16384} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s, now := idleServer(b, n, 0)
			var sink countSink
			for range 20 {
				now = now.Add(10 * time.Millisecond)
				s.Update(now, &sink.Output)
			}
			sent := sink.n()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				now = now.Add(10 * time.Millisecond)
				s.Update(now, &sink.Output)
			}
			b.StopTimer()
			ka := sink.n() - sent
			if ka > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ka), "ns/keepalive")
			}
			b.ReportMetric(float64(ka)/float64(b.N), "keepalives/op")
		})
	}
}

// TestWheelDeadlinePassedWhenFiled: a client whose deadline has passed by
// the wheel's clock when it connects (the reader's clock behind the
// ticker's) is acted on at the next Update.
func TestWheelDeadlinePassedWhenFiled(t *testing.T) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 2, Addrs: []netip.AddrPort{self}, Now: epoch})
	require.NoError(t, err)
	var out recSink
	later := epoch.Add(10*time.Second + 200*time.Millisecond)
	s.Update(later, &out.Output)
	p := connectPeer(t, s, 1, epoch.Add(10*time.Second), 5)
	out.take()
	s.Update(later.Add(time.Millisecond), &out.Output)
	assert.Equal(t, map[netip.AddrPort]int{p.addr: 1}, keepAlivesTo(&out))
}

// BenchmarkPayloadEcho: the server's hot path for one payload each way:
// Receive of a payload from a connected client (decrypt, replay check,
// its queue), the read from that queue, and Send of a payload back,
// round-robin over n connected clients. The client's sealing is in the
// figure too.
func BenchmarkPayloadEcho(b *testing.B) {
	for _, n := range []int{1, 1024, 16384} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: n, Addrs: []netip.AddrPort{self}, Now: epoch})
			require.NoError(b, err)
			peers := make([]*peer, n)
			for i := range peers {
				peers[i] = connectPeer(b, s, i, epoch, token.NoTimeout)
			}
			var sink countSink
			msg := make([]byte, 100)
			pkt := make([]byte, 0, protocol.MaxPacketBytes)
			buf := make([]byte, protocol.MaxPayloadBytes)
			now := epoch.Add(time.Millisecond)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p := peers[i%n]
				pkt = protocol.AppendPayload(pkt[:0], p.send, p.seq, msg)
				p.seq++
				s.Receive(now, p.addr, pkt, &sink.Output)
				k, _, err := p.c.Queue().Read(buf)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.c.Send(now, buf[:k], &sink.Output); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkForgedPayloadDrop: the server's cost to drop a forged payload
// packet from a connected client's address (issue 36's flood): the
// client's receive lock and an AEAD open that fails, on a 100-byte
// payload sealed under another key, with sequences ahead of the replay
// window. Its inverse is the drops per second one core makes.
func BenchmarkForgedPayloadDrop(b *testing.B) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Addrs: []netip.AddrPort{self}, Now: epoch})
	require.NoError(b, err)
	p := connectPeer(b, s, 1, epoch, token.NoTimeout)
	wrong := crypto.NewPacketAEAD(&crypto.Key{1: 0xf0}, protocolID)
	forged := make([][]byte, 256)
	for i := range forged {
		forged[i] = protocol.AppendPayload(nil, wrong, 1<<40+uint64(i)*7919, make([]byte, 100))
	}
	buf := make([]byte, protocol.MaxPacketBytes)
	var sink countSink
	now := epoch.Add(time.Millisecond)
	before := s.Stats().Ignored
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n := copy(buf, forged[i%len(forged)]) // Receive decrypts in place
		s.Receive(now, p.addr, buf[:n], &sink.Output)
	}
	b.StopTimer()
	require.Equal(b, uint64(b.N), s.Stats().Ignored-before, "every forged packet dropped")
	require.Zero(b, sink.n())
}
