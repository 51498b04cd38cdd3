package sendq

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroup: a batch comes out with each destination's datagrams side by
// side, destinations in the order they first appear, each one's datagrams
// in their order; a batch whose destinations are all distinct comes out
// as it went in.
func TestGroup(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.1:1")
	b := netip.MustParseAddrPort("10.0.0.1:2")
	c := netip.MustParseAddrPort("[fe80::1%lo]:1")
	d := netip.MustParseAddrPort("[fe80::1]:1") // differs from c by its zone alone
	for _, tc := range []struct {
		in   []netip.AddrPort
		want []int // indexes into in
	}{
		{[]netip.AddrPort{a}, []int{0}},
		{[]netip.AddrPort{a, b, c, d}, []int{0, 1, 2, 3}},
		{[]netip.AddrPort{a, b, a, b, a}, []int{0, 2, 4, 1, 3}},
		{[]netip.AddrPort{c, d, c, a, d}, []int{0, 2, 1, 4, 3}},
	} {
		var g grouper
		for round := range 3 { // the table is reused batch after batch
			msgs := make([]transport.Message, len(tc.in))
			for i, ap := range tc.in {
				msgs[i] = transport.Message{Buf: []byte{byte(i)}, Addr: ap}
			}
			out := g.group(msgs)
			var got []int
			for _, m := range out {
				got = append(got, int(m.Buf[0]))
			}
			assert.Equal(t, tc.want, got, "%v, round %d", tc.in, round)
		}
	}

	// A full batch of distinct destinations, then one of two.
	var g grouper
	msgs := make([]transport.Message, Len)
	for i := range msgs {
		msgs[i] = transport.Message{Buf: []byte{byte(i)}, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 9)}
	}
	out := g.group(msgs)
	require.Equal(t, &msgs[0], &out[0], "nothing to group: the batch itself")
	for i := range msgs {
		msgs[i].Addr = []netip.AddrPort{a, b}[i%2]
	}
	out = g.group(msgs)
	for i := range out {
		want := 2*i + 0
		if i >= Len/2 {
			want = 2*(i-Len/2) + 1
		}
		require.Equal(t, byte(want), out[i].Buf[0], "position %d", i)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { g.group(msgs) }))
}

// TestQueueOverUDP: senders to several destinations through one Queue
// over a real socket, IPv4 and IPv6, on each of the transport's paths
// (trains grouped by destination on the GSO one), batching (Burst: the
// sends of every sender leave together, sendmmsg to several
// destinations) where the path sends batches: every receiver gets every
// datagram meant for it, each sender's in order.
func TestQueueOverUDP(t *testing.T) {
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, p := range transport.Paths {
			t.Run(fmt.Sprint(fam.network, "/", p), func(t *testing.T) {
				listen := func() transport.Conn {
					uc, err := transport.ListenUDP(fam.network, fam.addr, 0, nil) // large buffers: nobody reads until the end
					if err != nil && fam.network == "udp6" {
						t.Skipf("no IPv6 loopback: %v", err)
					}
					require.NoError(t, err)
					defer transport.ForcePath(transport.ForcePath(p))
					return transport.New(uc)
				}
				tx := listen()
				defer tx.Close()
				q := newQueue(tx)
				require.Equal(t, runtime.GOOS == "linux" && p != transport.PathPlain, q.canBatch, "batching where the path sends a batch in one system call")
				q.Burst()
				const dests, senders, each = 3, 4, 200
				var rx [dests]transport.Conn
				for i := range rx {
					rx[i] = listen()
					defer rx[i].Close()
				}
				var wg sync.WaitGroup
				for s := range senders {
					to := transport.AddrPortOf(rx[s%dests].LocalAddr())
					wg.Go(func() {
						for i := range each {
							if i%50 == 0 {
								q.Burst() // as a reader that took several datagrams
							}
							require.NoError(t, sendOne(q, to, datagram(s, i)))
						}
					})
				}
				wg.Wait()
				q.Close()
				for d, r := range rx {
					want := 0
					next := map[uint32]uint32{}
					for s := range senders {
						if s%dests == d {
							want += each
							next[uint32(s)] = 0
						}
					}
					require.NoError(t, r.SetReadDeadline(time.Now().Add(5*time.Second)))
					in := make([]transport.Message, 16)
					for i := range in {
						in[i].Buf = make([]byte, transport.MaxDatagram)
					}
					got := 0
					for got < want {
						n, err := r.ReadBatch(in)
						require.NoError(t, err, "receiver %d: %d of %d", d, got, want)
						for _, m := range in[:n] {
							s, i := leUint32(m.Buf[1:]), leUint32(m.Buf[5:])
							n, ok := next[s]
							require.True(t, ok, "sender %d's datagram at receiver %d", s, d)
							require.GreaterOrEqual(t, i, n, "sender %d out of order", s)
							next[s] = i + 1
							got++
						}
					}
				}
			})
		}
	}
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
