package netcode_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keepAliveInterval is the protocol's: a keep-alive after 100 ms without
// a packet sent.
const keepAliveInterval = 100 * time.Millisecond

// keepAliveLog is a Listener's socket that notes when it sends each
// keep-alive.
type keepAliveLog struct {
	net.PacketConn
	mu    sync.Mutex
	times []time.Time
}

func (k *keepAliveLog) WriteTo(b []byte, addr net.Addr) (int, error) {
	if t, ok := protocol.PeekType(b); ok && t == protocol.KeepAlive {
		k.mu.Lock()
		k.times = append(k.times, time.Now())
		k.mu.Unlock()
	}
	return k.PacketConn.WriteTo(b, addr)
}

func (k *keepAliveLog) take() []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.times
	k.times = nil
	return t
}

// TestListenerKeepAliveTiming runs a Listener and an idle client on
// simulated time (a synctest bubble over netsim): the Listener sleeps
// until a keep-alive is due instead of ticking, yet every keep-alive goes
// 100 ms to 100 ms + TickInterval after the one before, from the first
// one after the handshake (the new client wakes the sleeping ticker) to
// the last; the client, whose timeout is a second, stays connected.
func TestListenerKeepAliveTiming(t *testing.T) {
	for _, tick := range []time.Duration{0, time.Millisecond, 25 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testKeepAliveTiming(t, tick) })
		})
	}
}

func testKeepAliveTiming(t *testing.T, tick time.Duration) {
	nw := netsim.New(1, netsim.Config{})
	defer nw.Close()
	srvAddr := netip.MustParseAddrPort("10.20.0.1:40000")
	pc, err := nw.Listen(srvAddr)
	require.NoError(t, err)
	sock := &keepAliveLog{PacketConn: pc}
	l, err := netcode.NewListener(sock, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, TickInterval: tick})
	require.NoError(t, err)
	defer l.Close()

	// Let the idle Listener fall asleep until its once-a-second sweep.
	time.Sleep(300 * time.Millisecond)
	d := &netcode.Dialer{ListenPacket: func(_ context.Context, _, _ string) (net.PacketConn, error) {
		return nw.Listen(netip.MustParseAddrPort("10.20.0.2:5000"))
	}}
	cli, srv := dialWith(t, d, l, mint(t, net.UDPAddrFromAddrPort(srvAddr), withTimeout(1)))
	sock.take()
	connected := time.Now()

	require.NoError(t, cli.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = cli.Read(make([]byte, 8))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "connected for 5 s of silence with a 1 s timeout")
	send(t, cli, srv, []byte("still connected"))

	if tick == 0 {
		tick = 10 * time.Millisecond
	}
	kas := sock.take()
	// One less than the most the gaps allow: the keep-alive due at the
	// very end may go after the Read's deadline woke this goroutine.
	require.GreaterOrEqual(t, len(kas), int(5*time.Second/(keepAliveInterval+tick))-1)
	prev := connected
	for i, at := range kas {
		if at.After(connected.Add(5 * time.Second)) {
			break // after the payloads above
		}
		gap := at.Sub(prev)
		if i > 0 {
			assert.GreaterOrEqual(t, gap, keepAliveInterval, "keep-alive %d", i)
		}
		assert.LessOrEqual(t, gap, keepAliveInterval+tick, "keep-alive %d", i)
		prev = at
	}
	assert.Zero(t, l.Stats().ConnectionsTimeout)
}

// TestListenerIdleClientStaysConnected: over real UDP, a client that sends
// nothing for 2.5 times its timeout stays connected: the Listener,
// sleeping until something is due, sends its keep-alives.
func TestListenerIdleClientStaysConnected(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withTimeout(1))
			_, err := readWithin(t, cli, 2500*time.Millisecond)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing ended the connection")
			send(t, cli, srv, []byte("ping"))
			send(t, srv, cli, []byte("pong"))
			assert.Zero(t, l.Stats().ConnectionsTimeout)
		})
	}
}
