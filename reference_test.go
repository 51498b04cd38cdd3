package netcode_test

// Mirrors of the C reference's tests (mas-bandwidth/netcode, netcode.c's
// test_* functions) that need real sockets: loopback clients, packet
// tagging, dual-stack, the client's local address, the server-side
// connection timeout, listener creation errors and key rotation.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// loopbackHost is the family's loopback address, without a port.
func loopbackHost(network string) string {
	if network == "udp6" {
		return "::1"
	}
	return "127.0.0.1"
}

// exchange sends msg from a and reads it on b, then sends it back and reads
// it on a: a round trip that proves the connection carries payloads both
// ways.
func exchange(t testing.TB, a, b net.Conn, msg string) {
	t.Helper()
	send(t, a, b, []byte(msg))
	send(t, b, a, []byte(msg))
}

// clientLeaves closes cli after a last payload and checks both ends: the
// server's end reads the payload, then io.EOF, and can no longer write;
// the client's end fails every use with net.ErrClosed.
func clientLeaves(t testing.TB, cli, srv net.Conn) {
	t.Helper()
	_, err := cli.Write([]byte("last words"))
	require.NoError(t, err)
	require.NoError(t, cli.Close())
	got, err := readWithin(t, srv, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "last words", string(got))
	_, err = readWithin(t, srv, 5*time.Second)
	require.ErrorIs(t, err, io.EOF)
	_, err = srv.Write([]byte("x"))
	assert.ErrorIs(t, err, io.EOF, "writing to a peer that left")
	_, err = cli.Read(make([]byte, 10))
	assert.ErrorIs(t, err, net.ErrClosed)
	_, err = cli.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.ErrorIs(t, cli.Close(), net.ErrClosed)
}

func withKey(k crypto.Key) tokenOpt { return func(p *token.Params) { p.PrivateKey = k } }

// dialWith dials a token for l's address with d and accepts the server's
// side of the connection.
func dialWith(t testing.TB, d *netcode.Dialer, l *netcode.Listener, tok []byte) (cli, srv *netcode.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := d.DialContext(ctx, tok)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	srv, err = l.AcceptConn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return cli, srv
}

// opaqueConn is a net.PacketConn that hides the socket it wraps: it offers
// only the net.PacketConn methods (no syscall.Conn, no netip methods), as a
// tunnel or an in-memory transport would. Once muted, it drops everything
// it is asked to send.
type opaqueConn struct {
	net.PacketConn
	muted atomic.Bool
}

func (c *opaqueConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.muted.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, addr)
}

// logRecords is a slog.Handler that keeps the records at Info and above.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// at returns the messages logged at level.
func (h *logRecords) at(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level == level {
			out = append(out, r.Message)
		}
	}
	return out
}

