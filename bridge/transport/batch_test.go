package transport_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	bridgetransport "github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

func apOf(a net.Addr) netip.AddrPort { return transport.AddrPortOf(a) }

func newMsgs(n int) []transport.Message {
	ms := make([]transport.Message, n)
	for i := range ms {
		ms[i].Buf = make([]byte, 0, transport.MaxDatagram)
	}
	return ms
}

// TestMuxReadBatch: the transport a netcode Listener makes of a Mux
// (NewListener wraps its PacketConn with transport.New) reads everything
// queued, UDP and WebSocket, in one call, not one datagram per call.
func TestMuxReadBatch(t *testing.T) {
	for _, lb := range bridgetest.Loopbacks {
		t.Run(lb.Network, func(t *testing.T) {
			const limit = 10
			mux, url := bridgetest.NewMuxOn(t, lb.Network, lb.Addr, bridgetransport.MuxConfig{ReadQueue: limit})
			tc := transport.New(mux)
			require.NoError(t, tc.SetReadDeadline(time.Now().Add(5*time.Second)))
			peer := transport.New(bridgetest.ListenLoopback(t, lb.Network, lb.Addr))
			defer peer.Close()
			server := apOf(mux.LocalAddr())

			// UDP only: fill the queue past its bound, so that exactly
			// limit datagrams wait.
			out := make([]transport.Message, limit+2)
			for i := range out {
				out[i] = transport.Message{Buf: []byte(fmt.Sprint("udp ", i)), Addr: server}
			}
			_, err := peer.WriteBatch(out)
			require.NoError(t, err)
			bridgetest.Eventually(t, func() bool { return mux.Dropped() == 2 }, "the queue did not fill")
			ms := newMsgs(2 * limit)
			n, err := tc.ReadBatch(ms)
			require.NoError(t, err)
			require.Equal(t, limit, n, "one call takes everything queued")
			for i, m := range ms[:n] {
				assert.Equal(t, fmt.Sprint("udp ", i), string(m.Buf))
				assert.Equal(t, apOf(peer.LocalAddr()), m.Addr)
			}

			// WebSocket and UDP together.
			ws, err := bridgetransport.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
			require.NoError(t, err)
			defer ws.Close()
			for i := range 4 {
				_, err := ws.WriteToUDPAddrPort([]byte(fmt.Sprint("ws ", i)), server)
				require.NoError(t, err)
			}
			_, err = peer.WriteBatch(out[:8])
			require.NoError(t, err)
			bridgetest.Eventually(t, func() bool { return mux.Dropped() == 4 }, "the queue did not fill")
			n, err = tc.ReadBatch(ms)
			require.NoError(t, err)
			require.Equal(t, limit, n)
			var wsFrom netip.AddrPort
			nextWS, nextUDP := 0, 0
			for _, m := range ms[:n] {
				if bridgetransport.IsSessionAddr(m.Addr) {
					if !wsFrom.IsValid() {
						wsFrom = m.Addr
					}
					assert.Equal(t, wsFrom, m.Addr, "one session, one address")
					// Dropped ones leave gaps, but the order holds.
					assert.True(t, strings.HasPrefix(string(m.Buf), "ws "), "%q", m.Buf)
					var i int
					fmt.Sscanf(string(m.Buf), "ws %d", &i)
					assert.GreaterOrEqual(t, i, nextWS)
					nextWS = i + 1
					continue
				}
				assert.Equal(t, apOf(peer.LocalAddr()), m.Addr)
				var i int
				_, err := fmt.Sscanf(string(m.Buf), "udp %d", &i)
				require.NoError(t, err, "%q", m.Buf)
				assert.GreaterOrEqual(t, i, nextUDP)
				nextUDP = i + 1
			}
		})
	}
}

