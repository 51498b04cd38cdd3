package reliable

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// memConn is one end of an in-memory datagram link, for tests in a
// synctest bubble and for allocation counts: Write copies into a buffer
// from a shared free list and drops the datagram when the peer's queue is
// full, as UDP would.
type memConn struct {
	in, out   chan []byte
	free      chan []byte
	closed    chan struct{}
	closeOnce sync.Once
	local     net.Addr
	remote    net.Addr
}

func memPair() (*memConn, *memConn) {
	ab, ba := make(chan []byte, 256), make(chan []byte, 256)
	free := make(chan []byte, 1024)
	aa := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:1"))
	ba2 := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:2"))
	a := &memConn{in: ba, out: ab, free: free, closed: make(chan struct{}), local: aa, remote: ba2}
	b := &memConn{in: ab, out: ba, free: free, closed: make(chan struct{}), local: ba2, remote: aa}
	return a, b
}

func (c *memConn) Read(b []byte) (int, error) {
	select {
	case p := <-c.in:
		n := copy(b, p)
		select {
		case c.free <- p[:0]:
		default:
		}
		return n, nil
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *memConn) Write(b []byte) (int, error) {
	var p []byte
	select {
	case p = <-c.free:
	default:
		p = make([]byte, 0, 1500)
	}
	p = append(p, b...)
	select {
	case c.out <- p:
	default:
	}
	return len(b), nil
}

func (c *memConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}
func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

// TestIdleSessionWakesOnlyWhenDue shows that a Session costs wake-ups only
// for its protocol's own due times: after some traffic, the acks, the
// keep-alive of windows while the connection was active (idleActive /
// idleAck of them) and the trims of buffers; then none at all, however
// long it stays idle. A ticker would have woken it 100 times a second.
func TestIdleSessionWakesOnlyWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := memPair()
		defer a.Close() // on a failure, so that the bubble ends
		defer b.Close()
		cfg := &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered}, {Kind: Unreliable}}}
		sa, err := NewSession(a, cfg)
		require.NoError(t, err)
		sb, err := NewSession(b, cfg)
		require.NoError(t, err)
		msg, buf := make([]byte, 3000), make([]byte, 4000)
		for i := range 10 {
			require.NoError(t, sa.Channel(0).Send(msg))
			require.NoError(t, sa.Channel(1).Send(msg[:100]))
			_, err := sb.Channel(0).Receive(buf)
			require.NoError(t, err, "message %d", i)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		wa, wb := sa.cn.wakes.Load(), sb.cn.wakes.Load()
		// The bound: every idle ack while active, a few trims, acks and
		// resends; far from the 6,000 of a 10 ms ticker.
		bound := uint64(idleActive/idleAck) + 20
		require.LessOrEqual(t, wa, bound)
		require.LessOrEqual(t, wb, bound)
		require.NotZero(t, wa+wb, "no wake-up at all: the count does not count")

		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, wa, sa.cn.wakes.Load(), "an idle session woke")
		require.Equal(t, wb, sb.cn.wakes.Load(), "an idle session woke")

		// And it still works, woken by traffic alone.
		require.NoError(t, sb.Channel(0).Send(msg))
		_, err = sa.Channel(0).Receive(buf)
		require.NoError(t, err)
		closeBoth(t, sa, sb)
	})
}

// TestSessionAllocs shows that a Session over a message connection makes
// no allocation per message in steady state: the send, the datagrams
// written after the lock, the receive, the acks.
func TestSessionAllocs(t *testing.T) {
	a, b := memPair()
	cfg := &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered}}}
	sa, err := NewSession(a, cfg)
	require.NoError(t, err)
	sb, err := NewSession(b, cfg)
	require.NoError(t, err)
	defer closeBoth(t, sa, sb)
	msg, buf := make([]byte, 200), make([]byte, 400)
	step := func() {
		if err := sa.Channel(0).Send(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Channel(0).Receive(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 2000 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n > 0 {
		t.Errorf("%v allocations per message", n)
	}
}

// stuckConn is a message connection whose Writes, once stuck is set,
// block until release is closed, telling entered.
type stuckConn struct {
	*memConn
	stuck   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (c *stuckConn) Write(b []byte) (int, error) {
	if c.stuck.Load() {
		signal(c.entered)
		<-c.release
	}
	return c.memConn.Write(b)
}

// TestWriteQueueBound shows that a writer stuck in a Write does not make
// the datagrams of others pile up without bound: unreliable Sends from
// other goroutines, which never block, keep going, and what is past the
// bound is dropped.
func TestWriteQueueBound(t *testing.T) {
	a, b := memPair()
	sa := &stuckConn{memConn: a, entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := &Config{Channels: []ChannelConfig{{Kind: Unreliable}}}
	s, err := NewSession(sa, cfg)
	require.NoError(t, err)
	peer, err := NewSession(b, cfg)
	require.NoError(t, err)
	msg := make([]byte, 1000)
	sa.stuck.Store(true)
	done := make(chan error, 1)
	go func() { done <- s.Channel(0).Send(msg) }() // becomes the writer, and sticks
	<-sa.entered
	for range 20 * maxWriteQueue {
		if err := s.Channel(0).Send(msg); err != nil {
			require.ErrorIs(t, err, ErrSendQueueFull)
		}
	}
	s.cn.wmu.Lock()
	queued := len(s.cn.wq.ends)
	s.cn.wmu.Unlock()
	require.LessOrEqual(t, queued, maxWriteQueue+maxBurstPackets, "datagrams waiting for the stuck writer")
	require.Positive(t, queued, "the Sends queued nothing: the test tests nothing")
	sa.stuck.Store(false)
	close(sa.release)
	require.NoError(t, <-done)
	closeBoth(t, s, peer)
}
