package cute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute/internal/layer"
	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/testing/trainconn"
)

// message is a test message of n bytes whose content depends on seed.
func message(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed + i>>8)
	}
	return b
}

// TestMessagesEndToEnd: a Go server and a Go client on the default shape
// (Cute Framework's client/server layer) over real UDP, IPv4 and IPv6,
// exchange reliable messages of 1 B to the maximum and fire-and-forget
// ones, each read with its kind, in order; empty and oversized messages
// are refused; Close reaches the peer as io.EOF after what was sent.
func TestMessagesEndToEnd(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, s, 9)
			require.False(t, cli.Bare())
			require.False(t, srv.Bare())
			buf := make([]byte, DefaultMaxMessageBytes)
			for _, dir := range [][2]*Conn{{cli, srv}, {srv, cli}} {
				for i, n := range []int{1, 100, 1099, 1100, 1101, 2200, 5000, 65536, DefaultMaxMessageBytes} {
					msg := message(n, i)
					_, err := dir[0].Write(msg)
					require.NoError(t, err, "%d bytes", n)
					require.NoError(t, dir[1].SetReadDeadline(time.Now().Add(10*time.Second)))
					got, reliable, err := dir[1].ReadMessage(buf)
					require.NoError(t, err, "%d bytes", n)
					require.True(t, reliable)
					require.Equal(t, msg, buf[:got], "%d bytes", n)
				}
				// Fire-and-forget: at most once, unordered; on loopback it
				// arrives. A large one is a burst of datagrams: retried.
				for i, n := range []int{1, 1100, 2200, 30000, DefaultMaxMessageBytes} {
					msg := message(n, 100+i)
					var got int
					var reliable bool
					var err error
					for range 3 {
						_, serr := dir[0].Send(msg, false)
						require.NoError(t, serr)
						require.NoError(t, dir[1].SetReadDeadline(time.Now().Add(2*time.Second)))
						if got, reliable, err = dir[1].ReadMessage(buf); err == nil {
							break
						}
					}
					require.NoError(t, err, "%d bytes", n)
					require.False(t, reliable)
					require.Equal(t, msg, buf[:got], "%d bytes", n)
				}
			}
			require.NoError(t, srv.SetReadDeadline(time.Time{}))
			_, err := cli.Write(nil)
			require.ErrorIs(t, err, ErrEmptyMessage)
			_, err = cli.Send(make([]byte, DefaultMaxMessageBytes+1), false)
			require.ErrorIs(t, err, ErrPayloadTooLarge)

			for i := range 300 {
				_, err := cli.Write([]byte{byte(i), byte(i >> 8)})
				require.NoError(t, err)
			}
			require.NoError(t, cli.Close())
			for i := range 300 {
				n, err := srv.Read(buf)
				require.NoError(t, err, "message %d", i)
				require.Equal(t, []byte{byte(i), byte(i >> 8)}, buf[:n])
			}
			_, err = srv.Read(buf)
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

// TestMessagesDeadlinesAndClose: Read's rules on the default shape: a
// past deadline fails with os.ErrDeadlineExceeded naming the peer, a short
// buffer with io.ErrShortBuffer keeping the message, Close with
// net.ErrClosed for a blocked Read and every later call.
func TestMessagesDeadlinesAndClose(t *testing.T) {
	s := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(t, s, 3)
	buf := make([]byte, 64)
	require.NoError(t, srv.SetReadDeadline(time.Now().Add(-time.Second)))
	_, err := srv.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, srv.RemoteAddr(), oe.Addr)
	require.NoError(t, srv.SetReadDeadline(time.Time{}))

	_, err = cli.Write([]byte("kept whole"))
	require.NoError(t, err)
	n, err := srv.Read(buf[:3])
	require.ErrorIs(t, err, io.ErrShortBuffer)
	require.Zero(t, n)
	n, err = srv.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "kept whole", string(buf[:n]))

	requireClosedAtClose(t, srv)
	_, err = cli.Read(buf)
	require.ErrorIs(t, err, io.EOF)
}

