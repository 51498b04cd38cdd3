package netsim

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func listen(t *testing.T, n *Network, addr netip.AddrPort) *Conn {
	t.Helper()
	pc, err := n.Listen(addr)
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	return pc.(*Conn)
}

func udp(ap netip.AddrPort) *net.UDPAddr { return net.UDPAddrFromAddrPort(ap) }

func TestRealtimeRoundtrip(t *testing.T) {
	n := New(1, Config{Latency: 20 * time.Millisecond})
	defer n.Close()
	ca, cb := listen(t, n, a), listen(t, n, b)
	assert.Equal(t, udp(a), ca.LocalAddr())

	start := time.Now()
	k, err := ca.WriteTo([]byte("ping"), udp(b))
	require.NoError(t, err)
	assert.Equal(t, 4, k)

	buf := make([]byte, 100)
	require.NoError(t, cb.SetReadDeadline(time.Now().Add(5*time.Second)))
	k, from, err := cb.ReadFrom(buf)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "latency applies")
	assert.Equal(t, "ping", string(buf[:k]))
	assert.Equal(t, udp(a), from)

	_, err = cb.WriteTo([]byte("pong"), from)
	require.NoError(t, err)
	require.NoError(t, ca.SetReadDeadline(time.Now().Add(5*time.Second)))
	k, fromAP, err := ca.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	assert.Equal(t, "pong", string(buf[:k]))
	assert.Equal(t, b, fromAP)

	// The scheduler counts a delivery just after handing the datagram over,
	// so the reader can be first: wait for the count.
	require.Eventually(t, func() bool { return n.Stats().Delivered == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, uint64(2), n.Stats().Sent)
}

func TestRealtimeOrderAndTruncation(t *testing.T) {
	n := New(1, Config{Latency: 5 * time.Millisecond})
	defer n.Close()
	ca, cb := listen(t, n, a), listen(t, n, b)
	for i := range 50 {
		_, err := ca.WriteToUDPAddrPort([]byte{byte(i), 1, 2, 3}, b)
		require.NoError(t, err)
	}
	require.NoError(t, cb.SetDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 2)
	for i := range 50 {
		k, _, err := cb.ReadFromUDPAddrPort(buf)
		require.NoError(t, err)
		assert.Equal(t, 2, k, "truncated to the buffer")
		assert.Equal(t, byte(i), buf[0])
	}
}

// TestRealtimeDeadlines runs in a synctest bubble: the deadlines are
// exact, and synctest.Wait is the moment the scheduler has delivered.
func TestRealtimeDeadlines(t *testing.T) {
	synctest.Test(t, testRealtimeDeadlines)
}

func testRealtimeDeadlines(t *testing.T) {
	n := New(1, Config{Loss: 1})
	defer n.Close()
	ca, cb := listen(t, n, a), listen(t, n, b)
	_, err := ca.WriteTo([]byte("lost"), udp(b))
	require.NoError(t, err)

	buf := make([]byte, 10)
	start := time.Now()
	require.NoError(t, cb.SetReadDeadline(start.Add(50*time.Millisecond)))
	_, _, err = cb.ReadFrom(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	assert.Equal(t, 50*time.Millisecond, time.Since(start), "the read ends at its deadline")

	// Past deadline: at once, even with data waiting.
	n.SetLink(a, b, Config{})
	_, err = ca.WriteTo([]byte("x"), udp(b))
	require.NoError(t, err)
	synctest.Wait() // the scheduler has delivered it
	require.NoError(t, cb.SetReadDeadline(time.Now().Add(-time.Second)))
	_, _, err = cb.ReadFrom(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	// Cleared: the datagram is there.
	require.NoError(t, cb.SetReadDeadline(time.Time{}))
	k, _, err := cb.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "x", string(buf[:k]))

	// Write deadline.
	require.NoError(t, ca.SetWriteDeadline(time.Now().Add(-time.Second)))
	_, err = ca.WriteTo([]byte("x"), udp(b))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, ca.SetWriteDeadline(time.Time{}))
	_, err = ca.WriteTo([]byte("x"), udp(b))
	require.NoError(t, err)
}

