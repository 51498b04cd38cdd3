package netcode_test

import (
	"testing"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/stretchr/testify/require"
)

// echoRoundTrip sends msg from cli, reads it on srv, echoes it, and reads
// the echo on cli.
func echoRoundTrip(tb testing.TB, cli, srv *netcode.Conn, msg, buf []byte) {
	if _, err := cli.Write(msg); err != nil {
		tb.Fatal(err)
	}
	n, err := srv.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := srv.Write(buf[:n]); err != nil {
		tb.Fatal(err)
	}
	if _, err := cli.Read(buf); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkEchoRoundTrip measures one payload each way over loopback UDP,
// through both Conns, both goroutine sets and the real sockets.
func BenchmarkEchoRoundTrip(b *testing.B) {
	for _, size := range []int{8, 100, 1200} {
		b.Run(byteSize(size), func(b *testing.B) {
			l := listen(b, "udp4", "127.0.0.1:0", nil)
			cli, srv := pair(b, l)
			msg := make([]byte, size)
			buf := make([]byte, netcode.MaxPayloadBytes)
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			h := startHandoffs()
			for b.Loop() {
				echoRoundTrip(b, cli, srv, msg, buf)
			}
			h.report(b, b.N)
		})
	}
}

func byteSize(n int) string {
	switch n {
	case 8:
		return "8B"
	case 100:
		return "100B"
	}
	return "1200B"
}

// TestSteadyStateAllocations checks the hot path's promise: once connected,
// a payload costs no allocation on either side (counted for the whole
// process, so the reader and ticker goroutines are included), whichever
// path the transport takes.
func TestSteadyStateAllocations(t *testing.T) {
	race.Skip(t)
	onEachPath(t, func(t *testing.T, network, addr string) {
		l := listen(t, network, addr, nil)
		cli, srv := pair(t, l)
		msg := make([]byte, 100)
		buf := make([]byte, netcode.MaxPayloadBytes)
		for range 200 { // warm the pools
			echoRoundTrip(t, cli, srv, msg, buf)
		}
		allocs := testing.AllocsPerRun(2000, func() { echoRoundTrip(t, cli, srv, msg, buf) })
		t.Logf("%.3f allocations per round trip (4 payload packets through 2 conns)", allocs)
		// The ticker's keep-alive bookkeeping and the runtime's timers
		// may allocate now and then; one in ten round trips is the bound.
		require.Less(t, allocs, 0.1)
	})
}

// BenchmarkWindow1 is the window-1 round trip as netcode bench runs it: a
// client writes a payload and reads its echo, which the server's own
// goroutine reads and writes back; every hand-off between goroutines is
// in the figures.
func BenchmarkWindow1(b *testing.B) {
	l := listen(b, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(b, l)
	done := make(chan struct{})
	go func() {
		defer close(done)
		echoUntilError(srv)
	}()
	msg := make([]byte, 100)
	buf := make([]byte, netcode.MaxPayloadBytes)
	b.ReportAllocs()
	h := startHandoffs()
	for b.Loop() {
		if _, err := cli.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := cli.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
	h.report(b, b.N)
	srv.Close()
	<-done
}