// TestMessagesBareRefusesReliable: a bare protocol Conn has no reliable
// send, and says so.
func TestMessagesBareRefusesReliable(t *testing.T) {
	s := listen(t, "udp4", "127.0.0.1:0", bare)
	cli, srv := pair(t, s, 4)
	require.True(t, cli.Bare())
	_, err := cli.Send([]byte("x"), true)
	require.ErrorIs(t, err, ErrBareProtocol)
	_, err = cli.Send([]byte("x"), false)
	require.NoError(t, err)
	buf := make([]byte, 8)
	n, reliable, err := srv.ReadMessage(buf)
	require.NoError(t, err)
	require.False(t, reliable)
	require.Equal(t, "x", string(buf[:n]))
}

// TestMessagesSteadyStateAllocations: on the default shape, a message of
// up to one fragment costs no allocation on either side once connected,
// reliable or fire-and-forget (counted for the whole process: pumps,
// read loops, writers and updaters included).
func TestMessagesSteadyStateAllocations(t *testing.T) {
	race.Skip(t)
	s := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(t, s, 1)
	buf := make([]byte, 2048)
	for _, n := range []int{100, 1100} {
		for _, reliable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/reliable=%v", n, reliable), func(t *testing.T) {
				msg := message(n, 1)
				round := func() {
					for _, dir := range [][2]*Conn{{cli, srv}, {srv, cli}} {
						if _, err := dir[0].Send(msg, reliable); err != nil {
							t.Fatal(err)
						}
						if _, _, err := dir[1].ReadMessage(buf); err != nil {
							t.Fatal(err)
						}
					}
				}
				for range 200 {
					round()
				}
				allocs := testing.AllocsPerRun(1000, round)
				t.Logf("%.3f allocations per round trip (2 messages)", allocs)
				require.Less(t, allocs, 0.1, "timers and keepalives may allocate now and then")
			})
		}
	}
}

// TestMessagesReconnect attacks hazard 12 of the layer's vectors: with
// cute_net.h, a client that reconnects keeps its transport while the
// server's slot gets a fresh one, and no reliable message is delivered
// either way again. A Go Conn is one connection: a reconnect, into the
// same slot, starts both layers afresh, and reliable messages flow both
// ways.
func TestMessagesReconnect(t *testing.T) {
	s := listen(t, "udp4", "127.0.0.1:0", func(c *ServerConfig) { c.MaxClients = 1 })
	buf := make([]byte, 64)
	for round := range 2 {
		cli, srv := pair(t, s, uint64(10+round))
		require.Zero(t, srv.ClientIndex())
		for i := range 3 {
			for _, dir := range [][2]*Conn{{cli, srv}, {srv, cli}} {
				msg := []byte{byte(round), byte(i)}
				_, err := dir[0].Write(msg)
				require.NoError(t, err)
				require.NoError(t, dir[1].SetReadDeadline(time.Now().Add(5*time.Second)))
				n, reliable, err := dir[1].ReadMessage(buf)
				require.NoError(t, err, "round %d, message %d", round, i)
				require.True(t, reliable)
				require.Equal(t, msg, buf[:n])
			}
		}
		require.NoError(t, cli.Close())
		_, err := srv.Read(buf)
		require.ErrorIs(t, err, io.EOF)
		require.NoError(t, srv.Close())
	}
}