// TestRealtimeClose runs in a synctest bubble, where synctest.Wait returns
// once the reader is blocked: Close is tested against a blocked read.
func TestRealtimeClose(t *testing.T) {
	synctest.Test(t, testRealtimeClose)
}

func testRealtimeClose(t *testing.T) {
	n := New(1, Config{})
	defer n.Close()
	ca := listen(t, n, a)
	done := make(chan error, 1)
	go func() {
		_, _, err := ca.ReadFrom(make([]byte, 10))
		done <- err
	}()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("read returned %v before Close", err)
	default:
	}
	require.NoError(t, ca.Close())
	assert.ErrorIs(t, <-done, net.ErrClosed)
	assert.ErrorIs(t, ca.Close(), net.ErrClosed)
	_, err := ca.WriteTo([]byte("x"), udp(b))
	assert.ErrorIs(t, err, net.ErrClosed)
	_, _, err = ca.ReadFrom(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed)

	// The address is free again.
	again := listen(t, n, a)
	assert.Equal(t, udp(a), again.LocalAddr())
}

func TestRealtimeListen(t *testing.T) {
	n := New(1, Config{})
	defer n.Close()
	listen(t, n, a)
	_, err := n.Listen(a)
	assert.ErrorIs(t, err, errAddrInUse)
	_, err = n.Listen(netip.AddrPort{})
	assert.ErrorIs(t, err, errInvalidAddr)

	// Port 0 picks distinct ports.
	p1 := listen(t, n, netip.MustParseAddrPort("10.0.0.9:0"))
	p2 := listen(t, n, netip.MustParseAddrPort("10.0.0.9:0"))
	assert.NotZero(t, p1.LocalAddr().(*net.UDPAddr).Port)
	assert.NotEqual(t, p1.LocalAddr(), p2.LocalAddr())

	// Mapped addresses are unmapped.
	m := listen(t, n, netip.MustParseAddrPort("[::ffff:10.0.0.7]:7"))
	assert.Equal(t, "10.0.0.7:7", m.LocalAddr().String())

	// An unspecified address receives for its port.
	any6 := listen(t, n, netip.MustParseAddrPort("[::]:4000"))
	ca := listen(t, n, c6)
	_, err = ca.WriteToUDPAddrPort([]byte("hi"), netip.MustParseAddrPort("[fd00::9]:4000"))
	require.NoError(t, err)
	require.NoError(t, any6.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 10)
	k, from, err := any6.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	assert.Equal(t, "hi", string(buf[:k]))
	assert.Equal(t, c6, from)

	// Bad writes.
	_, err = ca.WriteTo([]byte("x"), nil)
	assert.ErrorIs(t, err, errInvalidAddr)
	_, err = ca.WriteTo(make([]byte, maxDatagram+1), udp(b))
	assert.ErrorIs(t, err, syscall.EMSGSIZE)
}

func TestRealtimeNoReceiverDrops(t *testing.T) {
	n := New(1, Config{})
	defer n.Close()
	ca := listen(t, n, a)
	_, err := ca.WriteTo([]byte("void"), udp(b))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.Stats().Dropped == 1 }, 5*time.Second, time.Millisecond)
}

func TestRealtimeQueueFull(t *testing.T) {
	n := New(1, Config{})
	defer n.Close()
	ca, cb := listen(t, n, a), listen(t, n, b)
	for range recvQueue + 10 {
		_, err := ca.WriteToUDPAddrPort([]byte("x"), b)
		require.NoError(t, err)
	}
	// The scheduler takes packets off the queue before it counts them:
	// wait for the counts, not for an empty queue.
	require.Eventually(t, func() bool {
		s := n.Stats()
		return s.Delivered+s.Dropped == recvQueue+10
	}, 5*time.Second, time.Millisecond)
	s := n.Stats()
	assert.Equal(t, uint64(recvQueue), s.Delivered)
	assert.Equal(t, uint64(10), s.Dropped)
	_ = cb
}

