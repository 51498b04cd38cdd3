package reliable

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

// goodputChunk is what each benchmark iteration writes.
const goodputChunk = 1 << 20

// benchGoodput writes b.N chunks from w and reads them at r, reporting
// the goodput through SetBytes.
func benchGoodput(b *testing.B, w io.WriteCloser, r io.ReadCloser) {
	b.Helper()
	buf := make([]byte, goodputChunk)
	pattern(buf, 1)
	b.SetBytes(goodputChunk)
	done := make(chan error, 1)
	want := int64(b.N) * goodputChunk
	go func() {
		n, err := io.CopyN(io.Discard, r, want)
		if err == nil && n != want {
			err = io.ErrUnexpectedEOF
		}
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
	w.Close()
	r.Close()
}

// netcodeConns returns both ends of a netcode connection on UDP loopback
// and a function closing the listener.
func netcodeConns(tb testing.TB, network, addr string) (cli, srv *netcode.Conn, stop func()) {
	tb.Helper()
	l, err := netcode.Listen(network, addr, serverConfig())
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err = netcode.DialContext(ctx, mint(tb, netip.MustParseAddrPort(l.Addr().String())))
	require.NoError(tb, err)
	srv, err = l.AcceptConn(ctx)
	require.NoError(tb, err)
	return cli, srv, func() { l.Close() }
}

// bulkWindowBytes is the window the goodput benchmarks set: a bulk
// transfer's, the bandwidth-delay product of about 40 MB/s at 100 ms (and
// the default before it was cut to 256 KiB for servers of many clients).
const bulkWindowBytes = 4096 * 1168

// BenchmarkStreamGoodput compares the stream's goodput with TCP's on
// loopback, and measures it under loss on netsim.
func BenchmarkStreamGoodput(b *testing.B) {
	b.Run("netcode-loopback", func(b *testing.B) {
		nc, ns, stop := netcodeConns(b, "udp4", "127.0.0.1:0")
		defer stop()
		cfg := &Config{SendRate: 1 << 30, WindowBytes: bulkWindowBytes}
		cli, err := NewStream(nc, cfg)
		require.NoError(b, err)
		srv, err := NewStream(ns, cfg)
		require.NoError(b, err)
		benchGoodput(b, cli, srv)
	})
	b.Run("tcp-loopback", func(b *testing.B) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := l.Accept()
			accepted <- c
		}()
		cli, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		benchGoodput(b, cli, <-accepted)
	})
	b.Run("netsim-5%loss-50msRTT", func(b *testing.B) {
		a, c := simPair(b, 5, netsim.Config{Latency: 25 * time.Millisecond, Loss: 0.05})
		cfg := &Config{WindowBytes: bulkWindowBytes}
		sa, err := NewStream(a, cfg)
		if err != nil {
			b.Fatal(err)
		}
		sc, err := NewStream(c, cfg)
		if err != nil {
			b.Fatal(err)
		}
		benchGoodput(b, sa, sc)
	})
}

// BenchmarkMessageLatency sends a small reliable message every 2 ms over
// a 50 ms RTT netsim link and reports the one-way delivery latency's
// median and 99th percentile.
func BenchmarkMessageLatency(b *testing.B) {
	for _, loss := range []float64{0, 0.05} {
		name := map[float64]string{0: "loss0%", 0.05: "loss5%"}[loss]
		b.Run(name, func(b *testing.B) {
			a, c := simPair(b, 9, netsim.Config{Latency: 25 * time.Millisecond, Loss: loss})
			cfg := &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered}}}
			sa, err := NewSession(a, cfg)
			if err != nil {
				b.Fatal(err)
			}
			sc, err := NewSession(c, cfg)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, 64)
				for range b.N {
					n, err := sc.Channel(0).Receive(buf)
					if err != nil {
						done <- err
						return
					}
					sent := time.Unix(0, int64(binary.LittleEndian.Uint64(buf[:n])))
					lat = append(lat, time.Since(sent))
				}
				done <- nil
			}()
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			msg := make([]byte, 32)
			b.ResetTimer()
			for range b.N {
				<-tick.C
				binary.LittleEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
				if err := sa.Channel(0).Send(msg); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
			b.ReportMetric(0, "ns/op")
			closeBoth(b, sa, sc)
		})
	}
}

// BenchmarkMessage measures a 1 KiB reliable message plus a 200-byte
// unreliable one through the channel core (no I/O), and through a Session
// over netcode on loopback, with allocations.
func BenchmarkMessage(b *testing.B) {
	b.Run("core", func(b *testing.B) {
		l := newCoreLink(b, 1024, 200, 100)
		b.ReportAllocs()
		b.SetBytes(int64(len(l.msg) + len(l.umsg)))
		for range b.N {
			if !l.step() {
				b.Fatal("message not delivered")
			}
		}
	})
	b.Run("session-netcode-loopback", func(b *testing.B) {
		nc, sc, stop := netcodeConns(b, "udp4", "127.0.0.1:0")
		defer stop()
		x, err := NewSession(nc, nil)
		if err != nil {
			b.Fatal(err)
		}
		y, err := NewSession(sc, nil)
		if err != nil {
			b.Fatal(err)
		}
		msg := make([]byte, 1024)
		buf := make([]byte, 2048)
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		b.ResetTimer()
		for range b.N {
			if err := x.Channel(0).Send(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := y.Channel(0).Receive(buf); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		closeBoth(b, x, y)
	})
}

// BenchmarkStreamCore moves a bulk transfer through two stream cores in
// memory, with no I/O, netcode or goroutines: the cost of the reliable
// layer alone per MiB (chunking, packets, acks, windows, the Endpoint's
// headers and bookkeeping), with allocations, in process CPU seconds per
// GB (both ends together), which load on the machine moves less than the
// wall time.
func BenchmarkStreamCore(b *testing.B) {
	now := time.Unix(1000, 0)
	a, c, toA, toB := streamCores(b, now)
	src := make([]byte, goodputChunk)
	pattern(src, 3)
	dst := make([]byte, 64<<10)
	snd, rcv := &a.chans[0].snd, &c.chans[0].rcv
	move := func() {
		left, got := len(src), 0
		for got < len(src) {
			now = now.Add(20 * time.Microsecond)
			a.setTime(now)
			if k := min(snd.room(), left); k > 0 {
				snd.write(src[len(src)-left : len(src)-left+k])
				left -= k
			}
			a.flush()
			toB.deliver(c, now)
			for rcv.ready > 0 {
				got += rcv.read(dst, true)
			}
			if rcv.advertise {
				c.flush()
			}
			c.tick(now) // the receiver's ack delay runs out
			toA.deliver(a, now)
		}
	}
	move()
	b.SetBytes(goodputChunk)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for range b.N {
		move()
	}
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/(float64(b.N)*goodputChunk/1e9), "CPU-s/GB")
}
