package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is one scripted ReadBatch result: n datagrams, or err.
type step struct {
	n   int
	err error
}

// scriptConn is a Conn whose reads return the scripted steps, then
// net.ErrClosed, and record when each read was made.
type scriptConn struct {
	steps []step
	start time.Time
	at    []time.Duration // when each ReadBatch was called, since start
	hook  func(read int)  // called at the start of each read, if set
}

var peerAP = netip.MustParseAddrPort("192.0.2.1:4000")

func (c *scriptConn) ReadBatch(ms []Message) (int, error) {
	c.at = append(c.at, time.Since(c.start))
	if c.hook != nil {
		c.hook(len(c.at))
	}
	if len(c.steps) == 0 {
		return 0, &net.OpError{Op: "read", Net: "udp", Err: net.ErrClosed}
	}
	s := c.steps[0]
	c.steps = c.steps[1:]
	for i := range s.n {
		ms[i].Buf = append(ms[i].Buf[:0], byte(i), byte(len(ms[i].Buf[:cap(ms[i].Buf)])>>8))
		ms[i].Addr = peerAP
	}
	return s.n, s.err
}

func (c *scriptConn) WriteBatch(ms []Message) (int, error) { return len(ms), nil }
func (c *scriptConn) WriteTo([]byte, netip.AddrPort) error { return nil }
func (c *scriptConn) LocalAddr() net.Addr                  { return net.UDPAddrFromAddrPort(peerAP) }
func (c *scriptConn) SetReadDeadline(time.Time) error      { return nil }
func (c *scriptConn) Close() error                         { return nil }
func sysErr(e syscall.Errno) error {
	return &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError("recvmmsg", e)}
}
func repeat(n int, s step) []step { return fillSteps(make([]step, n), s) }
func fillSteps(ss []step, s step) []step {
	for i := range ss {
		ss[i] = s
	}
	return ss
}
func ms(ds ...int) []time.Duration { return durations(time.Millisecond, ds...) }
func durations(unit time.Duration, ds ...int) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d) * unit
	}
	return out
}

func TestReadLoop(t *testing.T) {
	refused, reset, nobufs := step{err: sysErr(syscall.ECONNREFUSED)}, step{err: sysErr(syscall.ECONNRESET)}, step{err: sysErr(syscall.ENOBUFS)}
	tests := []struct {
		name        string
		steps       []step
		wantErr     error // nil: ReadLoop returns nil
		wantBatches []int
		wantOnError int
		wantPauses  []time.Duration // between one read and the next
	}{
		{name: "closed at once", wantPauses: ms()},
		{name: "batches are handed over", steps: []step{{n: 2}, {n: 1}, {n: 0}, {n: 8}},
			wantBatches: []int{2, 1, 8}, wantPauses: ms(0, 0, 0, 0)},
		{name: "a broken socket stops the loop", steps: []step{{n: 1}, {err: sysErr(syscall.EBADF)}, {n: 1}},
			wantErr: syscall.EBADF, wantBatches: []int{1}, wantPauses: ms(0)},
		{name: "an unknown error stops the loop", steps: []step{{err: errBoom}},
			wantErr: errBoom, wantPauses: ms()},
		{name: "ICMP port unreachable is retried at once", steps: []step{refused, {n: 1}},
			wantBatches: []int{1}, wantOnError: 1, wantPauses: ms(0, 0)},
		{name: "a persistent error backs off to 100 ms", steps: repeat(10, reset),
			wantOnError: 10, wantPauses: ms(0, 1, 2, 4, 8, 16, 32, 64, 100, 100)},
		{name: "a read resets the pause", steps: []step{nobufs, nobufs, nobufs, {n: 3}, nobufs, nobufs},
			wantBatches: []int{3}, wantOnError: 5, wantPauses: ms(0, 1, 2, 0, 0, 1)},
		{name: "an expired deadline is retried", steps: []step{{err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, {n: 1}},
			wantBatches: []int{1}, wantOnError: 1, wantPauses: ms(0, 0)},
		{name: "a datagram too large is retried", steps: []step{{err: sysErr(syscall.EMSGSIZE)}, {err: sysErr(syscall.EMSGSIZE)}, {n: 1}},
			wantBatches: []int{1}, wantOnError: 2, wantPauses: ms(0, 1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &scriptConn{steps: tt.steps, start: time.Now()}
				var batches []int
				var errs []error
				err := ReadLoop(c, 8, nil, func(ms []Message) {
					batches = append(batches, len(ms))
					for i := range ms {
						assert.Equal(t, peerAP, ms[i].Addr)
						assert.Equal(t, []byte{byte(i), MaxDatagram >> 8}, ms[i].Buf, "the whole buffer is offered each time")
					}
				}, func(err error) { errs = append(errs, err) })
				if tt.wantErr == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tt.wantErr)
				}
				assert.Equal(t, tt.wantBatches, batches)
				assert.Len(t, errs, tt.wantOnError)
				for _, e := range errs {
					assert.True(t, transient(e), "%v", e)
				}
				var pauses []time.Duration
				for i := 1; i < len(c.at); i++ {
					pauses = append(pauses, c.at[i]-c.at[i-1])
				}
				if pauses == nil {
					pauses = ms()
				}
				assert.Equal(t, tt.wantPauses, pauses)
			})
		})
	}
}

var errBoom = errors.New("boom")

