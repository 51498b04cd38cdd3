package transport

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode/internal/testing/stacks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hidden hides a PacketConn's concrete type, forcing the generic path.
type hidden struct{ net.PacketConn }

// apOnly hides *net.UDPConn but keeps its netip.AddrPort methods.
type apOnly struct{ *net.UDPConn }

// kinds builds each flavour of Conn over a fresh socket: a *net.UDPConn
// on each Path (batched says whether the path reads and writes batches,
// as Linux's do), and the two fallbacks for other connections. Every test
// that ranges over kinds runs on each.
var kinds = []struct {
	name    string
	batched bool
	wrap    func(*net.UDPConn) Conn
}{
	{"gso", runtime.GOOS == "linux", onPath(PathBest)},
	{"mmsg", runtime.GOOS == "linux", onPath(PathMmsg)},
	{"plain", false, onPath(PathPlain)},
	{"addrport", false, func(uc *net.UDPConn) Conn { return New(apOnly{uc}) }},
	{"generic", false, func(uc *net.UDPConn) Conn { return New(hidden{uc}) }},
}

// onPath wraps a socket with New on path p.
func onPath(p Path) func(*net.UDPConn) Conn {
	return func(uc *net.UDPConn) Conn {
		defer ForcePath(ForcePath(p))
		return New(uc)
	}
}

// skipWithoutIPv6 skips an IPv6 variant on a machine without an IPv6
// loopback, decided by a plain socket, never by the code under test.
func skipWithoutIPv6(t testing.TB, network string) {
	t.Helper()
	if network != "udp6" {
		return
	}
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on this machine: %v", err)
	}
	pc.Close()
}

func listenUDP(t testing.TB, network, addr string) *net.UDPConn {
	t.Helper()
	skipWithoutIPv6(t, network)
	ua, err := net.ResolveUDPAddr(network, addr)
	require.NoError(t, err)
	uc, err := net.ListenUDP(network, ua)
	require.NoError(t, err)
	return uc
}

func addrOf(_ testing.TB, c Conn) netip.AddrPort {
	ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func newMsgs(n int) []Message {
	ms := make([]Message, n)
	for i := range ms {
		ms[i].Buf = make([]byte, MaxDatagram)
	}
	return ms
}

func TestNewPicksPath(t *testing.T) {
	uc := listenUDP(t, "udp4", "127.0.0.1:0")
	defer uc.Close()
	if runtime.GOOS != "linux" {
		assert.IsType(t, &apConn{}, New(uc))
	}
	assert.IsType(t, &apConn{}, New(apOnly{uc}))
	assert.IsType(t, &genericConn{}, New(hidden{uc}))
}

func TestListenNetworks(t *testing.T) {
	var unknownNetwork net.UnknownNetworkError
	var badAddr *net.AddrError
	for _, tc := range []struct {
		network, addr string
		errAs         any // nil: Listen succeeds; else a pointer to the error type it fails with
	}{
		{"udp4", "127.0.0.1:0", nil},
		{"udp6", "[::1]:0", nil},
		{"udp", ":0", nil},
		{"tcp", "127.0.0.1:0", &unknownNetwork},
		{"udp4", "not an address", &badAddr},
	} {
		t.Run(tc.network+" "+tc.addr, func(t *testing.T) {
			if tc.errAs == nil {
				skipWithoutIPv6(t, tc.network)
			}
			c, err := Listen(tc.network, tc.addr)
			if tc.errAs != nil {
				require.ErrorAs(t, err, tc.errAs)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, c.LocalAddr())
			require.NoError(t, c.Close())
		})
	}
}

// TestBatchRoundtrip sends a batch one way and reads it back in batches,
// checking payloads, order and the sender's address.
func TestBatchRoundtrip(t *testing.T) {
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, k := range kinds {
			t.Run(fam.network+"/"+k.name, func(t *testing.T) {
				a := k.wrap(listenUDP(t, fam.network, fam.addr))
				defer a.Close()
				b := k.wrap(listenUDP(t, fam.network, fam.addr))
				defer b.Close()
				const total = 100
				out := make([]Message, total)
				for i := range out {
					out[i].Buf = make([]byte, 1+i*7)
					for j := range out[i].Buf {
						out[i].Buf[j] = byte(i + j)
					}
					out[i].Addr = addrOf(t, b)
				}
				n, err := a.WriteBatch(out)
				require.NoError(t, err)
				require.Equal(t, total, n)

				in := newMsgs(32)
				got, maxBatch := 0, 0
				require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
				for got < total {
					for i := range in {
						in[i].Buf = in[i].Buf[:cap(in[i].Buf)]
					}
					n, err := b.ReadBatch(in)
					require.NoError(t, err)
					require.Positive(t, n)
					maxBatch = max(maxBatch, n)
					for i := range n {
						assert.Equal(t, out[got].Buf, in[i].Buf, "datagram %d", got)
						assert.Equal(t, addrOf(t, a), in[i].Addr)
						got++
					}
				}
				if k.batched {
					assert.Greater(t, maxBatch, 1, "recvmmsg should return several datagrams at once")
				} else {
					assert.Equal(t, 1, maxBatch)
				}
			})
		}
	}
}

