package sendq

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/require"
)

// recordConn is a transport.Conn that records batched writes. Its first
// WriteBatch blocks until release is closed, so that other senders pile up
// behind the goroutine writing; fail makes every n-th datagram refused.
type recordConn struct {
	transport.Conn
	mu      sync.Mutex
	got     [][]byte
	batches []int
	release chan struct{}
	entered chan struct{} // closed when the first write starts, if set
	first   sync.Once
	failN   int
}

func (c *recordConn) WriteBatch(ms []transport.Message) (int, error) {
	c.first.Do(func() {
		if c.entered != nil {
			close(c.entered)
		}
		if c.release != nil {
			<-c.release
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, len(ms))
	for i, m := range ms {
		if c.failN > 0 && (len(c.got)+1)%c.failN == 0 {
			c.got = append(c.got, nil) // refused: recorded as a gap
			return i, net.ErrWriteToConnected
		}
		c.got = append(c.got, append([]byte(nil), m.Buf...))
	}
	return len(ms), nil
}

// datagram is sender g's i-th datagram: a payload packet's prefix (so the
// queue never takes it for a droppable keep-alive), then g and i.
func datagram(g, i int) []byte {
	b := make([]byte, 9)
	b[0] = 0x15
	binary.LittleEndian.PutUint32(b[1:], uint32(g))
	binary.LittleEndian.PutUint32(b[5:], uint32(i))
	return b
}

// newQueue returns a Queue that drops datagrams starting 0x14 (a netcode
// keep-alive's prefix) when full.
func newQueue(tc transport.Conn) *Queue {
	return newQueueOf(tc, Len)
}

// newQueueOf is newQueue with a queue of n datagrams.
func newQueueOf(tc transport.Conn, n int) *Queue {
	return New(tc, func(b []byte) bool { return len(b) > 0 && b[0] == 0x14 }, n)
}

// sendOne sends b to to through q, waiting for room as a Write does.
func sendOne(q *Queue, to netip.AddrPort, b []byte) error {
	return q.Send([]transport.Message{{Buf: b, Addr: to}}, nil, nil, nil)
}

func TestSendQueue(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	tests := []struct {
		name      string
		senders   int
		each      int
		block     bool // hold the first write so the others queue up
		failN     int
		wantBatch bool // some write must carry more than one datagram
	}{
		{"one sender", 1, 200, false, 0, false},
		{"many senders, first write held", 16, 300, true, 0, true},
		{"more queued than the queue holds: backpressure", 8, 2000, true, 0, true},
		{"refused datagrams are skipped", 4, 100, false, 7, false},
	}
	for _, tt := range tests {
		// In a synctest bubble, synctest.Wait returns once every sender has
		// either queued its datagrams and returned or is blocked behind the
		// held write or a full queue.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &recordConn{failN: tt.failN}
				if tt.block {
					rc.release = make(chan struct{})
				}
				q := newQueue(rc)
				var wg sync.WaitGroup
				for g := range tt.senders {
					wg.Go(func() {
						for i := range tt.each {
							require.NoError(t, sendOne(q, to, datagram(g, i)))
						}
					})
				}
				if tt.block {
					synctest.Wait()
					close(rc.release)
				}
				wg.Wait()
				q.Close() // sends what is queued

				rc.mu.Lock()
				defer rc.mu.Unlock()
				total := tt.senders * tt.each
				require.Len(t, rc.got, total, "every datagram is written exactly once")
				require.Zero(t, q.Dropped())
				next := make([]uint32, tt.senders)
				refused := 0
				for _, d := range rc.got {
					if d == nil {
						refused++
						continue
					}
					g, i := binary.LittleEndian.Uint32(d[1:]), binary.LittleEndian.Uint32(d[5:])
					require.GreaterOrEqual(t, i, next[g], "sender %d's datagrams out of order", g)
					next[g] = i + 1
				}
				if tt.failN > 0 {
					require.Equal(t, total/tt.failN, refused)
				}
				biggest := 0
				for _, n := range rc.batches {
					require.LessOrEqual(t, n, Batch)
					biggest = max(biggest, n)
				}
				if tt.wantBatch {
					require.Greater(t, biggest, 1, "no datagrams were combined: %v", rc.batches)
				}
			})
		})
	}
}

// TestSendQueueLoneSenderWritesAtOnce: a Send on an idle queue has written
// its datagram when it returns; no goroutine hand-off.
func TestSendQueueLoneSenderWritesAtOnce(t *testing.T) {
	rc := &recordConn{}
	q := newQueue(rc)
	defer q.Close()
	for i := range 5 {
		require.NoError(t, sendOne(q, netip.MustParseAddrPort("127.0.0.1:9"), datagram(0, i)))
		rc.mu.Lock()
		require.Len(t, rc.got, i+1)
		rc.mu.Unlock()
	}
}

