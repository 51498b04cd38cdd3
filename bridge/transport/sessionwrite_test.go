package transport_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	bridgetransport "github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// sessionPeer opens a raw WebSocket session to mux and returns it with its
// transport address, learnt from a first message.
func sessionPeer(t testing.TB, mux *bridgetransport.Mux, url string) (*websocket.Conn, netip.AddrPort) {
	t.Helper()
	ws := bridgetest.RawWS(t, url)
	require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageBinary, []byte("hello")))
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 16)
	_, addr, err := mux.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	require.True(t, bridgetransport.IsSessionAddr(addr))
	return ws, addr
}

// TestMuxSessionBurst: a burst of datagrams for one session (written to
// the WebSocket in batches) arrives whole and in order, message by message,
// over several rounds.
func TestMuxSessionBurst(t *testing.T) {
	for _, size := range []int{1, 100, protocol.MaxPacketBytes} {
		mux, url := newBareMux(t, bridgetransport.MuxConfig{SendQueue: 256})
		ws, addr := sessionPeer(t, mux, url)
		ctx := bridgetest.Ctx(t, 10*time.Second)
		ms := make([]transport.Message, 200)
		for round := range 3 {
			for i := range ms {
				p := bytes.Repeat([]byte{byte(i), byte(round)}, size)[:size]
				p[0] = byte(i)
				ms[i] = transport.Message{Buf: p, Addr: addr}
			}
			n, err := transport.New(mux).WriteBatch(ms)
			require.NoError(t, err)
			require.Equal(t, len(ms), n)
			for i := range ms {
				typ, got, err := ws.Read(ctx)
				require.NoError(t, err, "size %d round %d message %d", size, round, i)
				require.Equal(t, websocket.MessageBinary, typ)
				require.Equal(t, ms[i].Buf, got, "size %d round %d message %d", size, round, i)
			}
		}
		require.Zero(t, mux.Dropped())
	}
}

// TestMuxDirectWrites: a lone datagram for a session whose writer is idle
// is written by the sender itself, without waking the writer; a run of
// several for one session in a batch is queued for the writer, which
// sends it together. Either way the peer reads every datagram, in order.
func TestMuxDirectWrites(t *testing.T) {
	mux, url := newBareMux(t, bridgetransport.MuxConfig{})
	ws, addr := sessionPeer(t, mux, url)
	ctx := bridgetest.Ctx(t, 10*time.Second)
	read := func(want []byte) {
		t.Helper()
		typ, got, err := ws.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, websocket.MessageBinary, typ)
		require.Equal(t, want, got)
	}
	for i := range 100 {
		p := bytes.Repeat([]byte{byte(i)}, 100)
		_, err := mux.WriteToUDPAddrPort(p, addr)
		require.NoError(t, err)
		read(p)
	}
	assert.Zero(t, bridgetransport.WriterWakes(mux), "lone datagrams woke the writer")

	tc := transport.New(mux)
	ms := make([]transport.Message, 50)
	for i := range ms {
		ms[i] = transport.Message{Buf: bytes.Repeat([]byte{byte(i), 7}, 50), Addr: addr}
	}
	n, err := tc.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	lone := []byte("after the run")
	_, err = mux.WriteToUDPAddrPort(lone, addr)
	require.NoError(t, err)
	for i := range ms {
		read(ms[i].Buf)
	}
	read(lone)
	assert.NotZero(t, bridgetransport.WriterWakes(mux), "a run of datagrams for one session is the writer's")
	require.Zero(t, mux.Dropped())
}

// BenchmarkMuxSessionWrite: rounds of 32 datagrams of 100 bytes for one
// WebSocket session, as a server answering many at once queues them, read
// by the peer.
func BenchmarkMuxSessionWrite(b *testing.B) {
	mux, url := newBareMux(b, bridgetransport.MuxConfig{})
	ws, addr := sessionPeer(b, mux, url)
	const round = 32
	ms := make([]transport.Message, round)
	for i := range ms {
		ms[i] = transport.Message{Buf: make([]byte, 100), Addr: addr}
	}
	ctx := context.Background() // no deadline: no timer per read
	buf := make([]byte, protocol.MaxPacketBytes)
	tc := transport.New(mux) // the batched I/O a Listener uses
	b.ReportAllocs()
	start := bridgetest.CPUTime()
	for b.Loop() {
		if _, err := tc.WriteBatch(ms); err != nil {
			b.Fatal(err)
		}
		for range round {
			_, r, err := ws.Reader(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := r.Read(buf); err != nil {
					break
				}
			}
		}
	}
	if cpu := bridgetest.CPUTime(); cpu >= 0 {
		b.ReportMetric(float64((cpu-start).Microseconds())/float64(b.N*round), "cpu-µs/datagram")
	}
	b.ReportMetric(float64(b.N*round)/b.Elapsed().Seconds(), "datagrams/s")
}