func TestRealtimeNetworkClose(t *testing.T) {
	n := New(1, Config{Latency: time.Hour})
	ca, err := n.Listen(a)
	require.NoError(t, err)
	_, err = ca.WriteTo([]byte("later"), udp(b))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, _, err := ca.ReadFrom(make([]byte, 10))
		done <- err
	}()
	require.NoError(t, n.Close())
	assert.ErrorIs(t, <-done, net.ErrClosed)
	require.NoError(t, n.Close(), "Close twice")
	_, err = n.Listen(b)
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.Equal(t, 1, n.InFlight())
}

func TestRealtimeConcurrent(t *testing.T) {
	n := New(1, Config{Latency: time.Millisecond, Jitter: time.Millisecond})
	defer n.Close()
	srv := listen(t, n, a)
	const clients, each = 8, 100
	var wg sync.WaitGroup
	// Echo server.
	go func() {
		buf := make([]byte, 100)
		for {
			k, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	for i := range clients {
		c := listen(t, n, netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(5000+i)))
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := c.WriteToUDPAddrPort([]byte{byte(i), byte(j)}, a)
				assert.NoError(t, err)
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, 10)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for range each {
				k, from, err := c.ReadFromUDPAddrPort(buf)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, a, from)
				assert.Equal(t, 2, k)
				assert.Equal(t, byte(i), buf[0])
			}
		}()
	}
	wg.Wait()
}

// TestTransportOverNetsim runs package transport's batched API over a
// netsim connection, as the root package's tests do.
func TestTransportOverNetsim(t *testing.T) {
	n := New(1, Config{Latency: time.Millisecond})
	defer n.Close()
	ta := transport.New(listen(t, n, a))
	tb := transport.New(listen(t, n, b))
	out := []transport.Message{{Buf: []byte("one"), Addr: b}, {Buf: []byte("two"), Addr: b}}
	k, err := ta.WriteBatch(out)
	require.NoError(t, err)
	require.Equal(t, 2, k)
	ms := make([]transport.Message, 4)
	for i := range ms {
		ms[i].Buf = make([]byte, 0, transport.MaxDatagram)
	}
	require.NoError(t, tb.SetReadDeadline(time.Now().Add(5*time.Second)))
	for _, want := range []string{"one", "two"} {
		k, err := tb.ReadBatch(ms)
		require.NoError(t, err)
		require.Equal(t, 1, k)
		assert.Equal(t, want, string(ms[0].Buf))
		assert.Equal(t, a, ms[0].Addr)
	}
	require.NoError(t, tb.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err = tb.ReadBatch(ms)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, tb.Close())
	_, err = tb.ReadBatch(ms)
	assert.True(t, errors.Is(err, net.ErrClosed))
}

// TestRealtimeLargestDatagram: a datagram of maxDatagram bytes arrives
// whole; one byte more is refused at the sender, as by a link's MTU.
func TestRealtimeLargestDatagram(t *testing.T) {
	n := New(1, Config{})
	defer n.Close()
	ca, cb := listen(t, n, a), listen(t, n, b)
	p := make([]byte, maxDatagram)
	for i := range p {
		p[i] = byte(i)
	}
	k, err := ca.WriteToUDPAddrPort(p, b)
	require.NoError(t, err)
	require.Equal(t, maxDatagram, k)
	_, err = ca.WriteToUDPAddrPort(make([]byte, maxDatagram+1), b)
	require.ErrorIs(t, err, syscall.EMSGSIZE)
	require.NoError(t, cb.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, maxDatagram+10)
	k, from, err := cb.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	assert.Equal(t, p, buf[:k])
	assert.Equal(t, a, from)
}
