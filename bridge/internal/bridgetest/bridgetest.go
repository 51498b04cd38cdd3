// Package bridgetest holds the test scaffolding the relay's tests (package
// bridge) and the transport's (package bridge/transport) share: a netcode
// echo server behind a transport Mux, loopback sockets, payloads and the
// polling and timing helpers. It is imported only by tests.
package bridgetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/transport"
)

// ProtocolID is the protocol id of the tests' servers and tokens.
const ProtocolID = 0x1122334455667788

// Ctx returns a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond for up to 5 s.
func Eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond, msg)
}

// Closed reads ws until its close frame arrives, within the given time,
// and returns it; payloads still in flight are skipped.
func Closed(t testing.TB, ws *websocket.Conn, within time.Duration) websocket.CloseError {
	t.Helper()
	ctx := Ctx(t, within)
	for {
		_, _, err := ws.Read(ctx)
		if err == nil {
			continue // payloads still in flight
		}
		var ce websocket.CloseError
		require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
		return ce
	}
}

var (
	idMu     sync.Mutex
	clientID uint64 = 1000
)

// NextClientID returns a client id no earlier call returned.
func NextClientID() uint64 {
	idMu.Lock()
	defer idMu.Unlock()
	clientID++
	return clientID
}

// EchoUntilError writes back every payload c reads, until a read or a
// write fails (the connection ended).
func EchoUntilError(c net.Conn) {
	buf := make([]byte, netcode.MaxPayloadBytes)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// SendEvery calls send every period on a goroutine of its own until send
// fails or the returned stop is called; stop waits for the goroutine.
func SendEvery(period time.Duration, send func() error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if send() != nil {
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// ReadTicks reads the binary "tick" messages ws receives for d; the
// session ending meanwhile fails the test.
func ReadTicks(t *testing.T, ws *websocket.Conn, d time.Duration, who string) {
	t.Helper()
	ctx := Ctx(t, 30*time.Second)
	received := 0
	for until := time.Now().Add(d); time.Now().Before(until); {
		typ, b, err := ws.Read(ctx)
		require.NoError(t, err, "session ended after %d messages to %s", received, who)
		require.Equal(t, websocket.MessageBinary, typ)
		require.Equal(t, "tick", string(b))
		received++
	}
}

// Loopbacks are the UDP networks a test runs on, with their loopback
// address.
var Loopbacks = []struct{ Network, Addr string }{
	{"udp4", "127.0.0.1:0"},
	{"udp6", "[::1]:0"},
}

// ListenLoopback opens a UDP socket on the network's loopback; it skips
// the IPv6 variant on a machine without an IPv6 loopback, decided by a
// plain socket.
func ListenLoopback(t testing.TB, network, addr string) *net.UDPConn {
	t.Helper()
	if network == "udp6" {
		pc, err := net.ListenPacket("udp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback on this machine: %v", err)
		}
		pc.Close()
	}
	uc, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	require.NoError(t, err)
	return uc
}

// NewMuxOn serves a Mux over a UDP socket on network, and returns it with
// its WebSocket URL.
func NewMuxOn(t testing.TB, network, addr string, cfg transport.MuxConfig) (*transport.Mux, string) {
	t.Helper()
	mux := transport.NewMux(ListenLoopback(t, network, addr), &cfg)
	hs := httptest.NewServer(mux.Handler())
	t.Cleanup(func() {
		mux.Close()
		hs.Close()
	})
	return mux, "ws" + strings.TrimPrefix(hs.URL, "http")
}

// RawWS opens a WebSocket to a Mux offering the transport subprotocol.
func RawWS(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(Ctx(t, 5*time.Second), url, &websocket.DialOptions{
		Subprotocols: []string{transport.Subprotocol},
	})
	require.NoError(t, err)
	require.Equal(t, transport.Subprotocol, ws.Subprotocol())
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// Payload is message i of a test: its size cycles through 1..1200.
func Payload(client, i int) []byte {
	size := 1 + (i*37+client*11)%netcode.MaxPayloadBytes
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*7 + j + client*13)
	}
	if size >= 2 {
		b[0], b[1] = byte(client), byte(i)
	}
	return b
}

// Echo sends n payloads one at a time and checks each echo byte for byte.
// Over UDP a lost payload is sent again.
func Echo(t testing.TB, c *netcode.Conn, client, n int, udp bool) error {
	buf := make([]byte, netcode.MaxPayloadBytes)
	for i := range n {
		p := Payload(client, i)
		for attempt := 0; ; attempt++ {
			if _, err := c.Write(p); err != nil {
				return fmt.Errorf("client %d write %d: %w", client, i, err)
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			m, err := c.Read(buf)
			if err != nil {
				if udp && attempt < 3 && errors.Is(err, os.ErrDeadlineExceeded) {
					continue
				}
				return fmt.Errorf("client %d read %d: %w", client, i, err)
			}
			if udp && !bytes.Equal(buf[:m], p) && m >= 2 && buf[1] != byte(i) {
				continue // a late echo of an earlier resend
			}
			if !bytes.Equal(buf[:m], p) {
				return fmt.Errorf("client %d message %d: echo differs (%d bytes, want %d)", client, i, m, len(p))
			}
			break
		}
	}
	c.SetReadDeadline(time.Time{})
	return nil
}
