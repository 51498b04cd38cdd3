package transport

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestConnect, over real UDP, IPv4, IPv6 and a dual-stack socket with an
// IPv4 peer, on every path: Connect connects the recvmmsg/sendmmsg paths'
// socket and not the plain path's; afterwards single writes and batches
// (GSO trains on PathBest) to the peer, which leave without a destination
// (their headers name none), and writes to another address all arrive, from the socket's address.
func TestConnect(t *testing.T) {
	for _, p := range Paths {
		for _, tc := range []struct {
			name, network, addr, peer string
		}{
			{"ipv4", "udp4", "127.0.0.1:0", "127.0.0.1:0"},
			{"ipv6", "udp6", "[::1]:0", "[::1]:0"},
			{"dual-stack", "udp", ":0", "127.0.0.1:0"},
		} {
			t.Run(fmt.Sprint(p, "/", tc.name), func(t *testing.T) {
				defer ForcePath(ForcePath(p))
				network := "udp4"
				if tc.network == "udp6" {
					network = "udp6"
				}
				tx := New(listenUDP(t, tc.network, tc.addr))
				defer tx.Close()
				peer, other := New(listenUDP(t, network, tc.peer)), New(listenUDP(t, network, tc.peer))
				defer peer.Close()
				defer other.Close()
				require.Equal(t, p != PathPlain, Connect(tx, addrOf(t, peer)))
				from := netip.AddrPortFrom(addrOf(t, peer).Addr(), addrOf(t, tx).Port())

				require.NoError(t, tx.WriteTo([]byte("one"), addrOf(t, peer)))
				batch := make([]Message, 5)
				for i := range batch {
					batch[i] = Message{Buf: []byte(fmt.Sprint("batch ", i)), Addr: addrOf(t, peer)}
				}
				n, err := tx.WriteBatch(batch)
				require.NoError(t, err)
				require.Equal(t, len(batch), n)
				require.NoError(t, tx.WriteTo([]byte("elsewhere"), addrOf(t, other)))
				if mc, ok := tx.(*mmsgConn); ok {
					// The peer's headers carry no destination; another's do.
					b := newWriteBatch()
					require.Equal(t, 2, mc.plan(b, []Message{batch[0], {Buf: []byte("x"), Addr: addrOf(t, other)}}, false))
					assert.Zero(t, b.hdrs[0].Hdr.Namelen, "to the peer")
					assert.NotZero(t, b.hdrs[1].Hdr.Namelen, "to another")
				}

				want := []string{"one", "batch 0", "batch 1", "batch 2", "batch 3", "batch 4"}
				assert.Equal(t, want, receive(t, peer, len(want), from))
				assert.Equal(t, []string{"elsewhere"}, receive(t, other, 1, from))
			})
		}
	}
}

// receive reads n datagrams from c, each from the address from.
func receive(t *testing.T, c Conn, n int, from netip.AddrPort) []string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	var got []string
	ms := newMsgs(8)
	for len(got) < n {
		for i := range ms {
			ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
		}
		k, err := c.ReadBatch(ms)
		require.NoError(t, err)
		for _, m := range ms[:k] {
			assert.Equal(t, from, m.Addr)
			got = append(got, string(m.Buf))
		}
	}
	return got
}

// BenchmarkOneTrip sends one datagram and reads it (a read of one
// message) on the recvmmsg/sendmmsg path, as a dialed Conn's lone pulls
// do; connected, the sender's socket is connected to the receiver
// (Connect). Run each case in a process of its own
// (-bench 'OneTrip/^connected'): the second case of one process costs
// more CPU than the same case run first.
func BenchmarkOneTrip(b *testing.B) {
	for _, connected := range []bool{false, true} {
		name := "unconnected"
		if connected {
			name = "connected"
		}
		b.Run(name, func(b *testing.B) {
			tx, rx := benchPair(b, func(uc *net.UDPConn) Conn { return New(uc) })
			if connected && !Connect(tx, addrOfB(rx)) {
				b.Fatal("Connect did not connect")
			}
			p, dst := make([]byte, 100), addrOfB(rx)
			in := newMsgs(1)
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if err := tx.WriteTo(p, dst); err != nil {
					b.Fatal(err)
				}
				in[0].Buf = in[0].Buf[:cap(in[0].Buf)]
				if n, err := rx.ReadBatch(in); n != 1 || err != nil {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's CPU time so far (user and system), in
// nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