// TestMessagesFragmentsLeaveTogether, over real UDP, IPv4 and IPv6: a
// reliable message of several fragments leaves as one batched write (the
// bare Conn's WriteBatch, the engine's trains), on a dialed Conn and on a
// Listener's, not a system call per fragment; it arrives whole.
func TestMessagesFragmentsLeaveTogether(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			if f.network == "udp6" && ipv6Probe() != nil {
				t.Skip("no IPv6 loopback on this machine:", ipv6Probe())
			}
			pk, sk := GenerateKeyPair()
			sc := trainconn.New(t, f.network, f.addr)
			l, err := newListener([]net.PacketConn{sc}, ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: sk})
			require.NoError(t, err)
			defer l.Close()
			s := &server{l, sk}
			cc := trainconn.New(t, f.network, f.addr)
			d := Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) { return cc, nil }}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cli, err := d.DialContext(ctx, s.token(t, 1, nil))
			require.NoError(t, err)
			defer cli.Close()
			srv, err := s.AcceptConn(ctx)
			require.NoError(t, err)
			defer srv.Close()

			const fragments = 5
			msg := message(fragments*1100, 1)
			buf := make([]byte, len(msg))
			for _, dir := range []struct {
				name     string
				from, to *Conn
				sock     *trainconn.Conn
			}{{"client to server", cli, srv, cc}, {"server to client", srv, cli, sc}} {
				_, err := dir.from.Write(msg)
				require.NoError(t, err, dir.name)
				require.NoError(t, dir.to.SetReadDeadline(time.Now().Add(10*time.Second)))
				n, reliable, err := dir.to.ReadMessage(buf)
				require.NoError(t, err, dir.name)
				require.True(t, reliable)
				require.Equal(t, msg, buf[:n], dir.name)
				assert.GreaterOrEqual(t, dir.sock.LargestBatch(), fragments, "%s: the fragments left one system call each", dir.name)
			}
		})
	}
}

// heldWrites is how many datagrams Conn c, dialed or a server's, holds
// for a train.
func heldWrites(c *Conn) int {
	switch e := c.m.Endpoint().(type) {
	case *dialConn:
		return e.hw.Len()
	case *serverEndpoint:
		return e.hw.Len()
	}
	return 0
}

// waitingBytes is what c's client/server layer holds of received
// messages, whole or not: FragmentBytes a fragment.
func waitingBytes(c *Conn) int {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.ml.t.Buffered()
}

// read reads one payload or message of c within the given time.
func read(t *testing.T, c *Conn, within time.Duration) (string, error) {
	t.Helper()
	buf := make([]byte, 64)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(within)))
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// TestMessagesHeldWrites, over real UDP, IPv4 and IPv6: with the
// client/server layer, a dialed Conn holds a Write made while messages
// wait for its Reads (for a train, as a bare Conn holds one while
// payloads wait in its read queue), and the held Write reaches the
// server whatever sends it: the next Write, which finds no message
// waiting, a Read that finds none, Close (before it lingers), or, with
// none of these, its writer's next wait (a dialed Conn's dispatch). Each
// case but the last runs without the dispatch, so that only what it
// names can send.
func TestMessagesHeldWrites(t *testing.T) {
	cases := []struct {
		name     string
		dispatch bool
		// after, run on the client once it has read one of two messages
		// and written "held", makes "held" leave.
		after func(t *testing.T, cli *Conn)
	}{
		{"next Write", false, func(t *testing.T, cli *Conn) {
			_, err := read(t, cli, 5*time.Second)
			require.NoError(t, err)
			_, err = cli.Write([]byte("after"))
			require.NoError(t, err)
			require.Zero(t, heldWrites(cli), "held after a Write that found no message waiting")
		}},
		{"Read", false, func(t *testing.T, cli *Conn) {
			_, err := read(t, cli, 5*time.Second)
			require.NoError(t, err)
			_, err = read(t, cli, time.Millisecond) // nothing comes: it waits, after sending
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Zero(t, heldWrites(cli), "held after a Read that found no message waiting")
		}},
		{"Close", false, func(t *testing.T, cli *Conn) {
			require.NoError(t, cli.Close())
		}},
		{"writer waits", true, func(*testing.T, *Conn) {}},
	}
	for _, f := range families {
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				if !tc.dispatch {
					engine.SetDispatch(false)
					defer engine.SetDispatch(true)
				}
				s := listen(t, f.network, f.addr, nil)
				cli, srv := pair(t, s, 1)
				for i := range 2 {
					_, err := srv.Write(fmt.Appendf(nil, "to client %d", i))
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { return waitingBytes(cli) == 2*layer.FragmentBytes }, 5*time.Second, time.Millisecond)
				_, err := read(t, cli, 5*time.Second)
				require.NoError(t, err)
				_, err = cli.Write([]byte("held"))
				require.NoError(t, err)
				if !tc.dispatch {
					require.Positive(t, heldWrites(cli), "a Write made while a message waits is held (with what the layer sent meanwhile)")
				}
				tc.after(t, cli)
				got, err := read(t, srv, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, "held", got)
				switch tc.name {
				case "next Write":
					got, err = read(t, srv, 5*time.Second)
					require.NoError(t, err)
					require.Equal(t, "after", got)
				case "Close":
					_, err = read(t, srv, 5*time.Second)
					require.ErrorIs(t, err, io.EOF)
				}
			})
		}
	}
}