// TestLoopback mirrors the reference's test_loopback: a loopback client
// takes a slot beside a client over UDP, payloads flow both ways on both,
// and the loopback connection ends, frees its slot and fails as a network
// connection does.
func TestLoopback(t *testing.T) {
	var ud [token.UserDataBytes]byte
	copy(ud[:], "local player")
	for _, f := range families {
		t.Run(f.name+"/slots", func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.MaxClients = 2 })
			srvL, cliL, err := l.ConnectLoopback(100, ud)
			require.NoError(t, err)
			t.Cleanup(func() { srvL.Close(); cliL.Close() })

			assert.Equal(t, uint64(100), srvL.ClientID())
			assert.Equal(t, ud, srvL.UserData())
			// As for a client over the network, the client's end knows its
			// slot but not its id or user data.
			assert.Zero(t, cliL.ClientID())
			assert.Equal(t, [token.UserDataBytes]byte{}, cliL.UserData())
			assert.Equal(t, srvL.ClientIndex(), cliL.ClientIndex())
			assert.Equal(t, 2, srvL.MaxClients())
			assert.Equal(t, 2, cliL.MaxClients())
			assert.Equal(t, l.Addr(), cliL.RemoteAddr())
			assert.Equal(t, l.Addr(), srvL.LocalAddr())

			_, _, err = l.ConnectLoopback(100, ud)
			require.ErrorIs(t, err, netcode.ErrClientIDInUse, "one slot is free: the id is what is refused")

			// The loopback client is not queued for Accept: the first
			// connection accepted is the UDP client's.
			cli, srv := pair(t, l, withClientID(1), withTimeout(30))
			assert.Equal(t, uint64(1), srv.ClientID())
			assert.NotEqual(t, srvL.ClientIndex(), srv.ClientIndex())
			assert.Equal(t, 2, l.Stats().Connected)

			for i := range 3 {
				exchange(t, cliL, srvL, fmt.Sprintf("loopback %d", i))
				exchange(t, cli, srv, fmt.Sprintf("udp %d", i))
			}

			// Both slots are taken.
			_, _, err = l.ConnectLoopback(101, ud)
			require.ErrorIs(t, err, netcode.ErrFull)
			_, _, err = l.ConnectLoopback(1, ud)
			require.ErrorIs(t, err, netcode.ErrClientIDInUse)
			c, err := netcode.Dial(mint(t, l.Addr(), withClientID(2)))
			require.Nil(t, c)
			require.ErrorIs(t, err, netcode.ErrConnectionDenied)

			// The player leaves, and the slot is free again.
			clientLeaves(t, cliL, srvL)
			cli2, srv2 := pair(t, l, withClientID(2))
			exchange(t, cli2, srv2, "in the freed slot")
			exchange(t, cli, srv, "still here")
		})

		t.Run(f.name+"/server end closes", func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.MaxClients = 1 })
			srvL, cliL, err := l.ConnectLoopback(7, ud)
			require.NoError(t, err)
			t.Cleanup(func() { cliL.Close() })
			require.NoError(t, srvL.Close())
			_, err = readWithin(t, cliL, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			_, err = srvL.Read(make([]byte, 10))
			require.ErrorIs(t, err, net.ErrClosed)
			// The slot is free for another loopback client.
			srvL2, cliL2, err := l.ConnectLoopback(7, ud)
			require.NoError(t, err)
			t.Cleanup(func() { srvL2.Close(); cliL2.Close() })
			exchange(t, cliL2, srvL2, "again")
		})

		t.Run(f.name+"/listener closes", func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.MaxClients = 2 })
			srvL, cliL, err := l.ConnectLoopback(100, ud)
			require.NoError(t, err)
			t.Cleanup(func() { srvL.Close(); cliL.Close() })
			cli, _ := pair(t, l, withClientID(1), withTimeout(30))
			require.NoError(t, l.Close())
			_, err = readWithin(t, cliL, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			_, err = readWithin(t, srvL, 5*time.Second)
			require.ErrorIs(t, err, net.ErrClosed)
			_, err = readWithin(t, cli, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			_, _, err = l.ConnectLoopback(101, ud)
			require.ErrorIs(t, err, net.ErrClosed)
		})

		t.Run(f.name+"/deadlines", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			srvL, cliL, err := l.ConnectLoopback(100, ud)
			require.NoError(t, err)
			t.Cleanup(func() { srvL.Close(); cliL.Close() })
			for _, c := range []*netcode.Conn{srvL, cliL} {
				_, err := readWithin(t, c, 20*time.Millisecond)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				var ne net.Error
				require.ErrorAs(t, err, &ne)
				assert.True(t, ne.Timeout())
				require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
				_, err = c.Write([]byte("late"))
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.NoError(t, c.SetDeadline(time.Time{}))
			}
			exchange(t, cliL, srvL, "after the deadlines")
		})

		// The Conn's queue-full path: payloads past the read queue's size
		// are dropped and counted, the queued ones kept in order.
		t.Run(f.name+"/read queue full", func(t *testing.T) {
			const queue, sent = 4, 10
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.ReadQueue = queue })
			srvL, cliL, err := l.ConnectLoopback(100, ud)
			require.NoError(t, err)
			t.Cleanup(func() { srvL.Close(); cliL.Close() })
			for _, dir := range []struct {
				name     string
				from, to *netcode.Conn
			}{{"client to server", cliL, srvL}, {"server to client", srvL, cliL}} {
				fromDropped := dir.from.Dropped()
				for i := range sent {
					_, err := dir.from.Write([]byte(strconv.Itoa(i)))
					require.NoError(t, err, dir.name)
				}
				assert.Equal(t, uint64(sent-queue), dir.to.Dropped(), dir.name)
				assert.Equal(t, fromDropped, dir.from.Dropped(), "%s: the writer's count is untouched", dir.name)
				for i := range queue {
					got, err := readWithin(t, dir.to, 5*time.Second)
					require.NoError(t, err, dir.name)
					require.Equal(t, strconv.Itoa(i), string(got), dir.name)
				}
				_, err := readWithin(t, dir.to, 10*time.Millisecond)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded, "%s: only %d were queued", dir.name, queue)
				require.NoError(t, dir.to.SetReadDeadline(time.Time{}))
			}
			// The server's total counts what its connections dropped.
			assert.Equal(t, uint64(sent-queue), l.Stats().PayloadsDropped)
		})
	}
}