// TestReadUsesCapacity checks a reader's buffer is used to its capacity
// even when the caller left it short.
func TestReadUsesCapacity(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer a.Close()
			b := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer b.Close()
			require.NoError(t, a.WriteTo([]byte("hello, world"), addrOf(t, b)))
			ms := newMsgs(1)
			ms[0].Buf = ms[0].Buf[:0]
			require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
			n, err := b.ReadBatch(ms)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			assert.Equal(t, "hello, world", string(ms[0].Buf))
			// Nothing to read into: not an error.
			n, err = b.ReadBatch(nil)
			assert.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

// TestDualStack checks an IPv6 socket bound to [::] talks to IPv4 peers with
// plain IPv4 addresses both ways.
func TestDualStack(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ua, err := net.ListenUDP("udp", &net.UDPAddr{})
			require.NoError(t, err)
			if ua.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
				ua.Close()
				t.Skip("no dual-stack socket")
			}
			srv := k.wrap(ua)
			defer srv.Close()
			cli := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer cli.Close()
			srvAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addrOf(t, srv).Port())

			require.NoError(t, cli.WriteTo([]byte("ping"), srvAddr))
			ms := newMsgs(4)
			require.NoError(t, srv.SetReadDeadline(time.Now().Add(5*time.Second)))
			n, err := srv.ReadBatch(ms)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			from := ms[0].Addr
			assert.True(t, from.Addr().Is4(), "address %v should be unmapped", from)
			assert.Equal(t, addrOf(t, cli), from)

			// Reply to the plain IPv4 address, and to its mapped form.
			require.NoError(t, srv.WriteTo([]byte("pong"), from))
			mapped := netip.AddrPortFrom(netip.AddrFrom16(from.Addr().As16()), from.Port())
			n, err = srv.WriteBatch([]Message{{Buf: []byte("pong2"), Addr: mapped}})
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.NoError(t, cli.SetReadDeadline(time.Now().Add(5*time.Second)))
			for _, want := range []string{"pong", "pong2"} {
				ms[0].Buf = ms[0].Buf[:cap(ms[0].Buf)]
				n, err = cli.ReadBatch(ms[:1])
				require.NoError(t, err)
				require.Equal(t, 1, n)
				assert.Equal(t, want, string(ms[0].Buf))
				assert.Equal(t, srvAddr, ms[0].Addr)
			}
		})
	}
}

