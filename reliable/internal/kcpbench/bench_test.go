package kcpbench

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/reliable"
	"github.com/gonetcode/netcode/token"
	kcp "github.com/xtaci/kcp-go/v5"
)

// chunk is what each benchmark iteration writes.
const chunk = 1 << 20

// mtu is the datagram size both reliable and kcp use (netcode's payload).
const mtu = netcode.MaxPayloadBytes

// window is the packets in flight both use: a bulk transfer's window (the
// bandwidth-delay product of about 40 MB/s at 100 ms), set on reliable's
// side as WindowBytes, a chunk (1168 bytes) per packet.
const window = 4096

// goodput writes b.N chunks into w and reads them from r.
func goodput(b *testing.B, w io.Writer, r io.Reader) {
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(chunk)
	b.ReportAllocs()
	want := int64(b.N) * chunk
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, r, want)
		done <- err
	}()
	b.ResetTimer()
	for range b.N {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// must returns v, or stops the benchmark binary on err: setup failures
// here are the machine's, not results.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// fastKCP sets kcp's usual low-latency mode with our window and MTU.
func fastKCP(s *kcp.UDPSession) *kcp.UDPSession {
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(window, window)
	s.SetMtu(mtu)
	s.SetWriteDelay(false)
	return s
}

// kcpPair returns a kcp session pair over the listener ln (made with a
// PacketConn or a UDP address) and a client session to it.
func kcpPair(b *testing.B, ln *kcp.Listener, cli *kcp.UDPSession) (*kcp.UDPSession, *kcp.UDPSession) {
	accepted := make(chan *kcp.UDPSession, 1)
	go func() {
		s, err := ln.AcceptKCP()
		if err != nil {
			b.Error(err)
		}
		accepted <- s
	}()
	fastKCP(cli)
	if _, err := cli.Write([]byte{0}); err != nil { // kcp accepts on the first data
		b.Fatal(err)
	}
	srv := fastKCP(<-accepted)
	if _, err := io.ReadFull(srv, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	return cli, srv
}

var key = crypto.Key{9, 8, 7}

const protocolID = 0xbe7c

// netcodePair returns both ends of a netcode connection on loopback.
func netcodePair(b *testing.B) (*netcode.Conn, *netcode.Conn, func()) {
	l := must(netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: key, MaxClients: 4}))
	tok := must(token.Generate(&token.Params{
		ProtocolID: protocolID, ClientID: 1, PrivateKey: key, ExpireSeconds: 30, TimeoutSeconds: 5,
		ServerAddrs: []netip.AddrPort{netip.MustParseAddrPort(l.Addr().String())},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli := must(netcode.DialContext(ctx, tok))
	srv := must(l.AcceptConn(ctx))
	return cli, srv, func() { l.Close() }
}

// udpPair returns two UDP sockets on loopback connected to each other: a
// message connection without netcode's encryption.
func udpPair(b *testing.B) (*net.UDPConn, *net.UDPConn) {
	x := must(net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}))
	y := must(net.DialUDP("udp4", nil, x.LocalAddr().(*net.UDPAddr)))
	x.Close()
	x = must(net.DialUDP("udp4", x.LocalAddr().(*net.UDPAddr), y.LocalAddr().(*net.UDPAddr)))
	return x, y
}

// streams starts reliable Streams on both message connections.
func streams(b *testing.B, x, y reliable.MessageConn, cfg *reliable.Config) (*reliable.Stream, *reliable.Stream) {
	return must(reliable.NewStream(x, cfg)), must(reliable.NewStream(y, cfg))
}

// simConn is a message connection between two netsim addresses.
type simConn struct {
	pc   *netsim.Conn
	peer netip.AddrPort
}

func (c *simConn) Read(b []byte) (int, error) {
	for {
		n, from, err := c.pc.ReadFromUDPAddrPort(b)
		if err != nil || from == c.peer {
			return n, err
		}
	}
}
func (c *simConn) Write(b []byte) (int, error) { return c.pc.WriteToUDPAddrPort(b, c.peer) }
func (c *simConn) Close() error                { return c.pc.Close() }
func (c *simConn) LocalAddr() net.Addr         { return c.pc.LocalAddr() }
func (c *simConn) RemoteAddr() net.Addr        { return net.UDPAddrFromAddrPort(c.peer) }

// lossyLink is 5% loss and 50 ms RTT.
var lossyLink = netsim.Config{Latency: 25 * time.Millisecond, Loss: 0.05}

var (
	addrA = netip.MustParseAddrPort("10.9.0.1:1000")
	addrB = netip.MustParseAddrPort("10.9.0.2:2000")
)

func simConns(b *testing.B) (*netsim.Conn, *netsim.Conn, func()) {
	n := netsim.New(5, lossyLink)
	x := must(n.Listen(addrA)).(*netsim.Conn)
	y := must(n.Listen(addrB)).(*netsim.Conn)
	return x, y, func() { n.Close() }
}

// BenchmarkGoodput runs every contender in one run, for a side-by-side
// table.
func BenchmarkGoodput(b *testing.B) {
	fast := &reliable.Config{SendRate: 1 << 30, WindowBytes: window * 1168}
	bulk := &reliable.Config{WindowBytes: window * 1168}
	b.Run("loopback/reliable-over-netcode", func(b *testing.B) {
		x, y, stop := netcodePair(b)
		defer stop()
		sx, sy := streams(b, x, y, fast)
		goodput(b, sx, sy)
		sx.Close()
		sy.Close()
	})
	b.Run("loopback/reliable-over-udp", func(b *testing.B) {
		x, y := udpPair(b)
		sx, sy := streams(b, x, y, fast)
		goodput(b, sx, sy)
		sx.Close()
		sy.Close()
	})
	b.Run("loopback/kcp-over-udp", func(b *testing.B) {
		ln := must(kcp.ListenWithOptions("127.0.0.1:0", nil, 0, 0))
		defer ln.Close()
		cli, srv := kcpPair(b, ln, must(kcp.DialWithOptions(ln.Addr().String(), nil, 0, 0)))
		goodput(b, cli, srv)
		cli.Close()
		srv.Close()
	})
	b.Run("loopback/tcp", func(b *testing.B) {
		ln := must(net.Listen("tcp4", "127.0.0.1:0"))
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		cli := must(net.Dial("tcp4", ln.Addr().String()))
		srv := <-accepted
		goodput(b, cli, srv)
		cli.Close()
		srv.Close()
	})
	b.Run("netsim-5%loss-50msRTT/reliable", func(b *testing.B) {
		x, y, stop := simConns(b)
		defer stop()
		sx, sy := streams(b, &simConn{x, addrB}, &simConn{y, addrA}, bulk)
		goodput(b, sx, sy)
		sx.Close()
		sy.Close()
	})
	b.Run("netsim-5%loss-50msRTT/kcp", func(b *testing.B) {
		x, y, stop := simConns(b)
		defer stop()
		ln := must(kcp.ServeConn(nil, 0, 0, y))
		defer ln.Close()
		cli, srv := kcpPair(b, ln, must(kcp.NewConn3(1, net.UDPAddrFromAddrPort(addrB), nil, 0, 0, x)))
		goodput(b, cli, srv)
		cli.Close()
		srv.Close()
	})
}