// TestServerHeldWrites, over real UDP, IPv4 and IPv6, bare and with the
// client/server layer: a server Conn holds a Write made while a Read
// would find something at once (a payload queued, or a whole message),
// and the held Write reaches the client, before what follows it,
// whatever sends it: the next Write, a Read that finds nothing, the
// Conn's Close or the Listener's (before the disconnects), or, its
// writer waiting on something else, the Listener's fallback
// (engine.HeldFallback later). Each case but the last runs without the
// fallback (engine.SetDispatch), so that only what it names can send.
func TestServerHeldWrites(t *testing.T) {
	cases := []struct {
		name string
		// after, run on the server once it has read one of two payloads
		// and written "held", makes "held" leave; then the client reads
		// next, and end (if any) after it.
		after func(t *testing.T, s *server, srv *Conn)
		next  string
		end   error
	}{
		{"next Write", func(t *testing.T, _ *server, srv *Conn) {
			_, err := read(t, srv, 5*time.Second)
			require.NoError(t, err)
			_, err = srv.Write([]byte("after"))
			require.NoError(t, err)
			require.Zero(t, heldWrites(srv), "held after a Write that found nothing to read")
		}, "after", nil},
		{"Read", func(t *testing.T, _ *server, srv *Conn) {
			_, err := read(t, srv, 5*time.Second)
			require.NoError(t, err)
			_, err = read(t, srv, time.Millisecond) // nothing comes: it waits, after sending
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Zero(t, heldWrites(srv), "held after a Read that found nothing")
		}, "", nil},
		{"Close", func(t *testing.T, _ *server, srv *Conn) {
			require.NoError(t, srv.Close())
		}, "", io.EOF},
		{"Listener Close", func(t *testing.T, s *server, _ *Conn) {
			require.NoError(t, s.Close())
		}, "", io.EOF},
		{"writer waits", nil, "", nil},
	}
	layers := []struct {
		name string
		edit func(*ServerConfig)
	}{{"bare", bare}, {"messages", nil}}
	for _, f := range families {
		for _, ly := range layers {
			for _, tc := range cases {
				t.Run(f.name+"/"+ly.name+"/"+tc.name, func(t *testing.T) {
					if tc.after != nil {
						engine.SetDispatch(false)
						defer engine.SetDispatch(true)
					}
					s := listen(t, f.network, f.addr, ly.edit)
					cli, srv := pair(t, s, 1)
					for i := range 2 {
						_, err := cli.Write(fmt.Appendf(nil, "to server %d", i))
						require.NoError(t, err)
					}
					require.Eventually(t, func() bool {
						if srv.Bare() {
							return srv.m.Buffered() == 2
						}
						return waitingBytes(srv) == 2*layer.FragmentBytes
					}, 5*time.Second, time.Millisecond)
					_, err := read(t, srv, 5*time.Second)
					require.NoError(t, err)
					_, err = srv.Write([]byte("held"))
					require.NoError(t, err)
					if tc.after != nil {
						require.Positive(t, heldWrites(srv), "a Write made while a Read would find something is held")
						tc.after(t, s, srv)
					}
					got, err := read(t, cli, 5*time.Second)
					require.NoError(t, err)
					require.Equal(t, "held", got)
					if tc.next != "" {
						got, err = read(t, cli, 5*time.Second)
						require.NoError(t, err)
						require.Equal(t, tc.next, got)
					}
					if tc.end != nil {
						_, err = read(t, cli, 5*time.Second)
						require.ErrorIs(t, err, tc.end)
					}
				})
			}
		}
	}
}
