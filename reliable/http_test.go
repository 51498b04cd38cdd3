package reliable

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testProtocolID = 0x7265_6c69_6162_6c65

var testKey = crypto.Key{0x52, 0x45, 0x4c, 1, 2, 3}

// families are the real-UDP variants every feature test runs on.
var families = []struct{ name, network, addr string }{
	{"ipv4", "udp4", "127.0.0.1:0"},
	{"ipv6", "udp6", "[::1]:0"},
}

// skipWithoutIPv6 skips when the machine has no IPv6 loopback.
func skipWithoutIPv6(t testing.TB, network string) {
	t.Helper()
	if network != "udp6" {
		return
	}
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	pc.Close()
}

// mint returns a connect token for the server at addr.
func mint(t testing.TB, addr netip.AddrPort) []byte {
	t.Helper()
	tok, err := token.Generate(&token.Params{
		ProtocolID:     testProtocolID,
		ClientID:       42,
		PrivateKey:     testKey,
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
		ServerAddrs:    []netip.AddrPort{addr},
	})
	require.NoError(t, err)
	return tok
}

func serverConfig() *netcode.ServerConfig {
	return &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 8}
}

const (
	getBytes  = 5_000_000
	postBytes = 1 << 20
)

// httpOver serves HTTP on l (wrapped as a stream listener) and runs a GET
// of 5 MB and a POST of 1 MB through a client dialling with d.
func httpOver(t *testing.T, l net.Listener, d *Dialer) {
	body := make([]byte, getBytes)
	pattern(body, 5)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	})
	mux.HandleFunc("POST /sum", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Bytes", itoa(n))
		w.Write([]byte(hex.EncodeToString(h.Sum(nil))))
	})
	rl, err := NewListener(l, nil)
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(rl) }()

	tr := &http.Transport{DialContext: d.DialContext}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}

	resp, err := client.Get("http://game.example/big")
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, bytes.Equal(body, got), "GET: %d bytes, want %d", len(got), len(body))

	post := make([]byte, postBytes)
	pattern(post, 6)
	resp, err = client.Post("http://game.example/sum", "application/octet-stream", bytes.NewReader(post))
	require.NoError(t, err)
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	sum := sha256.Sum256(post)
	assert.Equal(t, hex.EncodeToString(sum[:]), string(got))
	assert.Equal(t, itoa(postBytes), resp.Header.Get("X-Bytes"))

	tr.CloseIdleConnections()
	require.NoError(t, srv.Close())
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
}

func itoa(n int64) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func TestHTTPOverUDP(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			skipWithoutIPv6(t, f.network)
			l, err := netcode.Listen(f.network, f.addr, serverConfig())
			require.NoError(t, err)
			addr := netip.MustParseAddrPort(l.Addr().String())
			d := &Dialer{Token: func(context.Context, string, string) ([]byte, error) { return mint(t, addr), nil }}
			httpOver(t, l, d)
		})
	}
}

func TestHTTPOverNetsim(t *testing.T) {
	n := netsim.New(10, netsim.Config{Latency: 5 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.10})
	defer n.Close()
	srvAddr := netip.MustParseAddrPort("10.1.0.1:40000")
	pc, err := n.Listen(srvAddr)
	require.NoError(t, err)
	l, err := netcode.NewListener(pc, serverConfig())
	require.NoError(t, err)
	d := &Dialer{
		Netcode: netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
			return n.Listen(netip.MustParseAddrPort("10.1.0.2:0"))
		}},
		Token: func(context.Context, string, string) ([]byte, error) { return mint(t, srvAddr), nil },
	}
	httpOver(t, l, d)
}