// trafficClass reads back the IPv4 TOS or IPv6 traffic class byte of uc.
func trafficClass(t testing.TB, uc *net.UDPConn) int {
	t.Helper()
	var (
		v   int
		err error
	)
	if uc.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
		v, err = ipv4.NewPacketConn(uc).TOS()
	} else {
		v, err = ipv6.NewPacketConn(uc).TrafficClass()
	}
	require.NoError(t, err)
	return v
}

// TestPacketTagging mirrors the reference's test_packet_tagging: with
// tagging on, both ends' sockets carry DSCP 46 in the IPv4 TOS or IPv6
// traffic class byte and the connection works; off, the byte stays 0; on a
// transport that is not an IP socket, tagging is refused with one Warn
// line per end and the connection works untagged.
func TestPacketTagging(t *testing.T) {
	const expeditedForwarding = 46 << 2 // DSCP 46 (RFC 3246), as transport.ExpeditedForwarding
	for _, f := range families {
		for _, tt := range []struct {
			name    string
			tagging bool
			opaque  bool // hide the socket: tagging cannot be set
			want    int
		}{
			{"on", true, false, expeditedForwarding},
			{"off", false, false, 0},
			{"refused", true, true, 0},
		} {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				if f.network == "udp6" {
					requireIPv6(t)
				}
				local := &net.UDPAddr{IP: net.ParseIP(loopbackHost(f.network))}
				wrap := func(uc *net.UDPConn) net.PacketConn {
					if tt.opaque {
						return &opaqueConn{PacketConn: uc}
					}
					return uc
				}

				srvLog, cliLog := &logRecords{}, &logRecords{}
				suc, err := net.ListenUDP(f.network, local)
				require.NoError(t, err)
				l, err := netcode.NewListener(wrap(suc), &netcode.ServerConfig{
					ProtocolID: testProtocolID,
					PrivateKey: testKey,
					Socket:     netcode.SocketConfig{PacketTagging: tt.tagging},
					Logger:     slog.New(srvLog),
				})
				if err != nil {
					suc.Close()
				}
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })

				var cuc *net.UDPConn
				d := &netcode.Dialer{
					Socket: netcode.SocketConfig{PacketTagging: tt.tagging},
					Logger: slog.New(cliLog),
					ListenPacket: func(_ context.Context, network, _ string) (net.PacketConn, error) {
						uc, err := net.ListenUDP(network, local)
						if err != nil {
							return nil, err
						}
						cuc = uc
						return wrap(uc), nil
					},
				}
				cli, srv := dialWith(t, d, l, mint(t, l.Addr()))
				require.NotNil(t, cuc)

				assert.Equal(t, tt.want, trafficClass(t, suc), "server socket")
				assert.Equal(t, tt.want, trafficClass(t, cuc), "client socket")
				var wantWarn int
				if tt.opaque {
					wantWarn = 1
				}
				for _, side := range []struct {
					name string
					log  *logRecords
				}{{"server", srvLog}, {"client", cliLog}} {
					warns := side.log.at(slog.LevelWarn)
					require.Len(t, warns, wantWarn, "%s: %q", side.name, warns)
					for _, m := range warns {
						assert.Contains(t, m, "packet tagging", side.name)
					}
				}
				for i := range 3 {
					exchange(t, cli, srv, fmt.Sprintf("tagged %v %d", tt.tagging, i))
				}
			})
		}
	}
}

// TestDualStackEndToEnd: one Listener on the IPv6 wildcard address serves
// clients over IPv4 and IPv6 at once, and sees each at the address it bound.
func TestDualStackEndToEnd(t *testing.T) {
	l := listen(t, "udp", "[::]:0", nil)
	port := uint16(l.Addr().(*net.UDPAddr).Port)
	type conns struct{ cli, srv *netcode.Conn }
	var all []conns
	for i, host := range []string{"127.0.0.1", "::1"} {
		server := netip.AddrPortFrom(netip.MustParseAddr(host), port)
		d := &netcode.Dialer{LocalAddr: net.JoinHostPort(host, "0")}
		cli, srv := dialWith(t, d, l, mint(t, net.UDPAddrFromAddrPort(server), withClientID(uint64(i+1))))
		assert.Equal(t, uint64(i+1), srv.ClientID(), host)
		assert.Equal(t, cli.LocalAddr().String(), srv.RemoteAddr().String(), host)
		assert.Equal(t, server.String(), cli.RemoteAddr().String(), host)
		all = append(all, conns{cli, srv})
	}
	// Both are connected at once and both carry payloads.
	for i := range 3 {
		for j, c := range all {
			exchange(t, c.cli, c.srv, fmt.Sprintf("client %d, payload %d", j, i))
		}
	}
}

