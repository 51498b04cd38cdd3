package transport_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
)

// TestMuxReadQueueDrops: past ReadQueue, datagrams are dropped and
// counted, and the queued ones are read in order.
func TestMuxReadQueueDrops(t *testing.T) {
	mux, _ := newBareMux(t, transport.MuxConfig{ReadQueue: 2})
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer peer.Close()
	const sent = 5
	for i := range sent {
		_, err := peer.WriteTo([]byte{byte(i)}, mux.LocalAddr())
		require.NoError(t, err)
	}
	bridgetest.Eventually(t, func() bool { return mux.Dropped() == sent-2 }, "drops not counted")
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 10)
	for i := range 2 {
		n, from, err := mux.ReadFrom(buf)
		require.NoError(t, err)
		assert.Equal(t, []byte{byte(i)}, buf[:n])
		assert.Equal(t, peer.LocalAddr().String(), from.String())
	}
}

// TestTransportConnDrainsThenEnds: what the server sent before it closed
// the WebSocket is read first; then reads fail with an error that wraps
// net.ErrClosed and names the close.
func TestTransportConnDrainsThenEnds(t *testing.T) {
	closedWS := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{transport.Subprotocol}})
		if err != nil {
			return
		}
		for i := range 3 {
			_ = ws.Write(r.Context(), websocket.MessageBinary, []byte(fmt.Sprint("msg ", i)))
		}
		ws.Close(websocket.StatusNormalClosure, "bye")
		close(closedWS)
	}))
	defer hs.Close()
	c, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(t, err)
	<-closedWS // the close handshake is over: the client's reader has ended
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 100)
	for i := range 3 {
		n, _, err := c.ReadFrom(buf)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint("msg ", i), string(buf[:n]))
	}
	_, _, err = c.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed)
	assert.Contains(t, err.Error(), "bye")
	_, _, err = c.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed, "and again")
	require.NoError(t, c.Close())
	_, _, err = c.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, c.Close(), net.ErrClosed)
}

// scriptedUDP is a fakeUDP whose reads also return scripted errors, in
// order with the datagrams.
type scriptedUDP struct {
	*fakeUDP
	steps chan any // fakeDatagram or error
}

func (f *scriptedUDP) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case s := <-f.steps:
		if err, ok := s.(error); ok {
			return 0, nil, err
		}
		d := s.(fakeDatagram)
		return copy(b, d.b), d.addr, nil
	case <-f.closed:
		return 0, nil, net.ErrClosed
	}
}

// TestMuxUDPErrors: a transient error of the UDP socket (an ICMP error)
// is ridden out; a lasting one ends the Mux's reads, after what is queued,
// with that error.
func TestMuxUDPErrors(t *testing.T) {
	f := &scriptedUDP{fakeUDP: newFakeUDP(), steps: make(chan any, 8)}
	peer := &net.UDPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 5000}
	boom := errors.New("socket gone")
	f.steps <- fakeDatagram{[]byte("a"), peer}
	f.steps <- &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError("recvfrom", syscall.ECONNREFUSED)}
	f.steps <- fakeDatagram{[]byte("b"), peer}
	f.steps <- boom
	f.steps <- fakeDatagram{[]byte("never read"), peer}
	mux := transport.NewMux(f, &transport.MuxConfig{})
	defer mux.Close()
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 100)
	for _, want := range []string{"a", "b"} {
		n, from, err := mux.ReadFrom(buf)
		require.NoError(t, err)
		assert.Equal(t, want, string(buf[:n]))
		assert.Equal(t, peer.String(), from.String())
	}
	_, _, err := mux.ReadFrom(buf)
	require.ErrorIs(t, err, boom)
	_, _, err = mux.ReadFrom(buf)
	require.ErrorIs(t, err, boom, "and again")
	require.NoError(t, mux.Close())
	_, _, err = mux.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestMuxReadQueueFromCap: by default the read queue has room for
// 4 datagrams per session of the cap, and at least 1024, as MuxConfig
// documents; past the room, datagrams are dropped.
func TestMuxReadQueueFromCap(t *testing.T) {
	tests := []struct {
		name string
		cfg  transport.MuxConfig
		room int
	}{
		{"floor", transport.MuxConfig{MaxSessions: 100}, 1024},
		{"per session", transport.MuxConfig{MaxSessions: 600}, 600 * 4},
		{"default cap", transport.MuxConfig{}, 1024 * 4},
		{"explicit", transport.MuxConfig{MaxSessions: 600, ReadQueue: 3}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux, url := newBareMux(t, tt.cfg)
			const over = 5
			ctx := bridgetest.Ctx(t, 30*time.Second)
			// Sessions that stay within their share of 64 each.
			var ws *websocket.Conn
			for i := range tt.room + over {
				if i%64 == 0 {
					ws = bridgetest.RawWS(t, url)
				}
				require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte{byte(i), byte(i >> 8)}))
			}
			bridgetest.Eventually(t, func() bool { return mux.Dropped() == over }, "drops past the room")
			require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
			buf := make([]byte, 10)
			for range tt.room {
				n, _, err := mux.ReadFrom(buf)
				require.NoError(t, err)
				require.Equal(t, 2, n)
			}
			assert.Equal(t, uint64(over), mux.Dropped())
			require.NoError(t, mux.SetReadDeadline(time.Now()))
			_, _, err := mux.ReadFrom(buf)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no more than the room was queued")
		})
	}
}

// TestMuxSessionShare: one WebSocket session has at most its share (64)
// of datagrams waiting in the read queue; past it, its new ones are
// dropped, while another session and a UDP client still get theirs in.
// Once the server reads, the session has room again.
func TestMuxSessionShare(t *testing.T) {
	const share = 64
	mux, url := newBareMux(t, transport.MuxConfig{ReadQueue: 1024})
	flood := bridgetest.RawWS(t, url)
	ctx := bridgetest.Ctx(t, 30*time.Second)
	const sent = 200
	for i := range sent {
		require.NoError(t, flood.Write(ctx, websocket.MessageBinary, []byte{1, byte(i)}))
	}
	bridgetest.Eventually(t, func() bool { return mux.Dropped() == sent-share }, "the flood's excess dropped")

	other := bridgetest.RawWS(t, url)
	for i := range 10 {
		require.NoError(t, other.Write(ctx, websocket.MessageBinary, []byte{2, byte(i)}))
	}
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer peer.Close()
	_, err = peer.WriteTo([]byte{3, 0}, mux.LocalAddr())
	require.NoError(t, err)

	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 4)
	got := map[byte]int{}
	for range share + 10 + 1 {
		n, _, err := mux.ReadFrom(buf)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		got[buf[0]]++
	}
	assert.Equal(t, map[byte]int{1: share, 2: 10, 3: 1}, got)
	assert.Equal(t, uint64(sent-share), mux.Dropped())

	// Read, the flood's share is free again.
	require.NoError(t, flood.Write(ctx, websocket.MessageBinary, []byte{1, 0xff}))
	n, _, err := mux.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0xff}, buf[:n])
}
