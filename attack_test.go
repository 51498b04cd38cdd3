package netcode_test

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tapConn copies every datagram a client writes, as an on-path attacker
// would capture them.
type tapConn struct {
	net.PacketConn
	mu    sync.Mutex
	out   [][]byte
	wrote chan struct{} // signalled after a capture, once waitFor made it
}

func (c *tapConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, addr)
	c.mu.Lock()
	if len(c.out) < 4096 {
		c.out = append(c.out, append([]byte(nil), b...))
	}
	if c.wrote != nil {
		select {
		case c.wrote <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return n, err
}

// waitFor waits until the captured datagrams satisfy done, and returns
// them: the capture is complete once the event it waits for has happened,
// not after a guessed delay.
func (c *tapConn) waitFor(t *testing.T, what string, done func([][]byte) bool) [][]byte {
	t.Helper()
	c.mu.Lock()
	if c.wrote == nil {
		c.wrote = make(chan struct{}, 1)
	}
	wrote := c.wrote
	c.mu.Unlock()
	hang := time.After(10 * time.Second)
	for {
		if got := c.captured(); done(got) {
			return got
		}
		select {
		case <-wrote:
		case <-hang:
			t.Fatalf("the tap never saw %s", what)
		}
	}
}

func (c *tapConn) captured() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.out...)
}

// attacker blasts hostile datagrams at a server from its own socket and
// accounts for every byte that comes back.
type attacker struct {
	pc         net.PacketConn
	target     net.Addr
	sent, recv atomic.Int64 // bytes
	sentN      atomic.Int64
	biggest    atomic.Int64 // largest reply
}

func (a *attacker) send(b []byte) {
	if _, err := a.pc.WriteTo(b, a.target); err == nil {
		a.sent.Add(int64(len(b)))
		a.sentN.Add(1)
	}
}

func (a *attacker) drain(done <-chan struct{}) {
	buf := make([]byte, 2048)
	for {
		select {
		case <-done:
			return
		default:
		}
		_ = a.pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, _, err := a.pc.ReadFrom(buf)
		if err != nil {
			continue
		}
		a.recv.Add(int64(n))
		for {
			old := a.biggest.Load()
			if int64(n) <= old || a.biggest.CompareAndSwap(old, int64(n)) {
				break
			}
		}
	}
}