// TestMuxWriteBatch: one batch for UDP peers and WebSocket sessions
// together reaches each, and stops at a datagram it cannot send.
func TestMuxWriteBatch(t *testing.T) {
	for _, lb := range bridgetest.Loopbacks {
		t.Run(lb.Network, func(t *testing.T) {
			mux, url := bridgetest.NewMuxOn(t, lb.Network, lb.Addr, bridgetransport.MuxConfig{})
			tc := transport.New(mux)
			server := apOf(mux.LocalAddr())
			p1 := transport.New(bridgetest.ListenLoopback(t, lb.Network, lb.Addr))
			defer p1.Close()
			p2 := transport.New(bridgetest.ListenLoopback(t, lb.Network, lb.Addr))
			defer p2.Close()
			var ws [2]*bridgetransport.Conn
			var wsAddr [2]netip.AddrPort
			require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
			for i := range ws {
				c, err := bridgetransport.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
				require.NoError(t, err)
				defer c.Close()
				ws[i] = c
				_, err = c.WriteToUDPAddrPort([]byte("hello"), server)
				require.NoError(t, err)
				_, from, err := mux.ReadFromUDPAddrPort(make([]byte, 100))
				require.NoError(t, err)
				wsAddr[i] = from
			}
			nobody := netip.MustParseAddrPort("[100::ffff]:1")
			batch := []transport.Message{
				{Buf: []byte("u1"), Addr: apOf(p1.LocalAddr())},
				{Buf: []byte("w1"), Addr: wsAddr[0]},
				{Buf: []byte("u2"), Addr: apOf(p1.LocalAddr())},
				{Buf: []byte("u3"), Addr: apOf(p2.LocalAddr())},
				{Buf: []byte("w2"), Addr: wsAddr[1]},
				{Buf: []byte("w3"), Addr: wsAddr[0]},
				{Buf: []byte("lost, like UDP"), Addr: nobody},
			}
			n, err := tc.WriteBatch(batch)
			require.NoError(t, err)
			require.Equal(t, len(batch), n)

			readAll := func(c transport.Conn, want ...string) {
				t.Helper()
				require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
				ms := newMsgs(4)
				var got []string
				for len(got) < len(want) {
					n, err := c.ReadBatch(ms)
					require.NoError(t, err)
					for _, m := range ms[:n] {
						assert.Equal(t, server, m.Addr)
						got = append(got, string(m.Buf))
					}
				}
				assert.Equal(t, want, got)
			}
			readAll(p1, "u1", "u2")
			readAll(p2, "u3")
			readAll(transport.New(ws[0]), "w1", "w3")
			readAll(transport.New(ws[1]), "w2")

			// It stops at what it cannot send, and says how far it got.
			n, err = tc.WriteBatch([]transport.Message{
				{Buf: []byte("ok"), Addr: wsAddr[0]},
				{Buf: []byte("ok"), Addr: apOf(p1.LocalAddr())},
				{Buf: make([]byte, protocol.MaxPacketBytes+1), Addr: wsAddr[1]},
				{Buf: []byte("not sent"), Addr: wsAddr[1]},
			})
			assert.Equal(t, 2, n)
			assert.Error(t, err)

			require.NoError(t, mux.Close())
			n, err = tc.WriteBatch([]transport.Message{{Buf: []byte("x"), Addr: wsAddr[0]}})
			assert.Zero(t, n)
			assert.ErrorIs(t, err, net.ErrClosed)
			n, err = tc.WriteBatch([]transport.Message{{Buf: []byte("x"), Addr: apOf(p1.LocalAddr())}})
			assert.Zero(t, n)
			assert.ErrorIs(t, err, net.ErrClosed)
			_, err = tc.ReadBatch(newMsgs(1))
			assert.ErrorIs(t, err, net.ErrClosed)
		})
	}
}

// viaTransport is how a Listener sees a Mux: batched, or one datagram per
// call.
var viaTransport = []struct {
	name string
	via  func(*bridgetransport.Mux) net.PacketConn
}{
	{"batched", func(m *bridgetransport.Mux) net.PacketConn { return m }},
	{"single", func(m *bridgetransport.Mux) net.PacketConn {
		return struct {
			net.PacketConn
			addrPort
		}{m, m}
	}},
}