// freeAddr returns a loopback address with a port nobody is bound to now.
func freeAddr(t testing.TB, network string) string {
	t.Helper()
	pc, err := net.ListenPacket(network, net.JoinHostPort(loopbackHost(network), "0"))
	require.NoError(t, err)
	a := pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	return a
}

// TestDialerLocalAddr: the client sends from Dialer.LocalAddr, and a local
// address it cannot bind fails the Dial with a *net.OpError that names the
// server, without a panic or a goroutine left behind.
func TestDialerLocalAddr(t *testing.T) {
	for _, f := range families {
		t.Run(f.name+"/bound", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			local := freeAddr(t, f.network)
			cli, srv := dialWith(t, &netcode.Dialer{LocalAddr: local}, l, mint(t, l.Addr()))
			assert.Equal(t, local, srv.RemoteAddr().String())
			assert.Equal(t, local, cli.LocalAddr().String())
			exchange(t, cli, srv, "from a chosen port")
		})

		t.Run(f.name+"/bad", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			held, err := net.ListenPacket(f.network, net.JoinHostPort(loopbackHost(f.network), "0"))
			require.NoError(t, err)
			defer held.Close()
			for _, tt := range []struct {
				name, local string
				want        error // also wrapped, if not nil
			}{
				{"not an IP address", "300.1.1.1:0", nil},
				{"not an address", "not an address", nil},
				{"port in use", held.LocalAddr().String(), syscall.EADDRINUSE},
			} {
				t.Run(tt.name, func(t *testing.T) {
					defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
					d := &netcode.Dialer{LocalAddr: tt.local}
					c, err := d.DialContext(context.Background(), mint(t, l.Addr()))
					require.Nil(t, c)
					var op *net.OpError
					require.ErrorAs(t, err, &op)
					require.NotNil(t, op.Addr, "the error names no server: %v", err)
					assert.Equal(t, l.Addr().String(), op.Addr.String())
					if tt.want != nil {
						assert.ErrorIs(t, err, tt.want)
					}
				})
			}
		})
	}
}

// TestServerSideConnectionTimedOut: a client that goes silent times out on
// the server, whose Conn then fails with ErrConnectionTimedOut; the server
// stops sending to it, and the client times out too.
func TestServerSideConnectionTimedOut(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			var mc *opaqueConn
			d := &netcode.Dialer{
				ListenPacket: func(_ context.Context, network, _ string) (net.PacketConn, error) {
					pc, err := net.ListenPacket(network, net.JoinHostPort(loopbackHost(network), "0"))
					if err != nil {
						return nil, err
					}
					mc = &opaqueConn{PacketConn: pc}
					return mc, nil
				},
			}
			cli, srv := dialWith(t, d, l, mint(t, l.Addr(), withTimeout(1)))
			exchange(t, cli, srv, "before the silence")
			mc.muted.Store(true)

			for _, side := range []struct {
				name string
				c    *netcode.Conn
			}{{"server", srv}, {"client", cli}} {
				_, err := readWithin(t, side.c, 10*time.Second)
				require.ErrorIs(t, err, netcode.ErrConnectionTimedOut, side.name)
				var ne net.Error
				require.ErrorAs(t, err, &ne, side.name)
				require.ErrorIs(t, side.c.Err(), netcode.ErrConnectionTimedOut, side.name)
			}
			assert.Equal(t, uint64(1), l.Stats().ConnectionsTimeout)
			assert.Zero(t, l.Stats().Connected)
		})
	}
}