// fullQueue returns a queue (in a synctest bubble) whose first datagram's
// direct write to to is held until rc.release is closed and whose queue
// behind it is full: Len datagrams of sender 1.
func fullQueue(t *testing.T, to netip.AddrPort) (*Queue, *recordConn) {
	rc := &recordConn{release: make(chan struct{})}
	q := newQueue(rc)
	go sendOne(q, to, datagram(0, 0)) // the held direct write
	synctest.Wait()
	for i := range Len {
		require.NoError(t, sendOne(q, to, datagram(1, i))) // queued: returns at once
	}
	return q, rc
}

// TestSendQueueFull: behind a held write, a full queue drops keep-alives
// (counted) and makes other datagrams wait until the writer takes the
// queue; a sender never writes another's datagrams.
func TestSendQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to := netip.MustParseAddrPort("127.0.0.1:9")
		q, rc := fullQueue(t, to)
		keepAlive := []byte{0x14, 1, 2, 3}
		require.NoError(t, sendOne(q, to, keepAlive)) // full: dropped
		require.Equal(t, uint64(1), q.Dropped())
		done := make(chan struct{})
		go func() {
			defer close(done)
			require.NoError(t, sendOne(q, to, datagram(2, 0))) // full: waits for room
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a payload on a full queue did not wait")
		default:
		}
		close(rc.release)
		<-done
		q.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		require.Len(t, rc.got, 1+Len+1)
		require.Equal(t, datagram(2, 0), rc.got[len(rc.got)-1], "the waiting payload went last, in order")
	})
}

// discardConn takes every write.
type discardConn struct{ transport.Conn }

func (discardConn) WriteBatch(ms []transport.Message) (int, error) { return len(ms), nil }

func TestSendQueueAllocs(t *testing.T) {
	q := newQueue(discardConn{})
	defer q.Close()
	to := netip.MustParseAddrPort("[::1]:9")
	p := make([]byte, transport.MaxDatagram)
	p[0] = 0x15
	msgs := []transport.Message{{Buf: p, Addr: to}}
	require.Zero(t, testing.AllocsPerRun(1000, func() { _ = q.Send(msgs, nil, nil, nil) }))
}

// TestSendQueueFullIsASignal: a sender that finds the queue full waits for
// room only until its stop or deadline channel closes, holding nothing;
// NoWait drops instead of waiting; after close, sends fail at once.
func TestSendQueueFullIsASignal(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	tests := []struct {
		name string
		wait func(stop, deadline chan struct{}) // ends the wait, if it is one
		want error
	}{
		{"stop", func(stop, _ chan struct{}) { close(stop) }, ErrStopped},
		{"deadline", func(_, deadline chan struct{}) { close(deadline) }, os.ErrDeadlineExceeded},
		{"close", nil, net.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q, rc := fullQueue(t, to)
				msg := []transport.Message{{Buf: datagram(2, 0), Addr: to}}
				require.ErrorIs(t, q.Send(msg, NoWait, nil, nil), ErrStopped, "NoWait does not wait")

				stop, deadline := make(chan struct{}), make(chan struct{})
				errc := make(chan error, 1)
				go func() { errc <- q.Send(msg, stop, deadline, nil) }()
				synctest.Wait()
				require.Empty(t, errc, "waits for room")
				if tt.wait != nil {
					tt.wait(stop, deadline)
					require.ErrorIs(t, <-errc, tt.want)
					q.mu.Lock()
					require.Empty(t, q.waiters, "the sender that gave up is forgotten")
					q.mu.Unlock()
					close(rc.release)
					q.Close()
				} else {
					closed := make(chan struct{})
					go func() { q.Close(); close(closed) }()
					synctest.Wait()
					// close wakes the waiting sender, then waits for the
					// held write.
					require.ErrorIs(t, <-errc, tt.want)
					close(rc.release)
					<-closed
				}
				require.ErrorIs(t, sendOne(q, to, datagram(3, 0)), net.ErrClosed)
				rc.mu.Lock()
				defer rc.mu.Unlock()
				require.Len(t, rc.got, 1+Len, "nothing of the abandoned sends was written")
			})
		})
	}
}

