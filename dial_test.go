package netcode_test

import (
	"context"
	"net"
	"net/netip"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingConn counts the packets of each type a netsim connection sends,
// and the sizes of its batched writes.
type countingConn struct {
	*netsim.Conn
	sent [protocol.Disconnect + 1]atomic.Int64

	mu      sync.Mutex
	batches []int
}

// ReadBatch reads one datagram: the connection offers batched I/O so that
// the Conn's batched writes show.
func (c *countingConn) ReadBatch(ms []transport.Message) (int, error) {
	n, from, err := c.Conn.ReadFromUDPAddrPort(ms[0].Buf[:cap(ms[0].Buf)])
	if err != nil {
		return 0, err
	}
	ms[0].Buf, ms[0].Addr = ms[0].Buf[:n], from
	return 1, nil
}

func (c *countingConn) WriteBatch(ms []transport.Message) (int, error) {
	c.mu.Lock()
	c.batches = append(c.batches, len(ms))
	c.mu.Unlock()
	for i, m := range ms {
		if _, err := c.WriteToUDPAddrPort(m.Buf, m.Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

func (c *countingConn) count(b []byte) {
	if t, ok := protocol.PeekType(b); ok && int(t) < len(c.sent) {
		c.sent[t].Add(1)
	}
}

func (c *countingConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	c.count(b)
	return c.Conn.WriteToUDPAddrPort(b, addr)
}

func (c *countingConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	c.count(b)
	return c.Conn.WriteTo(b, addr)
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// dialConnGoroutines counts the goroutines running the dialed Conns' code.
func dialConnGoroutines() int { return stacks.Count("netcode.(*dialConn)") }

// TestDialedConnIdle runs dialed Conns on simulated time (a synctest
// bubble over a netsim network): an idle Conn sends exactly the protocol's
// 10 keep-alives a second, keeps one goroutine (its reader) between them,
// and a Conn written to faster than that sends no keep-alive at all. Close
// sends the disconnects in one batched write and stops everything (the
// bubble would not end otherwise).
func TestDialedConnIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conns = 4
		nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
		defer nw.Close()
		srvAP := netip.MustParseAddrPort("10.7.0.1:40000")
		spc, err := nw.Listen(srvAP)
		require.NoError(t, err)
		l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: conns})
		require.NoError(t, err)
		defer l.Close()

		var (
			cli [conns]*netcode.Conn
			cc  [conns]*countingConn
		)
		for i := range conns {
			d := netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
				pc, err := nw.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 7, 1, byte(i)}), 5000))
				if err != nil {
					return nil, err
				}
				cc[i] = &countingConn{Conn: pc.(*netsim.Conn)}
				return cc[i], nil
			}}
			cli[i], err = d.DialContext(t.Context(), mint(t, net.UDPAddrFromAddrPort(srvAP), withClientID(uint64(i+1)), withTimeout(5)))
			require.NoError(t, err)
			srv, err := l.AcceptConn(t.Context())
			require.NoError(t, err)
			defer srv.Close()
		}

		// Between deadlines every dialed Conn is down to its reader.
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, conns, dialConnGoroutines(), "goroutines of %d idle dialed Conns", conns)

		// Idle for 10 s: 100 keep-alives each, not one more.
		var before [conns]int64
		for i := range conns {
			before[i] = cc[i].sent[protocol.KeepAlive].Load()
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for i := range conns {
			require.Equal(t, int64(100), cc[i].sent[protocol.KeepAlive].Load()-before[i], "keep-alives of Conn %d in 10 s", i)
			require.NoError(t, cli[i].Err())
		}

		// Written to every 30 ms for 3 s: every packet is a payload.
		ka := cc[0].sent[protocol.KeepAlive].Load()
		for range 100 {
			_, err := cli[0].Write([]byte("state"))
			require.NoError(t, err)
			time.Sleep(30 * time.Millisecond)
		}
		require.Equal(t, ka, cc[0].sent[protocol.KeepAlive].Load(), "keep-alives while payloads flow")
		require.Equal(t, int64(100), cc[0].sent[protocol.Payload].Load())

		// Written to every 90 ms, just inside the keep-alive interval:
		// each Write moves the Conn's timer, which never fires, so the
		// Conn starts no goroutine (a timer left where it was would run
		// its callback, for nothing, about once a Write). The idle Conns
		// start one per keep-alive.
		idleKA := func() (n int64) {
			for i := 1; i < conns; i++ {
				n += cc[i].sent[protocol.KeepAlive].Load()
			}
			return n
		}
		synctest.Wait()
		created, idle := goroutinesCreated(), idleKA()
		for range 30 {
			_, err := cli[0].Write([]byte("state"))
			require.NoError(t, err)
			time.Sleep(90 * time.Millisecond)
		}
		synctest.Wait()
		own := int64(goroutinesCreated()-created) - (idleKA() - idle)
		assert.LessOrEqual(t, own, int64(3), "goroutines the written Conn started in 30 Writes 90 ms apart")
		require.Equal(t, ka, cc[0].sent[protocol.KeepAlive].Load(), "keep-alives while payloads flow")

		for i := range conns {
			require.NoError(t, cli[i].Close())
			require.Equal(t, int64(10), cc[i].sent[protocol.Disconnect].Load(), "the redundant disconnects")
			require.Equal(t, []int{10}, cc[i].batches, "batched writes: the disconnects in one")
		}
		synctest.Wait()
		require.Zero(t, dialConnGoroutines(), "goroutines after Close")
	})
}

