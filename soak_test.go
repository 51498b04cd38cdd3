package netcode_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/netsim"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/require"
)

var soakFor = flag.Duration("soak", 0, "wall-clock duration of the long soak test (0: the short CI version)")

// TestSoakNetsim runs the real Listener and Dialer, with all their
// goroutines, over an in-memory network with 10% loss, jitter, duplication
// and reordering: 64 clients connect, exchange payloads, disconnect and
// reconnect at random, and the server kicks some. No connection may end
// other than by those decisions, every slot must be free at the end, and
// TestMain's goleak check proves every goroutine exited.
func TestSoakNetsim(t *testing.T) {
	run := 4 * time.Second
	if *soakFor > 0 {
		run = *soakFor
	}
	nw := netsim.New(3, netsim.Config{
		Latency:      15 * time.Millisecond,
		Jitter:       10 * time.Millisecond,
		Loss:         0.10,
		Duplicate:    0.05,
		Reorder:      0.05,
		ReorderDelay: 20 * time.Millisecond,
	})
	defer nw.Close()
	srvAP := netip.MustParseAddrPort("10.9.0.1:40000")
	spc, err := nw.Listen(srvAP)
	require.NoError(t, err)
	l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 64})
	require.NoError(t, err)
	defer l.Close()

	var (
		wg       sync.WaitGroup
		failures = make(chan string, 1024)
		kicks    atomic.Int64
		sessions atomic.Int64
		echoed   atomic.Int64
		nextPort atomic.Uint32
	)
	fail := func(format string, args ...any) {
		select {
		case failures <- fmt.Sprintf(format, args...):
		default:
		}
	}
	// The server echoes, and kicks one connection in 50 after a while.
	wg.Go(func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			kick := i%50 == 49
			conns.Go(func() {
				defer c.Close()
				buf := make([]byte, netcode.MaxPayloadBytes)
				for j := 0; ; j++ {
					n, err := c.Read(buf)
					if err != nil {
						if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
							fail("server conn %v: %v", c.RemoteAddr(), err)
						}
						return
					}
					if kick && j == 20 {
						kicks.Add(1)
						return
					}
					if _, err := c.Write(buf[:n]); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
						fail("server write: %v", err)
						return
					}
				}
			})
		}
	})

	deadline := time.Now().Add(run)
	var clients sync.WaitGroup
	for i := range 64 {
		clients.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for gen := 0; time.Now().Before(deadline); gen++ {
				port := 10000 + uint16(nextPort.Add(1))
				d := netcode.Dialer{ListenPacket: func(ctx context.Context, network, laddr string) (net.PacketConn, error) {
					return nw.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, 1, byte(i)}), port))
				}}
				// Not mint: it calls require, which must not run outside
				// the test goroutine.
				tok, err := soakToken(srvAP, uint64(i)<<32|uint64(gen))
				if err != nil {
					fail("client %d gen %d: token: %v", i, gen, err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				// A generous timeout: the rules, not a starved CI machine, decide.
				c, err := d.DialContext(ctx, tok)
				cancel()
				if err != nil {
					fail("client %d gen %d: dial: %v", i, gen, err)
					return
				}
				sessions.Add(1)
				msgs := 10 + rng.IntN(60)
				buf := make([]byte, netcode.MaxPayloadBytes)
				for m := 0; m < msgs; m++ {
					msg := fmt.Appendf(nil, "%d/%d/%d", i, gen, m)
					if _, err := c.Write(msg); err != nil {
						if errors.Is(err, io.EOF) {
							break // kicked
						}
						fail("client %d write: %v", i, err)
						break
					}
					// Payloads may be lost: wait a little for the echo, not forever.
					_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					n, err := c.Read(buf)
					switch {
					case err == nil:
						if got := string(buf[:n]); got != string(msg) && !isEcho(got, i, gen) {
							fail("client %d got %q for %q", i, got, msg)
						}
						echoed.Add(1)
					case errors.Is(err, io.EOF):
						m = msgs // kicked by the server: by the rules
					case errors.Is(err, os.ErrDeadlineExceeded):
						// The payload or its echo was lost: send the next.
					case errors.Is(err, netcode.ErrConnectionTimedOut):
						fail("client %d gen %d timed out", i, gen)
						m = msgs
					default:
						fail("client %d gen %d read: %v", i, gen, err)
						m = msgs
					}
				}
				c.Close()
				time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			}
		})
	}
	clients.Wait()

	// Every slot frees once the clients' disconnect packets arrive.
	require.Eventually(t, func() bool { return l.Stats().Connected == 0 }, 10*time.Second, 20*time.Millisecond, "slots still taken: %+v", l.Stats())
	require.NoError(t, l.Close())
	wg.Wait()
	close(failures)
	var all []string
	for f := range failures {
		all = append(all, f)
	}
	require.Empty(t, all)
	t.Logf("%d sessions, %d server kicks, %d echoes; network %+v; server %+v", sessions.Load(), kicks.Load(), echoed.Load(), nw.Stats(), l.Stats())
	require.Greater(t, sessions.Load(), int64(64))
	require.Positive(t, echoed.Load())
}

// soakToken mints a connect token as mint does, for the given client id and
// a 15 s timeout, but returns its error: it is called from the clients'
// goroutines, where require may not be used.
func soakToken(server netip.AddrPort, clientID uint64) ([]byte, error) {
	p := token.Params{
		ProtocolID:     testProtocolID,
		ClientID:       clientID,
		PrivateKey:     testKey,
		ServerAddrs:    []netip.AddrPort{server},
		ExpireSeconds:  30,
		TimeoutSeconds: 15,
	}
	copy(p.UserData[:], "hello user data")
	return token.Generate(p)
}

// isEcho reports whether got is an earlier echo of this client's session
// (a late one, after a read deadline passed).
func isEcho(got string, i, gen int) bool {
	var gi, gg, gm int
	_, err := fmt.Sscanf(got, "%d/%d/%d", &gi, &gg, &gm)
	return err == nil && gi == i && gg == gen
}