// TestAttack runs real clients against a live server while a hostile sender
// blasts random, truncated, replayed and tampered packets at it. The clients
// must not notice, the server must not panic or create state for anything
// that does not decrypt, and no reply may be larger than what caused it.
func TestAttack(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)

			// Honest clients, one of them tapped.
			tap := &tapConn{}
			d := netcode.Dialer{ListenPacket: func(ctx context.Context, network, laddr string) (net.PacketConn, error) {
				pc, err := net.ListenPacket(network, laddr)
				tap.PacketConn = pc
				return tap, err
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tapped, err := d.DialContext(ctx, mint(t, l.Addr(), withClientID(1000)))
			require.NoError(t, err)
			defer tapped.Close()
			tappedSrv, err := l.AcceptConn(ctx)
			require.NoError(t, err)
			defer tappedSrv.Close()
			const honest = 4
			var clis, srvs []*netcode.Conn
			for i := range honest {
				c, s := pair(t, l, withClientID(uint64(2000+i)))
				clis, srvs = append(clis, c), append(srvs, s)
			}
			// Some traffic to capture.
			for i := range 20 {
				_, err := tapped.Write([]byte{byte(i), 1, 2, 3})
				require.NoError(t, err)
			}
			captured := tap.waitFor(t, "the 20 payloads", func(got [][]byte) bool {
				n := 0
				for _, p := range got {
					if typ, ok := protocol.PeekType(p); ok && typ == protocol.Payload {
						n++
					}
				}
				return n >= 20
			})
			var request []byte
			for _, p := range captured {
				if typ, ok := protocol.PeekType(p); ok && typ == protocol.ConnectionRequest {
					request = p
				}
			}
			require.Len(t, request, 1078, "the tap saw the connection request (1078 bytes)")
			before := l.Stats()

			network := "udp4"
			if f.name == "ipv6" {
				network = "udp6"
			}
			pc, err := net.ListenPacket(network, f.addr)
			require.NoError(t, err)
			defer pc.Close()
			atk := &attacker{pc: pc, target: l.Addr()}
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { atk.drain(done) })

			// The server echoes on every honest connection.
			var echoes sync.WaitGroup
			defer echoes.Wait()
			for _, s := range append(srvs, tappedSrv) {
				defer s.Close()
				echoes.Go(func() { echoUntilError(s) })
			}

			// The tapped client's echoes of the captured traffic.
			for range 20 {
				_, err := readWithin(t, tapped, 2*time.Second)
				require.NoError(t, err)
			}

			// The attacker holds valid tokens of its own (any player can get
			// one): their requests are answered, and the answer must be smaller.
			var ownRequests [][]byte
			for i := range 8 {
				pt, err := token.Parse(mint(t, l.Addr(), withClientID(uint64(9000+i))))
				require.NoError(t, err)
				ownRequests = append(ownRequests, protocol.AppendConnectionRequest(nil, pt.ProtocolID, pt.ExpireTimestamp, &pt.Nonce, pt.PrivateData[:]))
			}

			rng := rand.New(rand.NewPCG(7, 7))
			blast := func() {
				b := make([]byte, 1+rng.IntN(1400))
				switch rng.IntN(9) {
				case 0: // random bytes
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
				case 1: // random bytes with a valid-looking prefix
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
					b[0] = byte(rng.IntN(7)) | byte(1+rng.IntN(8))<<4
				case 2: // a truncated capture
					p := captured[rng.IntN(len(captured))]
					b = append(b[:0], p[:rng.IntN(len(p))]...)
				case 3: // a replayed capture, from the wrong address
					b = append(b[:0], captured[rng.IntN(len(captured))]...)
				case 4: // a tampered capture
					b = append(b[:0], captured[rng.IntN(len(captured))]...)
					b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
				case 5: // the captured connection request, replayed or tampered
					b = append(b[:0], request...)
					if rng.IntN(2) == 0 {
						b[1+rng.IntN(len(b)-1)] ^= 0x80
					}
				case 8: // a valid request of the attacker's own
					b = append(b[:0], ownRequests[rng.IntN(len(ownRequests))]...)
				case 6, 7: // a capture replayed or tampered from the client's own address
					b = append(b[:0], captured[rng.IntN(len(captured))]...)
					if rng.IntN(2) == 0 {
						b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
					}
					if _, err := tap.PacketConn.WriteTo(b, l.Addr()); err == nil {
						atk.sentN.Add(1)
					}
					return
				}
				atk.send(b)
			}

			// Honest clients play while the attack runs.
			deadline := time.Now().Add(2 * time.Second)
			rounds := 0
			for time.Now().Before(deadline) {
				for range 200 {
					blast()
				}
				for i, c := range append(clis, tapped) {
					msg := []byte{byte(rounds), byte(i), 0xee}
					_, err := c.Write(msg)
					require.NoError(t, err)
					got, err := readWithin(t, c, 2*time.Second)
					require.NoError(t, err, "honest client %d during the attack", i)
					require.Equal(t, msg, got)
				}
				rounds++
			}
			close(done)
			wg.Wait()

			after := l.Stats()
			t.Logf("%d rounds; attacker sent %d datagrams (%d bytes), got back %d bytes (largest %d); server ignored %d, replayed %d, token reuse refused %d",
				rounds, atk.sentN.Load(), atk.sent.Load(), atk.recv.Load(), atk.biggest.Load(),
				after.Ignored-before.Ignored, after.Replayed-before.Replayed, after.TokenReuseRefused-before.TokenReuseRefused)
			assert.Positive(t, after.Ignored-before.Ignored)
			assert.Positive(t, after.Replayed-before.Replayed, "replays from the client's address hit the replay window")
			// Nothing the attacker sent decrypted into a connection or a mapping.
			assert.Equal(t, honest+1, after.Connected)
			assert.LessOrEqual(t, after.Mappings, honest+1+len(ownRequests), "no state for undecryptable or replayed input")
			assert.Equal(t, before.ConnectionsOpened, after.ConnectionsOpened)
			assert.Positive(t, after.ChallengesSent-before.ChallengesSent, "the attacker's own requests were answered")
			// No amplification: the replayed request is from another
			// address, so the token history refuses it silently; any reply
			// at all must be smaller than the smallest handshake packet.
			assert.Positive(t, atk.recv.Load())
			assert.Less(t, atk.recv.Load(), atk.sent.Load())
			assert.Less(t, atk.biggest.Load(), int64(1078), "smaller than a connection request")
			for _, c := range append(clis, tapped) {
				assert.Zero(t, c.Dropped())
			}
		})
	}
}
