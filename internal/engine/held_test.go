package engine

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendLog is a transport.Conn that records, per system call a socket would
// make, how many datagrams it carried, and the payloads in order.
type sendLog struct {
	mu    sync.Mutex
	calls []int
	sent  []string
	gate  chan struct{} // if set, each write waits for it to close
}

func (c *sendLog) record(ms ...[]byte) {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, len(ms))
	for _, m := range ms {
		c.sent = append(c.sent, string(m))
	}
}

func (c *sendLog) get() (calls []int, sent []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls...), append([]string(nil), c.sent...)
}

func (c *sendLog) WriteTo(b []byte, _ netip.AddrPort) error { c.record(b); return nil }
func (c *sendLog) WriteBatch(ms []transport.Message) (int, error) {
	bs := make([][]byte, len(ms))
	for i := range ms {
		bs[i] = ms[i].Buf
	}
	c.record(bs...)
	return len(ms), nil
}
func (c *sendLog) ReadBatch([]transport.Message) (int, error) { return 0, net.ErrClosed }
func (c *sendLog) LocalAddr() net.Addr                        { return &net.UDPAddr{} }
func (c *sendLog) SetReadDeadline(time.Time) error            { return nil }
func (c *sendLog) Close() error                               { return nil }

var heldPeer = netip.MustParseAddrPort("127.0.0.1:9")

// heldWriter is a Conn's Writes of payloads through Held, as a binding
// makes them: each in the write turn.
type heldWriter struct {
	h    Held
	turn WriteTurn
	stop chan struct{}
}

func newHeldWriter(conn transport.Conn) *heldWriter {
	w := &heldWriter{turn: NewWriteTurn(), stop: make(chan struct{})}
	w.h.Init(conn, w.turn, w.stop)
	w.h.Enable(true)
	return w
}

func (w *heldWriter) send(t *testing.T, p string, queued bool) {
	require.True(t, w.turn.Take(w.stop, nil))
	require.NoError(t, w.h.Send([]transport.Message{{Buf: []byte(p), Addr: heldPeer}}, queued, time.Now(), nil))
	w.turn.Give()
}

// TestHeldWrites runs the held-write policy on simulated time: which
// Writes are held, and that each train leaves, in order and as one system
// call, when its last Write is made or when its writer stops writing,
// with no time passing on the clock but the Writes' own gaps: the bound
// of a held datagram is the writer's next wait, not a timer's. It runs
// Go code on one thread (GOMAXPROCS 1), where the dispatch runs only at
// the writer's wait, so that each train's shape is the policy's; with
// more, a dispatch that another thread takes up may send part of a train
// early, in order all the same (the real UDP tests of the root package
// run that way).
func TestHeldWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const frame = 16 * time.Millisecond // a game loop's period
	cases := []struct {
		name     string
		received int           // payloads received before the Writes (Received)
		queued   bool          // the read queue holds payloads at each Write
		after    time.Duration // from the payloads' arrival to the first Write
		gap      time.Duration // between two Writes
		writes   int           // Writes made, then the writer waits
		calls    []int         // datagrams per system call
		held     bool          // something is held when the writer starts waiting
	}{
		{"nothing received: each Write at once", 0, false, 0, 0, 3, []int{1, 1, 1}, false},
		{"one received: its answer at once", 1, false, 0, 0, 1, []int{1}, false},
		{"a burst answered: one train with the last answer", 8, false, 0, 0, 8, []int{8}, false},
		{"a burst answered late: the Writes after the first are a burst", 8, false, frame, 0, 8, []int{1, 7}, false},
		{"fewer answers than received: the train leaves when the writer waits", 8, false, 0, 0, 3, []int{3}, true},
		{"Writes at a game loop's rate are no answers: each at once", 8, false, 0, frame, 4, []int{1, 1, 1, 1}, false},
		{"read queue not empty: held", 0, true, 0, 0, 4, []int{4}, true},
		{"a long burst from the read queue: HeldTrain at a time", 0, true, 0, 0, 40, []int{HeldTrain, HeldTrain, 40 - 2*HeldTrain}, true},
		{"more received than a train: counted up to HeldTrain", 20, false, 0, 0, 20, []int{HeldTrain, 1, 1, 1, 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				log := &sendLog{}
				w := newHeldWriter(log)
				defer close(w.stop)
				w.h.Received(tc.received, time.Now())
				wrote := make(chan int)
				go func() { // the writer
					time.Sleep(tc.after)
					for i := range tc.writes {
						if i > 0 {
							time.Sleep(tc.gap)
						}
						w.send(t, string(rune('a'+i%26)), tc.queued)
					}
					wrote <- w.h.Len()
				}()
				held := <-wrote
				if tc.held {
					require.NotZero(t, held, "the burst's Writes are held while the writer writes")
				}
				synctest.Wait() // the writer waits: nothing else can run
				calls, sent := log.get()
				require.Equal(t, tc.calls, calls, "datagrams per system call")
				require.Len(t, sent, tc.writes)
				for i, s := range sent {
					require.Equal(t, string(rune('a'+i%26)), s, "in order")
				}
				require.Zero(t, w.h.Len())
				require.Equal(t, start.Add(tc.after+time.Duration(max(tc.writes-1, 0))*tc.gap), time.Now(),
					"no time passed but the Writes' own: no timer sent them")
			})
		})
	}
}

