package netcode

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"

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

func TestCombineSink(t *testing.T) {
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
		{"more queued than a batch holds", 8, 2000, true, 0, true},
		{"refused datagrams are skipped", 4, 100, false, 7, false},
	}
	for _, tt := range tests {
		// In a synctest bubble, synctest.Wait returns once every sender has
		// either queued its datagrams and returned or is blocked behind the
		// held write: the queue is as full as it gets.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &recordConn{failN: tt.failN}
				if tt.block {
					rc.release = make(chan struct{})
				}
				s := newCombineSink(rc)
				var wg sync.WaitGroup
				for g := range tt.senders {
					wg.Go(func() {
						var b [8]byte
						for i := range tt.each {
							binary.LittleEndian.PutUint32(b[:], uint32(g))
							binary.LittleEndian.PutUint32(b[4:], uint32(i))
							s.Send(to, b[:])
						}
					})
				}
				if tt.block {
					// Let the other senders fill the queue behind the held write.
					synctest.Wait()
					close(rc.release)
				}
				wg.Wait()

				rc.mu.Lock()
				defer rc.mu.Unlock()
				total := tt.senders * tt.each
				require.Len(t, rc.got, total, "every datagram is written exactly once")
				next := make([]uint32, tt.senders)
				refused := 0
				for _, d := range rc.got {
					if d == nil {
						refused++
						continue
					}
					g, i := binary.LittleEndian.Uint32(d), binary.LittleEndian.Uint32(d[4:])
					require.GreaterOrEqual(t, i, next[g], "sender %d's datagrams out of order", g)
					next[g] = i + 1
				}
				if tt.failN > 0 {
					require.Equal(t, total/tt.failN, refused)
				}
				biggest := 0
				for _, n := range rc.batches {
					require.LessOrEqual(t, n, sendBatch)
					biggest = max(biggest, n)
				}
				if tt.wantBatch {
					require.Greater(t, biggest, 1, "no datagrams were combined: %v", rc.batches)
				}
			})
		})
	}
}

// TestCombineSinkWriterSendsTheQueue: Sends that arrive while another
// goroutine is writing return at once, and that goroutine sends what they
// queued, in one batch, before it returns; nothing waits for a later Send.
func TestCombineSinkWriterSendsTheQueue(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	rc := &recordConn{release: make(chan struct{}), entered: make(chan struct{})}
	s := newCombineSink(rc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Send(to, []byte("first"))
	}()
	<-rc.entered
	const queued = sendBatch - 1
	for i := range queued {
		s.Send(to, []byte{byte(i)}) // returns at once: a write is in progress
	}
	close(rc.release)
	<-done
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Equal(t, []int{1, queued}, rc.batches)
	require.Len(t, rc.got, 1+queued)
}

// discardConn takes every write.
type discardConn struct{ transport.Conn }

func (discardConn) WriteBatch(ms []transport.Message) (int, error) { return len(ms), nil }

func TestCombineSinkAllocs(t *testing.T) {
	s := newCombineSink(discardConn{})
	to := netip.MustParseAddrPort("[::1]:9")
	p := make([]byte, MaxPayloadBytes)
	require.Zero(t, testing.AllocsPerRun(1000, func() { s.Send(to, p) }))
}
