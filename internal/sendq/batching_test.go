package sendq

import (
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/require"
)

// gateConn records batched writes; while it holds (hold, until open),
// each WriteBatch waits, so that a test can tell a write a sender made
// itself (its Send does not return) from one the writer makes (Send
// returns at once, the writer waits).
type gateConn struct {
	transport.Conn
	mu      sync.Mutex
	gate    chan struct{} // closed by open; nil: writes pass
	batches []int
	got     int
}

func (c *gateConn) WriteBatch(ms []transport.Message) (int, error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, len(ms))
	c.got += len(ms)
	return len(ms), nil
}

func (c *gateConn) hold() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *gateConn) open() {
	c.mu.Lock()
	close(c.gate)
	c.gate = nil
	c.mu.Unlock()
}

func (c *gateConn) written() (got int, batches []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got, append([]int(nil), c.batches...)
}

// batchingQueue returns a Queue on c that batches as on a socket that
// sends a batch in one system call (sendmmsg), or not.
func batchingQueue(c transport.Conn, canBatch bool) *Queue {
	q := newQueue(c)
	q.mu.Lock()
	q.canBatch = canBatch
	q.mu.Unlock()
	return q
}

// sendsHeld sends n datagrams, each from its own goroutine (a connection
// of its own), while c holds every write, and reports whether every Send
// returned meanwhile, that is whether each one queued for the writer
// rather than writing itself; then it opens c and waits for the writes.
func sendsHeld(t *testing.T, q *Queue, c *gateConn, to netip.AddrPort, g, n int) bool {
	c.hold()
	var wg sync.WaitGroup
	returned := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			require.NoError(t, sendOne(q, to, datagram(g, i)))
			returned <- struct{}{}
		})
	}
	synctest.Wait()
	queuedAll := len(returned) == n
	c.open()
	wg.Wait()
	synctest.Wait()
	return queuedAll
}

// TestSendQueueBatching: on a socket that sends a batch in one system
// call, sends that come together (a sender meets a write in progress, or
// a reader's Burst) queue even on an idle queue, so that the writer
// sends them together; after leaveBatching lone batches sends write
// directly again, and a later burst batches only until the next lone
// datagram, unless batches of several form meanwhile. On a socket without
// batched sends, nothing changes: a send on an idle queue writes at once.
func TestSendQueueBatching(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	tests := []struct {
		name     string
		canBatch bool
		start    func(t *testing.T, q *Queue, c *gateConn) // makes sends come together
		batches  bool                                      // the sends then queue
	}{
		{"a sender meets a write", true, meetAWrite, true},
		{"a reader's burst", true, func(_ *testing.T, q *Queue, _ *gateConn) { q.Burst() }, true},
		{"no batched sends: burst", false, func(_ *testing.T, q *Queue, _ *gateConn) { q.Burst() }, false},
		{"no batched sends: a sender meets a write", false, meetAWrite, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &gateConn{}
				q := batchingQueue(c, tt.canBatch)
				// A lone send on an idle queue writes at once.
				require.NoError(t, sendOne(q, to, datagram(0, 0)))
				got, _ := c.written()
				require.Equal(t, 1, got, "a lone send wrote its datagram itself")

				tt.start(t, q, c)
				got0, b0 := c.written()
				const n = 6
				queued := sendsHeld(t, q, c, to, 2, n)
				require.Equal(t, tt.batches, queued, "sends queued for the writer on an idle queue")
				got, b := c.written()
				require.Equal(t, got0+n, got)
				if tt.batches {
					// The writer held at most one batch; the rest queued
					// behind it and left as one more.
					require.LessOrEqual(t, len(b)-len(b0), 2, "six sends in at most two writes: %v", b[len(b0):])
				}

				// Lone sends, one at a time: the writer's batches of one
				// end the batching, and sends write directly again.
				for i := range leaveBatching {
					require.NoError(t, sendOne(q, to, datagram(3, i)))
					synctest.Wait()
				}
				q.mu.Lock()
				batching := q.batching
				q.mu.Unlock()
				require.False(t, batching, "batching outlived %d lone batches", leaveBatching)
				got, _ = c.written()
				require.NoError(t, sendOne(q, to, datagram(4, 0)))
				got1, _ := c.written()
				require.Equal(t, got+1, got1, "after batching, a lone send writes at once again")

				// With no batch of several since, a burst batches only
				// until the next lone datagram.
				q.Burst()
				require.Equal(t, tt.batches, sendsHeld(t, q, c, to, 5, 1), "a send after a burst queued")
				q.mu.Lock()
				batching = q.batching
				q.mu.Unlock()
				require.False(t, batching, "one lone datagram did not end a burst's batching")
				q.Close()
			})
		})
	}
}

// meetAWrite holds a sender's direct write while a second sender queues
// behind it, then lets both through.
func meetAWrite(t *testing.T, q *Queue, c *gateConn) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	c.hold()
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, sendOne(q, to, datagram(1, 0))) // held
	}()
	synctest.Wait()
	require.NoError(t, sendOne(q, to, datagram(1, 1))) // queued behind it
	c.open()
	<-done
	synctest.Wait()
}

// TestSendQueueBatchingAllocs: batching (every send through the writer)
// allocates nothing either.
func TestSendQueueBatchingAllocs(t *testing.T) {
	q := batchingQueue(discardConn{}, true)
	defer q.Close()
	to := netip.MustParseAddrPort("[::1]:9")
	p := make([]byte, transport.MaxDatagram)
	p[0] = 0x15
	msgs := []transport.Message{{Buf: p, Addr: to}}
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		q.Burst()
		_ = q.Send(msgs, nil, nil, nil)
	}))
}

// TestSendQueueBatchingSeveralAtOnce: while batching, a send of several
// datagrams (the ticker's keep-alives, a reader's replies) on an idle
// queue is a batch already: it writes them at once, more than the queue
// holds, and drops none.
func TestSendQueueBatchingSeveralAtOnce(t *testing.T) {
	c := &gateConn{}
	q := batchingQueue(c, true)
	defer q.Close()
	q.Burst()
	to := netip.MustParseAddrPort("127.0.0.1:9")
	msgs := make([]transport.Message, Len+10)
	for i := range msgs {
		msgs[i] = transport.Message{Buf: []byte{0x14, byte(i)}, Addr: to} // keep-alives: droppable
	}
	require.NoError(t, q.Send(msgs, NoWait, nil, nil))
	got, _ := c.written()
	require.Equal(t, len(msgs), got, "written when Send returned")
	require.Zero(t, q.Dropped())
}