// TestHeldStopsAtClose checks that a dispatch that finds its Conn over
// sends nothing and ends (Close sends what is held, before its own
// datagrams, in the write turn).
func TestHeldStopsAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &sendLog{}
		w := newHeldWriter(log)
		w.h.Received(4, time.Now())
		require.True(t, w.turn.Take(w.stop, nil))
		require.NoError(t, w.h.Send([]transport.Message{{Buf: []byte("held"), Addr: heldPeer}}, false, time.Now(), nil))
		close(w.stop) // the Conn ends while the writer holds the turn
		require.NoError(t, w.h.Write([]transport.Message{{Buf: []byte("bye"), Addr: heldPeer}}, false))
		w.turn.Give()
		synctest.Wait() // the dispatch ended
		calls, sent := log.get()
		require.Equal(t, []int{2}, calls)
		require.Equal(t, []string{"held", "bye"}, sent)
	})
}

// TestFallback runs a server Conn's held Writes, bounded by its Listener's
// Fallback, on simulated time: the train leaves exactly HeldFallback
// after the first datagram held, as one send, and not before; a sweep
// that finds the Conn's write turn taken (its own Write) neither waits
// for it nor sends, and looks again one HeldFallback later; a Conn over
// is forgotten; and the timer is armed only while a Conn is registered.
func TestFallback(t *testing.T) {
	cases := []struct {
		name     string
		turnHeld bool // the Conn's own Write has the turn at the first sweep
		over     bool // the Conn ends before the first sweep
		full     bool // the send queue is busy, with no room, at the first sweep
		calls    []int
		sent     []string
		left     time.Duration // when the train left
	}{
		{"sweeps the train", false, false, false, []int{2}, []string{"a", "b"}, HeldFallback},
		{"its own Write has the turn", true, false, false, []int{2}, []string{"a", "b"}, 2 * HeldFallback},
		{"the Conn over", false, true, false, nil, nil, 0},
		// Another sender's datagram is being written (x) and one waits in
		// the queue (y): the sweep keeps the train, drops none of it, and
		// the next sends it behind them.
		{"the send queue full", false, false, true, []int{1, 1, 2}, []string{"x", "y", "a", "b"}, 2 * HeldFallback},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &sendLog{}
				room := 64
				if tc.full {
					log.gate, room = make(chan struct{}), 1
				}
				q := sendq.New(log, nil, room)
				defer q.Close()
				var others sync.WaitGroup
				defer others.Wait()
				if tc.full {
					others.Go(func() {
						assert.NoError(t, q.Send([]transport.Message{{Buf: []byte("x"), Addr: heldPeer}}, nil, nil, nil))
					})
					synctest.Wait() // x is being written: the queue is busy
					require.NoError(t, q.Send([]transport.Message{{Buf: []byte("y"), Addr: heldPeer}}, nil, nil, nil))
				}
				fb := NewFallback()
				defer fb.Close()
				w := &heldWriter{turn: NewWriteTurn(), stop: make(chan struct{})}
				w.h.InitQueue(q, make(chan struct{}, 1), w.turn, w.stop, fb)
				w.h.Enable(true)
				start := time.Now()
				w.send(t, "a", true)
				w.send(t, "b", true)
				if tc.turnHeld {
					w.turn.Wait()
				}
				if tc.over {
					close(w.stop)
				}
				time.Sleep(HeldFallback - time.Nanosecond)
				synctest.Wait()
				calls, _ := log.get()
				require.Empty(t, calls, "held until the fallback")
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if tc.turnHeld {
					calls, _ = log.get()
					require.Empty(t, calls, "the sweep neither waits for the turn nor sends")
					require.Equal(t, 2, w.h.Len())
					w.turn.Give()
					synctest.Wait()
					calls, _ = log.get()
					require.Empty(t, calls, "no sweep waited for the turn: the next one sends")
					time.Sleep(HeldFallback)
					synctest.Wait()
				}
				if tc.full {
					require.Equal(t, 2, w.h.Len(), "the sweep keeps the train a full queue has no room for")
					close(log.gate)
					synctest.Wait()
					calls, _ = log.get()
					require.Equal(t, []int{1, 1}, calls, "the queue's own datagrams, and not the train before the next sweep")
					time.Sleep(HeldFallback)
					synctest.Wait()
				}
				calls, sent := log.get()
				require.Equal(t, tc.calls, calls)
				if tc.left > 0 {
					require.Equal(t, tc.left, time.Since(start), "when the train left")
					require.Equal(t, tc.sent, sent)
					require.Zero(t, w.h.Len())
				}
				fb.mu.Lock()
				armed, listed := fb.armed, len(fb.list)
				fb.mu.Unlock()
				require.False(t, armed, "nothing registered: the timer is not armed")
				require.Zero(t, listed)
			})
		})
	}
}