// TestStreamPeerGone: when the netcode connection ends without the
// stream's end (the peer's process died, say), Read fails with
// io.ErrUnexpectedEOF after the data, and Write fails.
func TestStreamPeerGone(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			skipWithoutIPv6(t, f.network)
			nc, ns, stop := netcodeConns(t, f.network, f.addr)
			defer stop()
			cli, err := NewStream(nc, nil)
			require.NoError(t, err)
			srv, err := NewStream(ns, nil)
			require.NoError(t, err)

			_, err = cli.Write([]byte("bye"))
			require.NoError(t, err)
			buf := make([]byte, 3)
			_, err = io.ReadFull(srv, buf)
			require.NoError(t, err)
			assert.Equal(t, "bye", string(buf))
			require.NoError(t, nc.Close()) // under the stream: no FIN
			_, err = srv.Read(buf)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Contains(t, err.Error(), srv.RemoteAddr().String(), "the error names the peer")
			_, err = srv.Write([]byte("x"))
			assert.ErrorIs(t, err, io.ErrClosedPipe)
			require.NoError(t, srv.Close())
			require.NoError(t, cli.Close())
		})
	}
}

// TestSessionOverUDP runs both channel kinds over netcode on real UDP.
func TestSessionOverUDP(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			skipWithoutIPv6(t, f.network)
			nc, ns, stop := netcodeConns(t, f.network, f.addr)
			defer stop()
			cli, err := NewSession(nc, nil)
			require.NoError(t, err)
			srv, err := NewSession(ns, nil)
			require.NoError(t, err)
			sizes := []int{8, 1000, 5000, 100_000}
			// More than the send buffer and the window hold (256 KiB
			// each): Send blocks until the receiver reads.
			sent := make(chan error, 1)
			go func() {
				for i := range 20 {
					if err := cli.Channel(1).Send(selfChecking(i, 8+i*100)); err != nil {
						sent <- err
						return
					}
					if err := cli.Channel(0).Send(selfChecking(i, sizes[i%len(sizes)])); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			buf := make([]byte, 100_000)
			for i := range 20 {
				n, err := srv.Channel(0).Receive(buf)
				require.NoError(t, err)
				got, err := checkMessage(buf[:n])
				require.NoError(t, err)
				require.Equal(t, i, got)
			}
			require.NoError(t, <-sent)
			// Loopback loses nothing here, but unreliable is unreliable:
			// check what came, not that everything did.
			require.NoError(t, srv.Channel(1).SetReadDeadline(time.Now().Add(200*time.Millisecond)))
			seen := map[int]bool{}
			for {
				n, err := srv.Channel(1).Receive(buf)
				if err != nil {
					require.ErrorIs(t, err, os.ErrDeadlineExceeded)
					break
				}
				i, err := checkMessage(buf[:n])
				require.NoError(t, err)
				require.False(t, seen[i], "message %d twice", i)
				seen[i] = true
			}
			assert.NotEmpty(t, seen)
			closeBoth(t, cli, srv)
		})
	}
}

func TestDialerErrors(t *testing.T) {
	_, err := (&Dialer{}).DialContext(context.Background(), "udp", "x")
	assert.ErrorContains(t, err, "no Token")
	boom := errors.New("no token for you")
	_, err = (&Dialer{Token: func(context.Context, string, string) ([]byte, error) { return nil, boom }}).DialContext(context.Background(), "udp", "x")
	assert.ErrorIs(t, err, boom)
	tok := func(b []byte) func(context.Context, string, string) ([]byte, error) {
		return func(context.Context, string, string) ([]byte, error) { return b, nil }
	}
	_, err = (&Dialer{Token: tok([]byte("not a token"))}).Dial("udp", "x")
	assert.ErrorIs(t, err, netcode.ErrInvalidConnectToken)
	_, err = (&Dialer{Config: &Config{MaxPacketBytes: 1}, Token: tok(nil)}).DialContext(context.Background(), "udp", "x")
	assert.ErrorIs(t, err, errConfig)
	_, err = NewListener(nil, &Config{MaxPacketBytes: 1})
	assert.ErrorIs(t, err, errConfig)
	_, err = NewStream(nil, &Config{MaxPacketBytes: 1})
	assert.ErrorIs(t, err, errConfig)
}