// countingMux counts the calls a Listener makes: batched, and one
// datagram per call. It offers its counting batcher as the Mux offers its
// own, through an embedded transport.Batched, which shadows the Mux's.
type countingMux struct {
	*bridgetransport.Mux
	transport.Batched
	readBatches, writeBatches, singles atomic.Int64
	sessionReads                       atomic.Int64 // WebSocket datagrams read in batches
}

func newCountingMux(m *bridgetransport.Mux) *countingMux {
	c := &countingMux{Mux: m}
	c.Batched = transport.Batched{B: countingBatcher{c, transport.New(m)}}
	return c
}

// countingBatcher is a countingMux's batched I/O: the Mux's, counted.
type countingBatcher struct {
	c     *countingMux
	inner transport.Batcher
}

func (b countingBatcher) ReadBatch(ms []transport.Message) (int, error) {
	b.c.readBatches.Add(1)
	n, err := b.inner.ReadBatch(ms)
	for i := range ms[:n] {
		if bridgetransport.IsSessionAddr(ms[i].Addr) {
			b.c.sessionReads.Add(1)
		}
	}
	return n, err
}

func (b countingBatcher) WriteBatch(ms []transport.Message) (int, error) {
	b.c.writeBatches.Add(1)
	return b.inner.WriteBatch(ms)
}

func (c *countingMux) ReadFrom(b []byte) (int, net.Addr, error) {
	c.singles.Add(1)
	return c.Mux.ReadFrom(b)
}

func (c *countingMux) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	c.singles.Add(1)
	return c.Mux.ReadFromUDPAddrPort(b)
}

func (c *countingMux) WriteTo(b []byte, addr net.Addr) (int, error) {
	c.singles.Add(1)
	return c.Mux.WriteTo(b, addr)
}

func (c *countingMux) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	c.singles.Add(1)
	return c.Mux.WriteToUDPAddrPort(b, addr)
}

// TestListenerUsesMuxBatches: a netcode Listener over a Mux reads and
// writes it through the batched path (ReadBatch, WriteBatch), for its
// WebSocket clients as for UDP ones, and never one datagram per call.
func TestListenerUsesMuxBatches(t *testing.T) {
	var cm *countingMux
	s := bridgetest.NewMuxServerVia(t, 4, bridgetransport.MuxConfig{}, func(m *bridgetransport.Mux) net.PacketConn {
		cm = newCountingMux(m)
		return cm
	})
	require.NoError(t, bridgetest.Echo(t, s.DialWS(t), 0, 10, false))
	require.NoError(t, bridgetest.Echo(t, s.DialUDP(t), 1, 10, true))
	assert.Positive(t, cm.readBatches.Load())
	assert.Positive(t, cm.writeBatches.Load())
	assert.Zero(t, cm.singles.Load())
}

// TestMuxSessionAllocs: a datagram from a WebSocket peer read from the Mux
// and one written back to it (straight to the socket or through the
// session's writer) allocate nothing in steady state, on either side.
func TestMuxSessionAllocs(t *testing.T) {
	race.Skip(t)
	mux, url := newBareMux(t, bridgetransport.MuxConfig{})
	ws, addr := sessionPeer(t, mux, url)
	ws.SetReadLimit(protocol.MaxPacketBytes)
	ctx := context.Background()
	msg := make([]byte, 100)
	buf := make([]byte, protocol.MaxPacketBytes)
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(time.Minute)))
	roundTrip := func() {
		if err := ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
		n, from, err := mux.ReadFromUDPAddrPort(buf)
		if err != nil || from != addr {
			t.Fatal(err, from)
		}
		if _, err := mux.WriteToUDPAddrPort(buf[:n], addr); err != nil {
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
	assert.Zero(t, testing.AllocsPerRun(1000, roundTrip), "allocations per datagram, both ways")
}