// TestListenCreateErrors mirrors the reference's server create errors: the
// address in use, an unknown network, a zero private key and a missing
// configuration, each with an error of the kind package net would give.
// NewListener leaves the PacketConn it refused open for the caller.
func TestListenCreateErrors(t *testing.T) {
	good := func() *netcode.ServerConfig {
		return &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey}
	}
	for _, f := range families {
		t.Run(f.name+"/address in use", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			l2, err := netcode.Listen(f.network, l.Addr().String(), good())
			require.Nil(t, l2)
			require.ErrorIs(t, err, syscall.EADDRINUSE)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			assert.Equal(t, "listen", op.Op)
		})
	}

	for _, network := range []string{"tcp", "ip4", "unixgram", ""} {
		t.Run("unknown network "+strconv.Quote(network), func(t *testing.T) {
			l, err := netcode.Listen(network, "127.0.0.1:0", good())
			require.Nil(t, l)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			var une net.UnknownNetworkError
			require.ErrorAs(t, err, &une)
			assert.Equal(t, network, string(une))
		})
	}

	for _, tt := range []struct {
		name string
		cfg  *netcode.ServerConfig
		want error // nil: any error
	}{
		{"zero private key", &netcode.ServerConfig{ProtocolID: testProtocolID}, crypto.ErrZeroKey},
		{"zero private key with a previous key", &netcode.ServerConfig{ProtocolID: testProtocolID, PreviousPrivateKey: testKey}, crypto.ErrZeroKey},
		{"nil config", nil, nil},
	} {
		for _, f := range families {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				if f.network == "udp6" {
					requireIPv6(t)
				}
				l, err := netcode.Listen(f.network, f.addr, tt.cfg)
				require.Nil(t, l)
				require.Error(t, err)
				if tt.want != nil {
					require.ErrorIs(t, err, tt.want)
				}

				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(t, err)
				l, err = netcode.NewListener(pc, tt.cfg)
				require.Nil(t, l)
				require.Error(t, err)
				if tt.want != nil {
					require.ErrorIs(t, err, tt.want)
				}
				// Still open: the caller's to use or close.
				require.NoError(t, pc.SetReadDeadline(time.Now().Add(-time.Second)))
				_, _, err = pc.ReadFrom(make([]byte, 1))
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.NoError(t, pc.Close())
			})
		}
	}
}

// TestKeyRotation: during a key rotation, a Listener with the new key and
// the previous one accepts tokens sealed with either; once the previous
// key is cleared, its tokens are refused, as are tokens sealed with any
// other key.
func TestKeyRotation(t *testing.T) {
	var keys [3]crypto.Key
	for i := range keys {
		k, err := crypto.GenerateKey()
		require.NoError(t, err)
		keys[i] = k
	}
	k1, k2, k3 := keys[0], keys[1], keys[2]
	tests := []struct {
		name     string
		previous crypto.Key // zero: none
		sealed   crypto.Key
		ok       bool
	}{
		{"rotating/sealed with the new key", k1, k2, true},
		{"rotating/sealed with the previous key", k1, k1, true},
		{"rotating/sealed with an unrelated key", k1, k3, false},
		{"rotated/sealed with the new key", crypto.Key{}, k2, true},
		{"rotated/sealed with the retired key", crypto.Key{}, k1, false},
	}
	for _, f := range families {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) {
					c.PrivateKey = k2
					c.PreviousPrivateKey = tt.previous
				})
				tok := mint(t, l.Addr(), withKey(tt.sealed), withTimeout(1))
				if tt.ok {
					cli, srv := dialWith(t, &netcode.Dialer{}, l, tok)
					exchange(t, cli, srv, tt.name)
					return
				}
				c, err := netcode.Dial(tok)
				require.Nil(t, c)
				require.ErrorIs(t, err, netcode.ErrConnectionRequestTimedOut)
				assert.Positive(t, l.Stats().Ignored, "the refused requests are counted")
				assert.Zero(t, l.Stats().ConnectionsOpened)
			})
		}
	}
}

// TestReadShards: a Listener reading several SO_REUSEPORT sockets serves
// every client, over IPv4 and IPv6, and Close stops every reader (goleak).
func TestReadShards(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.Socket.ReadShards = 4 })
			const clients = 16
			var clis, srvs []*netcode.Conn
			for i := range clients {
				c, s := pair(t, l, withClientID(uint64(1+i)))
				clis, srvs = append(clis, c), append(srvs, s)
			}
			for i := range clients {
				exchange(t, clis[i], srvs[i], fmt.Sprintf("shard test %d", i))
			}
			assert.Equal(t, clients, l.Stats().Connected)
			require.NoError(t, l.Close())
			for _, c := range clis {
				_, err := readWithin(t, c, 5*time.Second)
				assert.ErrorIs(t, err, io.EOF)
			}
		})
	}
}