func TestReadLoopStop(t *testing.T) {
	t.Run("during a pause", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stop := make(chan struct{})
			c := &scriptConn{steps: repeat(1000, step{err: sysErr(syscall.ENOBUFS)}), start: time.Now()}
			go func() {
				time.Sleep(250 * time.Millisecond)
				close(stop)
			}()
			require.NoError(t, ReadLoop(c, 1, stop, func([]Message) { t.Error("nothing to handle") }, nil))
			assert.Equal(t, 250*time.Millisecond, time.Since(c.start), "returned when stop closed, not at the end of a pause")
		})
	})
	t.Run("an error after stop is not reported", func(t *testing.T) {
		stop := make(chan struct{})
		c := &scriptConn{steps: []step{{n: 1}, {err: errBoom}}}
		c.hook = func(read int) {
			if read == 2 {
				close(stop) // the owner stops, then its socket fails
			}
		}
		handled := 0
		require.NoError(t, ReadLoop(c, 1, stop, func([]Message) { handled++ }, func(err error) { t.Errorf("reported %v", err) }))
		assert.Equal(t, 1, handled)
	})
	t.Run("after a batch", func(t *testing.T) {
		stop := make(chan struct{})
		c := &scriptConn{steps: repeat(10, step{n: 1})}
		handled := 0
		require.NoError(t, ReadLoop(c, 1, stop, func([]Message) {
			handled++
			if handled == 3 {
				close(stop)
			}
		}, nil))
		assert.Equal(t, 3, handled)
		assert.Len(t, c.at, 4, "the read under way when stop closed is the last")
	})
}

// TestReadLoopUDP runs the loop over real sockets until the owner closes
// it.
func TestReadLoopUDP(t *testing.T) {
	for _, k := range kinds {
		for _, network := range []string{"udp4", "udp6"} {
			t.Run(k.name+"/"+network, func(t *testing.T) {
				loop := "127.0.0.1:0"
				if network == "udp6" {
					loop = "[::1]:0"
				}
				rx := k.wrap(listenUDP(t, network, loop))
				tx := New(listenUDP(t, network, loop))
				defer tx.Close()
				const count = 20
				got := make(chan string, count)
				done := make(chan error, 1)
				go func() {
					done <- ReadLoop(rx, 8, nil, func(ms []Message) {
						for _, m := range ms {
							assert.Equal(t, addrOf(t, tx), m.Addr)
							got <- string(m.Buf)
						}
					}, nil)
				}()
				for i := range count {
					require.NoError(t, tx.WriteTo([]byte(fmt.Sprint("datagram ", i)), addrOf(t, rx)))
				}
				seen := map[string]bool{}
				for range count {
					select {
					case s := <-got:
						seen[s] = true
					case <-time.After(5 * time.Second):
						t.Fatalf("received %d of %d", len(seen), count)
					}
				}
				assert.Len(t, seen, count)
				require.NoError(t, rx.Close())
				require.NoError(t, <-done, "closing the socket ends the loop cleanly")
			})
		}
	}
}

// TestReadLoopConnRefused: the ICMP port unreachable that a connected
// socket reports as ECONNREFUSED is transient: it is reported, and the
// loop reads on.
func TestReadLoopConnRefused(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			loop := "127.0.0.1:0"
			if network == "udp6" {
				loop = "[::1]:0"
			}
			gone := listenUDP(t, network, loop)
			to := gone.LocalAddr().(*net.UDPAddr)
			require.NoError(t, gone.Close()) // nobody listens there now
			uc, err := net.DialUDP(network, nil, to)
			require.NoError(t, err)
			c := New(uc)
			errs := make(chan error, 16)
			done := make(chan error, 1)
			go func() {
				done <- ReadLoop(c, 8, nil, func([]Message) {}, func(err error) { errs <- err })
			}()
			for {
				_, err := uc.Write([]byte("anyone?"))
				if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
					require.NoError(t, err)
				}
				select {
				case err := <-errs:
					if runtime.GOOS == "linux" {
						assert.ErrorIs(t, err, syscall.ECONNREFUSED)
					}
					select {
					case err := <-done:
						t.Fatalf("the loop ended on a transient error: %v", err)
					default:
					}
					require.NoError(t, c.Close())
					require.NoError(t, <-done)
					return
				case err := <-done:
					t.Fatalf("the loop ended: %v", err)
				case <-time.After(100 * time.Millisecond):
					// The ICMP error may be consumed by the write; send again.
				}
			}
		})
	}
}

// countConn returns left one-datagram batches, then net.ErrClosed, with
// no allocation.
type countConn struct {
	scriptConn
	left int
}

var errClosedRead error = &net.OpError{Op: "read", Net: "udp", Err: net.ErrClosed}

func (c *countConn) ReadBatch(ms []Message) (int, error) {
	if c.left == 0 {
		return 0, errClosedRead
	}
	c.left--
	ms[0].Buf = ms[0].Buf[:100]
	return 1, nil
}

// TestReadLoopAllocs: the loop allocates its buffers once, nothing per
// batch.
func TestReadLoopAllocs(t *testing.T) {
	race.Skip(t)
	c := &countConn{}
	handled := 0
	handle := func(ms []Message) { handled += len(ms) }
	allocs := func(batches int) float64 {
		return testing.AllocsPerRun(20, func() {
			c.left = batches
			_ = ReadLoop(c, 8, nil, handle, nil)
		})
	}
	few, many := allocs(10), allocs(10000)
	assert.Equal(t, few, many, "allocations grow with the batches read")
	assert.Positive(t, handled)
}
