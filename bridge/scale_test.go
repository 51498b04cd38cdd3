package bridge_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/testing/stacks"
)

var scaleSessions = flag.Int("bridge.sessions", 200, "sessions TestSessionCost opens in each mode")

// cost is what a set of sessions costs the process, per session.
type cost struct {
	goroutines float64
	heap       float64 // bytes of live heap
	stack      float64 // bytes of goroutine stacks
}

func (c cost) minus(d cost) cost {
	return cost{c.goroutines - d.goroutines, c.heap - d.heap, c.stack - d.stack}
}

func (c cost) String() string {
	return fmt.Sprintf("%.2f goroutines, %.1f KB heap, %.1f KB stacks", c.goroutines, c.heap/1024, c.stack/1024)
}

type footprint struct {
	goroutines   int
	heap, stacks uint64
}

// measure counts the goroutines but those running a timer's callback (the
// Conns' keep-alive timers and the bridge's watchdogs fire all the time;
// each callback is a goroutine for one call, not a cost of a session), and
// reads the heap and the stacks. It counts them out of one snapshot rather
// than waiting for a moment with no callback running: on a starved
// machine, with -race, the hundreds of sessions' timers may never give
// one.
func measure() footprint {
	n := stacks.Lasting(stacks.TimerCallback)
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return footprint{n, ms.HeapAlloc, ms.StackInuse}
}

// sessionCost opens n sessions with open (each connected end to end, one
// echo done) and returns what they cost per session, all of the process's
// sides together: the test's clients, the bridge and the echo server.
// What open returns is closed when the test ends, so that sessions that
// end cannot blur a later measurement.
func sessionCost(t *testing.T, n int, open func(i int) io.Closer) cost {
	t.Helper()
	before := measure()
	cs := make([]io.Closer, 0, n)
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	for i := range n {
		cs = append(cs, open(i))
	}
	after := measure()
	return cost{
		goroutines: float64(after.goroutines-before.goroutines) / float64(n),
		heap:       float64(int64(after.heap)-int64(before.heap)) / float64(n),
		stack:      float64(int64(after.stacks)-int64(before.stacks)) / float64(n),
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// echoOnce sends one payload on c and waits for it back, sending it again
// if no echo comes: the sessions' path is a datagram path (UDP, or the
// transport, whose Mux drops past its read queue as a full socket buffer
// would), and under load, with 2n sessions' keep-alives arriving, a queue
// may be full when the payload or its echo comes.
func echoOnce(t testing.TB, c *netcode.Conn) {
	t.Helper()
	require.NoError(t, bridgetest.Echo(t, c, 0, 1, true))
}

// TestSessionCost measures what a browser's session costs the bridge, in
// goroutines and memory, against a netcode client dialed directly over UDP
// (the same echo server, the same number of sessions): the difference is
// the bridge's own cost. It checks the goroutines, a count; the figures are
// logged (go test -run SessionCost -v -bridge.sessions 500).
func TestSessionCost(t *testing.T) {
	n := *scaleSessions
	if testing.Short() {
		n = min(n, 50)
	}
	tests := []struct {
		name          string
		maxGoroutines float64 // the bridge's own, per session
		open          func(t *testing.T, n int) (bridged, direct func(i int) io.Closer)
	}{
		{"relay", 2, func(t *testing.T, n int) (func(int) io.Closer, func(int) io.Closer) {
			srv := newServer(t, 2*n, true)
			_, url := newBridge(t, bridge.Config{AllowedServers: allowOnly(srv).AllowedServers, MaxSessions: n})
			msg := make([]byte, 100)
			relay := func(int) io.Closer {
				ws, _ := open(t, url, srv.token(t, 30))
				ctx := bridgetest.Ctx(t, 5*time.Second)
				require.NoError(t, ws.Write(ctx, websocket.MessageBinary, msg))
				_, got, err := ws.Read(ctx)
				require.NoError(t, err)
				require.Len(t, got, len(msg))
				return closerFunc(func() error { return ws.Close(websocket.StatusNormalClosure, "") })
			}
			direct := func(int) io.Closer {
				c, err := netcode.DialContext(bridgetest.Ctx(t, 10*time.Second), srv.token(t, 30))
				require.NoError(t, err)
				echoOnce(t, c)
				return c
			}
			return relay, direct
		}},
		// The client's side of the transport (TransportConn) has a reader
		// goroutine too.
		{"transport", 3, func(t *testing.T, n int) (func(int) io.Closer, func(int) io.Closer) {
			s := bridgetest.NewMuxServer(t, 2*n, transport.MuxConfig{MaxSessions: n})
			ws := func(int) io.Closer {
				d := netcode.Dialer{ListenPacket: transport.ListenPacket(s.URL, nil)}
				c, err := d.DialContext(bridgetest.Ctx(t, 10*time.Second), s.Token(t))
				require.NoError(t, err)
				echoOnce(t, c)
				return c
			}
			direct := func(int) io.Closer {
				c, err := netcode.DialContext(bridgetest.Ctx(t, 10*time.Second), s.Token(t))
				require.NoError(t, err)
				echoOnce(t, c)
				return c
			}
			return ws, direct
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bridged, direct := tt.open(t, n)
			d := sessionCost(t, n, direct)
			b := sessionCost(t, n, bridged)
			own := b.minus(d)
			t.Logf("%d sessions: direct UDP %v per session", n, d)
			t.Logf("%d sessions: %s %v per session", n, tt.name, b)
			t.Logf("%s: the bridge's own: %v per session", tt.name, own)
			assert.LessOrEqual(t, own.goroutines, tt.maxGoroutines+0.05, "the bridge's goroutines per session")
		})
	}
}

// TestRelayAllocs checks that a message relayed both ways (browser to
// server and back) allocates nothing in steady state, on the bridge's side
// or any other.
func TestRelayAllocs(t *testing.T) {
	race.Skip(t)
	srv := newServer(t, 4, true)
	_, url := newBridge(t, allowOnly(srv))
	ws, _ := open(t, url, srv.token(t, 30))
	ctx := context.Background()
	msg := make([]byte, 100)
	buf := make([]byte, netcode.MaxPayloadBytes)
	roundTrip := func() {
		if err := ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
		_, r, err := ws.Reader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(buf); err != io.EOF {
			t.Fatal(err)
		}
	}
	for range 100 {
		roundTrip() // warm up: pools, queues
	}
	assert.Zero(t, testing.AllocsPerRun(1000, roundTrip), "allocations per relayed message, both ways")
}