// TestDialRequestTimeout covers Dialer.RequestTimeout over real UDP, IPv4
// and IPv6: a token the server cannot open (sealed with another key) and
// claiming no timeout fails with ErrConnectionRequestTimedOut once the
// bound has passed, rather than running on until the context's deadline;
// a genuine token connects as usual.
func TestDialRequestTimeout(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "udp6" {
				addr = "[::1]:0"
			}
			l := listen(t, network, addr, nil)
			// The server keeps what it accepts until the Listener closes.
			// Closing it at once would let the disconnect reach the client
			// before the keep-alive that confirms it whenever that one is
			// lost or dropped (UDP, a full send queue), which the protocol
			// allows and which fails the Dial with io.EOF (README, "A kick
			// during the handshake"); TestAcceptAfterConfirm covers a Close
			// right after Accept.
			go func() {
				for {
					if _, err := l.Accept(); err != nil {
						return
					}
				}
			}()
			d := netcode.Dialer{RequestTimeout: 300 * time.Millisecond}
			forged := mint(t, l.Addr(), withTimeout(-1), func(p *token.Params) { p.PrivateKey = crypto.Key{9} })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := d.DialContext(ctx, forged)
			require.Nil(t, c)
			require.ErrorIs(t, err, netcode.ErrConnectionRequestTimedOut)
			require.NoError(t, ctx.Err(), "the bound, not the context, ended the dial")

			// A genuine token under a bound the server answers well within:
			// not 300 ms, which a loaded machine under -race may exceed
			// before the challenge comes back.
			d.RequestTimeout = 30 * time.Second
			c, err = d.DialContext(ctx, mint(t, l.Addr(), withTimeout(-1)))
			require.NoError(t, err)
			c.Close()
		})
	}
}

// TestDialEndedContextSendsNothing: a context that ended before Dial
// began (a 1 ns timeout, a cancelled context) ends the dial at once with
// the context's error and where the handshake stood, and no connection
// request leaves, as net.Dialer dials nothing with an ended context. The
// server is real and would answer, so a request that left could race the
// context and end the dial as denied or connected instead.
func TestDialEndedContextSendsNothing(t *testing.T) {
	ended := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded},
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, f := range families {
		for _, tc := range ended {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				l := listen(t, f.network, f.addr, nil)
				tap := &tapConn{}
				d := netcode.Dialer{ListenPacket: func(_ context.Context, network, laddr string) (net.PacketConn, error) {
					pc, err := net.ListenPacket(network, laddr)
					tap.PacketConn = pc
					return tap, err
				}}
				ctx, cancel := tc.ctx()
				defer cancel()
				c, err := d.DialContext(ctx, mint(t, l.Addr()))
				require.Error(t, err)
				require.Nil(t, c)
				require.ErrorIs(t, err, tc.want)
				require.ErrorIs(t, err, netcode.ErrConnectionRequestTimedOut)
				tap.mu.Lock()
				defer tap.mu.Unlock()
				require.Empty(t, tap.out, "a dial with an ended context sent packets")
			})
		}
	}
}