// TestSendQueueWakesOnlyForRoom: when the writer takes a full queue it
// wakes as many waiting senders as the queue has room for, in the order
// they began to wait, not every one; the rest wait for the next batch,
// and every datagram is written in the end.
func TestSendQueueWakesOnlyForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to := netip.MustParseAddrPort("127.0.0.1:9")
		q, rc := fullQueue(t, to)
		const extra = 8
		var senders sync.WaitGroup
		for i := range Len + extra {
			senders.Add(1)
			go func() {
				defer senders.Done()
				require.NoError(t, sendOne(q, to, datagram(2, i)))
			}()
			synctest.Wait() // in order
		}
		q.mu.Lock()
		waiting := len(q.waiters)
		unwoken := q.waiters[Len]
		q.openRoom(Len)
		left := len(q.waiters)
		head := q.waiters[0]
		q.mu.Unlock()
		require.Equal(t, Len+extra, waiting)
		require.Equal(t, extra, left, "woken: as many as there is room for")
		require.Equal(t, unwoken, head, "the first to wait are woken first")
		synctest.Wait() // the woken find the queue still full and wait again
		close(rc.release)
		senders.Wait()
		q.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		require.Len(t, rc.got, 1+2*Len+extra)
	})
}

// TestSendQueueGivingUpPassesTheWakeOn: a sender woken for room that gives
// up instead (its Conn closed, its deadline passed) wakes the next waiter
// in its place, so that room never goes unclaimed while senders wait.
func TestSendQueueGivingUpPassesTheWakeOn(t *testing.T) {
	q := newQueue(discardConn{})
	defer q.Close()
	gaveUp, next := make(chan struct{}, 1), make(chan struct{}, 1)
	q.mu.Lock()
	q.waiters = append(q.waiters, gaveUp, next)
	q.openRoom(1)
	q.mu.Unlock()
	require.Len(t, gaveUp, 1)
	require.Empty(t, next, "one room: one woken")
	q.forget(gaveUp)
	require.Len(t, next, 1, "the wake passed on")
	q.mu.Lock()
	require.Empty(t, q.waiters)
	q.mu.Unlock()
}

// slowConn takes every write, spending cost per datagram as a socket's
// system call does, so that senders outpace the writer and wait for room.
type slowConn struct {
	transport.Conn
	cost time.Duration
}

func (c slowConn) WriteBatch(ms []transport.Message) (int, error) {
	end := time.Now().Add(c.cost * time.Duration(len(ms)))
	for time.Now().Before(end) {
	}
	return len(ms), nil
}

// BenchmarkSendQueueSenders: senders (a server's connections) each send
// datagrams through one queue whose socket is slower than they are, so
// that most of them wait for room. The cost per datagram must not grow
// with the senders waiting: the writer wakes only as many as it has room
// for.
func BenchmarkSendQueueSenders(b *testing.B) {
	for _, senders := range []int{64, 1024, 8192} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			q := newQueue(slowConn{cost: 200 * time.Nanosecond})
			defer q.Close()
			to := netip.MustParseAddrPort("127.0.0.1:9")
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0 := cpuNow()
			b.ResetTimer()
			for range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					msg := []transport.Message{{Buf: datagram(1, 0), Addr: to}}
					wake := make(chan struct{}, 1)
					for next.Add(1) <= int64(b.N) {
						_ = q.Send(msg, nil, nil, wake)
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuNow is the process's CPU time (user and system), which a machine
// busy with other work moves less than the wall clock.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestQueueLength: behind a held write, a queue of n datagrams takes
// exactly n (Len where n is out of range) and then drops keep-alives; a
// dialed Conn's queue (ClientLen) keeps n datagram buffers twice over,
// not Len's.
func TestQueueLength(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, want int
	}{
		{"client", ClientLen, ClientLen},
		{"server", Len, Len},
		{"one", 1, 1},
		{"zero is Len", 0, Len},
		{"over Len is Len", Len + 1, Len},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				to := netip.MustParseAddrPort("127.0.0.1:9")
				rc := &recordConn{release: make(chan struct{})}
				q := newQueueOf(rc, tc.n)
				require.Len(t, q.queue, tc.want)
				require.Len(t, q.spare, tc.want)
				go sendOne(q, to, datagram(0, 0)) // the held direct write
				synctest.Wait()
				for i := range tc.want {
					require.NoError(t, sendOne(q, to, datagram(1, i)))
				}
				require.Zero(t, q.Dropped())
				require.NoError(t, sendOne(q, to, []byte{0x14, 1})) // full: dropped
				require.Equal(t, uint64(1), q.Dropped())
				close(rc.release)
				q.Close()
				rc.mu.Lock()
				defer rc.mu.Unlock()
				require.Len(t, rc.got, 1+tc.want)
			})
		})
	}
}
