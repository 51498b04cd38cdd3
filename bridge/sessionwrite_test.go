package bridge_test

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/internal/transport"
)

// sessionPeer opens a raw WebSocket session to mux and returns it with its
// transport address, learnt from a first message.
func sessionPeer(t testing.TB, mux *bridge.Mux, url string) (*websocket.Conn, netip.AddrPort) {
	t.Helper()
	ws := rawWS(t, url)
	require.NoError(t, ws.Write(ctxT(t, 5*time.Second), websocket.MessageBinary, []byte("hello")))
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 16)
	_, addr, err := mux.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	require.True(t, bridge.IsTransportAddr(addr))
	return ws, addr
}

// TestMuxSessionBurst: a burst of datagrams for one session (written to
// the WebSocket in batches) arrives whole and in order, message by message,
// over several rounds.
func TestMuxSessionBurst(t *testing.T) {
	for _, size := range []int{1, 100, bridge.MaxTransportMessage} {
		mux, url := newBareMux(t, bridge.MuxConfig{SendQueue: 256})
		ws, addr := sessionPeer(t, mux, url)
		ctx := ctxT(t, 10*time.Second)
		ms := make([]transport.Message, 200)
		for round := range 3 {
			for i := range ms {
				p := bytes.Repeat([]byte{byte(i), byte(round)}, size)[:size]
				p[0] = byte(i)
				ms[i] = transport.Message{Buf: p, Addr: addr}
			}
			n, err := mux.WriteBatch(ms)
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

// BenchmarkMuxSessionWrite: rounds of 32 datagrams of 100 bytes for one
// WebSocket session, as a server answering many at once queues them, read
// by the peer.
func BenchmarkMuxSessionWrite(b *testing.B) {
	mux, url := newBareMux(b, bridge.MuxConfig{})
	ws, addr := sessionPeer(b, mux, url)
	const round = 32
	ms := make([]transport.Message, round)
	for i := range ms {
		ms[i] = transport.Message{Buf: make([]byte, 100), Addr: addr}
	}
	ctx := context.Background() // no deadline: no timer per read
	buf := make([]byte, bridge.MaxTransportMessage)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := mux.WriteBatch(ms); err != nil {
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
	if cpu := cpuTime(); cpu >= 0 {
		b.ReportMetric(float64((cpu-start).Microseconds())/float64(b.N*round), "cpu-µs/datagram")
	}
	b.ReportMetric(float64(b.N*round)/b.Elapsed().Seconds(), "datagrams/s")
}
