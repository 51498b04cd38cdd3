//go:build linux

package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadLoopOwned runs the owned loop over real sockets, GRO off and on,
// in waves that leave it idle between them (it then waits without a
// read), single datagrams and bursts larger than its batch, and GSO
// trains that a GRO read takes whole and hands out over several batches.
// Every datagram arrives once; closing the socket ends the loop cleanly.
func TestReadLoopOwned(t *testing.T) {
	type setup struct {
		name string
		path Path
		gro  bool
	}
	setups := []setup{{"mmsg", PathMmsg, false}, {"gso", PathBest, false}, {"plain", PathPlain, false}}
	if kernelHasGRO(t) {
		setups = append(setups, setup{"gro", PathBest, true})
	}
	for _, s := range setups {
		for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
			t.Run(s.name+"/"+fam.network, func(t *testing.T) {
				skipWithoutIPv6(t, fam.network)
				rx := onPath(s.path)(listenUDP(t, fam.network, fam.addr))
				if s.gro {
					require.True(t, EnableGRO(rx))
				}
				tx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
				defer tx.Close()
				got := make(chan string, 256)
				done := make(chan error, 1)
				go func() {
					done <- ReadLoopOwned(rx, 4, make(chan struct{}), func(ms []Message) {
						assert.LessOrEqual(t, len(ms), 4)
						for _, m := range ms {
							got <- string(m.Buf)
						}
					}, nil)
				}()
				sent := 0
				for wave, size := range []int{1, 1, 3, 10, 1, 40, 2} {
					ms := make([]Message, size)
					for i := range ms {
						// One length for all: a train that GSO sends
						// and GRO takes as one super-datagram.
						ms[i] = Message{Buf: fmt.Appendf(nil, "wave %02d datagram %02d", wave, i), Addr: addrOf(t, rx)}
					}
					n, err := tx.WriteBatch(ms)
					require.NoError(t, err)
					require.Equal(t, size, n)
					sent += size
					seen := map[string]bool{}
					for range size {
						select {
						case m := <-got:
							assert.False(t, seen[m], "%q twice", m)
							seen[m] = true
						case <-time.After(5 * time.Second):
							t.Fatalf("wave %d: received %d of %d", wave, len(seen), size)
						}
					}
					for i := range ms {
						assert.True(t, seen[string(ms[i].Buf)], "wave %d datagram %d", wave, i)
					}
				}
				require.NoError(t, rx.Close())
				require.NoError(t, <-done, "closing the socket ends the loop cleanly")
				assert.Empty(t, got)
			})
		}
	}
}

// TestReadLoopOwnedStop: on the recvmmsg path the owned loop returns once
// stop is closed, checked after every batch, without reading on.
func TestReadLoopOwnedStop(t *testing.T) {
	for _, p := range []Path{PathMmsg, PathBest} {
		t.Run(p.String(), func(t *testing.T) {
			rx := onPath(p)(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer rx.Close()
			tx := New(listenUDP(t, "udp4", "127.0.0.1:0"))
			defer tx.Close()
			for i := range 5 {
				require.NoError(t, tx.WriteTo([]byte{byte(i)}, addrOf(t, rx)))
			}
			stop := make(chan struct{})
			handled := 0
			require.NoError(t, ReadLoopOwned(rx, 1, stop, func([]Message) {
				handled++
				if handled == 2 {
					close(stop)
				}
			}, nil))
			assert.Equal(t, 2, handled)
			// The rest stay queued on the socket.
			ms := NewMessages(8)
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
			n, err := rx.ReadBatch(ms)
			require.NoError(t, err)
			assert.Equal(t, []byte{2}, ms[0].Buf)
			assert.Positive(t, n)
		})
	}
}

// TestReadWaited, over real sockets, IPv4 and IPv6, GRO off and on: a
// ReadBatch that finds its datagram already there did not wait; one that
// blocks until a datagram comes did.
func TestReadWaited(t *testing.T) {
	groOpts := []bool{false}
	if kernelHasGRO(t) {
		groOpts = append(groOpts, true)
	}
	for _, gro := range groOpts {
		for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
			t.Run(fmt.Sprint("gro=", gro, "/", fam.network), func(t *testing.T) {
				skipWithoutIPv6(t, fam.network)
				path := PathMmsg
				if gro {
					path = PathBest
				}
				rx := onPath(path)(listenUDP(t, fam.network, fam.addr))
				defer rx.Close()
				if gro {
					require.True(t, EnableGRO(rx))
				}
				w, ok := rx.(interface{ ReadWaited() bool })
				require.True(t, ok, "the recvmmsg path tells whether a read waited")
				tx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
				defer tx.Close()
				to := addrOf(t, rx)
				ms := NewMessages(4)

				require.NoError(t, tx.WriteTo([]byte("queued"), to))
				require.Eventually(t, func() bool { return pending(t, rx) }, 5*time.Second, time.Millisecond)
				n, err := rx.ReadBatch(ms)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.False(t, w.ReadWaited(), "the datagram was there")

				done := make(chan error, 1)
				go func() {
					_, err := rx.ReadBatch(ms)
					done <- err
				}()
				require.Eventually(t, func() bool { return stacks.Blocked("IO wait", "transport.(*mmsgConn).ReadBatch") },
					5*time.Second, time.Millisecond)
				require.NoError(t, tx.WriteTo([]byte("awaited"), to))
				require.NoError(t, <-done)
				require.True(t, w.ReadWaited(), "the read waited for it")
			})
		}
	}
}

// pending reports whether c's socket has a datagram to read.
func pending(t *testing.T, c Conn) bool {
	rc, err := c.(*mmsgConn).c.SyscallConn()
	require.NoError(t, err)
	n := 0
	require.NoError(t, rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}))
	require.NoError(t, err)
	return n > 0
}