// TestIPv4SocketAddresses checks an IPv4 socket accepts IPv4-mapped
// destinations and refuses IPv6 ones, reporting which message failed.
func TestIPv4SocketAddresses(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer a.Close()
			b := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer b.Close()
			dst := addrOf(t, b)
			mapped := netip.AddrPortFrom(netip.AddrFrom16(dst.Addr().As16()), dst.Port())
			require.NoError(t, a.WriteTo([]byte("mapped"), mapped))

			// Unusable destinations fail as package net fails them: a
			// *net.OpError of the write, naming the destination.
			v6 := netip.MustParseAddrPort("[2001:db8::1]:9")
			writeErr := func(err error, to string) {
				t.Helper()
				var oe *net.OpError
				require.ErrorAs(t, err, &oe)
				assert.Equal(t, "write", oe.Op)
				if to != "" {
					assert.ErrorContains(t, err, to)
				}
			}
			writeErr(a.WriteTo([]byte("x"), v6), "[2001:db8::1]:9")
			writeErr(a.WriteTo([]byte("x"), netip.AddrPort{}), "")
			n, err := a.WriteBatch([]Message{
				{Buf: []byte("one"), Addr: dst},
				{Buf: []byte("bad"), Addr: v6},
				{Buf: []byte("two"), Addr: dst},
			})
			writeErr(err, "[2001:db8::1]:9")
			assert.Equal(t, 1, n)

			ms := newMsgs(1)
			require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
			for _, want := range []string{"mapped", "one"} {
				ms[0].Buf = ms[0].Buf[:cap(ms[0].Buf)]
				n, err := b.ReadBatch(ms)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				assert.Equal(t, want, string(ms[0].Buf))
			}
		})
	}
}

func TestReadDeadline(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer c.Close()
			ms := newMsgs(8)

			// Already expired.
			require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
			_, err := c.ReadBatch(ms)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)

			// Expires while blocked.
			start := time.Now()
			require.NoError(t, c.SetReadDeadline(start.Add(50*time.Millisecond)))
			_, err = c.ReadBatch(ms)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.True(t, ne.Timeout())
			assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)

			// Cleared: a datagram is read again.
			require.NoError(t, c.SetReadDeadline(time.Time{}))
			require.NoError(t, c.WriteTo([]byte("x"), addrOf(t, c)))
			n, err := c.ReadBatch(ms)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
}

func TestCloseUnblocksReader(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			done := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch(newMsgs(8))
				done <- err
			}()
			// Close is tested against a reader parked in the poller.
			require.Eventually(t, func() bool { return stacks.Blocked("IO wait", "transport.TestCloseUnblocksReader") },
				10*time.Second, time.Millisecond, "the reader never blocked")
			require.NoError(t, c.Close())
			select {
			case err := <-done:
				assert.ErrorIs(t, err, net.ErrClosed)
			case <-time.After(5 * time.Second):
				t.Fatal("ReadBatch still blocked after Close")
			}
			_, err := c.ReadBatch(newMsgs(1))
			assert.ErrorIs(t, err, net.ErrClosed)
			assert.ErrorIs(t, c.WriteTo([]byte("x"), netip.MustParseAddrPort("127.0.0.1:9")), net.ErrClosed)
			n, err := c.WriteBatch([]Message{{Buf: []byte("x"), Addr: netip.MustParseAddrPort("127.0.0.1:9")}})
			assert.ErrorIs(t, err, net.ErrClosed)
			assert.Zero(t, n)
		})
	}
}