// addrPort is the netip.AddrPort half of *net.UDPConn's methods.
type addrPort interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// BenchmarkMuxRead reads UDP datagrams from a Mux, 64 per round, as a
// Listener does: in batches, or one per call.
func BenchmarkMuxRead(b *testing.B) {
	for _, v := range viaTransport {
		b.Run(v.name, func(b *testing.B) {
			mux, _ := bridgetest.NewMuxOn(b, "udp4", "127.0.0.1:0", bridgetransport.MuxConfig{})
			tc := transport.New(v.via(mux))
			peer := transport.New(bridgetest.ListenLoopback(b, "udp4", "127.0.0.1:0"))
			defer peer.Close()
			const round = 64
			out := make([]transport.Message, round)
			for i := range out {
				out[i] = transport.Message{Buf: make([]byte, 100), Addr: apOf(mux.LocalAddr())}
			}
			ms := newMsgs(round)
			_ = tc.SetReadDeadline(time.Now().Add(time.Minute))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := peer.WriteBatch(out); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < round; {
					n, err := tc.ReadBatch(ms)
					if err != nil {
						b.Fatalf("%d of %d: %v", got, round, err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(b.N*round)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}

// BenchmarkMuxWrite sends 64 datagrams per round to a UDP peer through a
// Mux, as a Listener does: in batches, or one per call.
func BenchmarkMuxWrite(b *testing.B) {
	for _, v := range viaTransport {
		b.Run(v.name, func(b *testing.B) {
			mux, _ := bridgetest.NewMuxOn(b, "udp4", "127.0.0.1:0", bridgetransport.MuxConfig{})
			tc := transport.New(v.via(mux))
			peer := bridgetest.ListenLoopback(b, "udp4", "127.0.0.1:0") // never read: the kernel drops
			defer peer.Close()
			const round = 64
			out := make([]transport.Message, round)
			for i := range out {
				out[i] = transport.Message{Buf: make([]byte, 100), Addr: apOf(peer.LocalAddr())}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := tc.WriteBatch(out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*round)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}

// BenchmarkMuxListenerEcho: 16 netcode clients over UDP, each with 8
// payloads in flight, echoed by a Listener over a Mux that it reads and
// writes in batches, or one datagram per call. It reports echoes per
// second and the process's CPU time per echo (clients included).
func BenchmarkMuxListenerEcho(b *testing.B) {
	for _, v := range viaTransport {
		b.Run(v.name, func(b *testing.B) {
			s := bridgetest.NewMuxServerVia(b, 32, bridgetransport.MuxConfig{}, v.via)
			const clients, inFlight = 16, 8
			conns := make([]*netcode.Conn, clients)
			for i := range conns {
				conns[i] = s.DialUDP(b)
			}
			rounds := b.N/(clients*inFlight) + 1
			b.ReportAllocs()
			b.ResetTimer()
			cpu := bridgetest.CPUTime()
			var wg sync.WaitGroup
			for _, c := range conns {
				wg.Go(func() {
					p := make([]byte, 100)
					buf := make([]byte, netcode.MaxPayloadBytes)
					for range rounds {
						for range inFlight {
							if _, err := c.Write(p); err != nil {
								b.Error(err)
								return
							}
						}
						_ = c.SetReadDeadline(time.Now().Add(time.Second))
						for range inFlight {
							if _, err := c.Read(buf); err != nil {
								break // lost on loopback under load: next round
							}
						}
					}
				})
			}
			wg.Wait()
			echoes := float64(rounds * clients * inFlight)
			b.ReportMetric(echoes/b.Elapsed().Seconds(), "echoes/s")
			if cpu >= 0 {
				b.ReportMetric(float64((bridgetest.CPUTime()-cpu).Microseconds())/echoes, "cpu-µs/echo")
			}
		})
	}
}

// TestMuxBatchAllocs: reading and writing a Mux in batches allocates
// nothing in steady state, its UDP reader included.
func TestMuxBatchAllocs(t *testing.T) {
	race.Skip(t)
	mux, _ := bridgetest.NewMuxOn(t, "udp4", "127.0.0.1:0", bridgetransport.MuxConfig{})
	tc := transport.New(mux)
	peer := transport.New(bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0"))
	defer peer.Close()
	const round = 16
	out := make([]transport.Message, round)
	for i := range out {
		out[i] = transport.Message{Buf: make([]byte, 100), Addr: apOf(mux.LocalAddr())}
	}
	back := make([]transport.Message, round)
	for i := range back {
		back[i] = transport.Message{Buf: make([]byte, 100), Addr: apOf(peer.LocalAddr())}
	}
	ms := newMsgs(round)
	require.NoError(t, tc.SetReadDeadline(time.Now().Add(time.Minute)))
	oneRound := func() {
		_, err := peer.WriteBatch(out)
		require.NoError(t, err)
		for got := 0; got < round; {
			n, err := tc.ReadBatch(ms)
			require.NoError(t, err)
			got += n
		}
		_, err = tc.WriteBatch(back)
		require.NoError(t, err)
	}
	for range 20 {
		oneRound() // warm the pools and the queue's ring
	}
	assert.Zero(t, testing.AllocsPerRun(100, oneRound))
}