// TestConcurrentWriters runs several writers (WriteTo and WriteBatch) at
// once against one reader; run with -race.
func TestConcurrentWriters(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			rc := listenUDP(t, "udp4", "127.0.0.1:0")
			SetBuffers(rc, socketBuffer)
			r := k.wrap(rc)
			defer r.Close()
			w := k.wrap(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer w.Close()
			dst := addrOf(t, r)
			const writers, each = 8, 200

			seen := make(map[uint32]bool)
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				ms := newMsgs(16)
				for len(seen) < writers*each {
					for i := range ms {
						ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
					}
					_ = r.SetReadDeadline(time.Now().Add(time.Second))
					n, err := r.ReadBatch(ms)
					if err != nil {
						return // deadline: whatever was lost is lost
					}
					for i := range n {
						if assert.Len(t, ms[i].Buf, 8) {
							id := binary.BigEndian.Uint32(ms[i].Buf)
							assert.Equal(t, ^id, binary.BigEndian.Uint32(ms[i].Buf[4:]))
							assert.False(t, seen[id], "duplicate %d", id)
							seen[id] = true
						}
					}
				}
			}()

			var wg sync.WaitGroup
			for g := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := make([]Message, 10)
					for i := 0; i < each; i += len(batch) {
						for j := range batch {
							id := uint32(g*each + i + j)
							b := make([]byte, 8)
							binary.BigEndian.PutUint32(b, id)
							binary.BigEndian.PutUint32(b[4:], ^id)
							batch[j] = Message{Buf: b, Addr: dst}
						}
						if g%2 == 0 {
							n, err := w.WriteBatch(batch)
							assert.NoError(t, err)
							assert.Equal(t, len(batch), n)
						} else {
							for _, m := range batch {
								assert.NoError(t, w.WriteTo(m.Buf, m.Addr))
							}
						}
						if i%50 == 0 {
							time.Sleep(time.Millisecond) // let the reader keep up
						}
					}
				}()
			}
			wg.Wait()
			<-readDone
			// Loopback with large buffers should lose nothing; allow a
			// little for a loaded machine.
			assert.GreaterOrEqual(t, len(seen), writers*each*95/100)
		})
	}
}

func TestAddrPortOf(t *testing.T) {
	for _, tc := range []struct {
		in   net.Addr
		want netip.AddrPort
	}{
		{nil, netip.AddrPort{}},
		{&net.UDPAddr{IP: net.ParseIP("10.0.0.1"), Port: 5}, netip.MustParseAddrPort("10.0.0.1:5")},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 5}, netip.MustParseAddrPort("10.0.0.1:5")},
		{&net.UDPAddr{IP: net.ParseIP("::1"), Port: 7}, netip.MustParseAddrPort("[::1]:7")},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.2"), Port: 6}, netip.MustParseAddrPort("10.0.0.2:6")},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unixgram"}, netip.AddrPort{}},
		{strAddr("[::ffff:1.2.3.4]:80"), netip.MustParseAddrPort("1.2.3.4:80")},
	} {
		assert.Equal(t, tc.want, AddrPortOf(tc.in), "%v", tc.in)
	}
}

type strAddr string

func (s strAddr) Network() string { return "str" }
func (s strAddr) String() string  { return string(s) }

func TestErrorsAreNetErrors(t *testing.T) {
	c := New(listenUDP(t, "udp4", "127.0.0.1:0"))
	require.NoError(t, c.Close())
	_, err := c.ReadBatch(newMsgs(1))
	var oe *net.OpError
	require.True(t, errors.As(err, &oe))
	assert.Equal(t, "read", oe.Op)
}

func TestNetworkFor(t *testing.T) {
	v4 := netip.MustParseAddrPort("192.0.2.1:1")
	mapped := netip.MustParseAddrPort("[::ffff:192.0.2.1]:1")
	v6 := netip.MustParseAddrPort("[2001:db8::1]:1")
	tests := []struct {
		addrs []netip.AddrPort
		want  string
	}{
		{[]netip.AddrPort{v4}, "udp4"},
		{[]netip.AddrPort{v4, mapped}, "udp4"},
		{[]netip.AddrPort{v6}, "udp6"},
		{[]netip.AddrPort{v4, v6}, "udp"},
	}
	for _, tt := range tests {
		if got := NetworkFor(tt.addrs); got != tt.want {
			t.Errorf("NetworkFor(%v) = %s, want %s", tt.addrs, got, tt.want)
		}
	}
}
