package server

import (
	"math/bits"
	"sync"
	"time"
)

// DefaultTickInterval is the deadline wheel's bucket width when
// Config.TickInterval is 0 or less.
const DefaultTickInterval = 10 * time.Millisecond

// maxWheelBuckets bounds the wheel's size for very small tick intervals. A
// deadline further ahead than the wheel spans is still met: its client is
// looked at once per turn and filed again.
const maxWheelBuckets = 1 << 12

// deadlineWheel files every connected client (loopback clients excepted)
// under its next deadline: the earlier of its next keep-alive and its
// timeout. Update takes the buckets whose time has come instead of walking
// every slot, so its work follows what is due, not MaxClients.
//
// The hot path never touches the wheel: a packet sent or received only
// moves the client's lastSend or lastRecv (atomics) later. A client whose
// bucket comes due is looked at against those, acted on if its deadline
// passed, and filed again at its true next deadline (lazy re-scheduling).
// Every filed deadline is at most KeepAliveInterval ahead, so each client
// is taken about once per keep-alive interval, idle or not. A client that
// left is dropped when its bucket comes due; since a Client is never
// connected again once it left, a reused slot cannot confuse the wheel.
//
// Buckets are slices of client pointers, kept with their capacity: taking
// a bucket reads no client, and the loads of the clients taken can
// overlap (a list linked through the clients would chase one cache miss
// after another). Guarded by its own mutex, a leaf: taken after Server.mu
// when held together, never with a client's locks.
type deadlineWheel struct {
	mu      sync.Mutex
	width   int64       // bucket width in ns
	buckets [][]*Client // len is a power of two
	pos     int64       // the current bucket (absolute): taken last by take
	// Times are monotonic ns (Server.mono), never wall-clock readings.
	n int // clients filed
}

// newDeadlineWheel returns a wheel whose time starts at 0 (the server's
// monotonic clock; see Server.mono).
func newDeadlineWheel(width time.Duration) *deadlineWheel {
	if width <= 0 {
		width = DefaultTickInterval
	}
	// Enough buckets for a keep-alive interval and one more, so that no
	// deadline filed wraps around.
	span := int64(KeepAliveInterval)/int64(width) + 2
	n := 1
	if span > 1 {
		n = 1 << bits.Len64(uint64(span-1))
	}
	n = min(n, maxWheelBuckets)
	w := &deadlineWheel{width: int64(width), buckets: make([][]*Client, n)}
	return w
}

// bucket is the absolute bucket of time ns: floor(ns / width).
func (w *deadlineWheel) bucket(ns int64) int64 {
	b := ns / w.width
	if ns < 0 && ns%w.width != 0 {
		b--
	}
	return b
}

// file puts c in the bucket of deadline due (the current bucket, if due
// has passed). c must be in no bucket. w.mu is held. It allocates only
// while a bucket grows past the most it held before.
func (w *deadlineWheel) file(c *Client, due int64) {
	b := max(w.bucket(due), w.pos)
	i := b & int64(len(w.buckets)-1)
	w.buckets[i] = append(w.buckets[i], c)
	w.n++
}

// take appends to out, and removes from the wheel, every client filed in
// the buckets up to now's, and makes now's bucket the current one. It
// takes the current bucket again even if it was taken before: it holds
// the deadlines of the rest of it.
func (w *deadlineWheel) take(now int64, out []*Client) []*Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := max(w.bucket(now), w.pos)
	first := w.pos
	if last-first >= int64(len(w.buckets)) {
		first = last - int64(len(w.buckets)) + 1 // one turn covers every bucket
	}
	mask := int64(len(w.buckets) - 1)
	for b := first; b <= last; b++ {
		bucket := w.buckets[b&mask]
		out = append(out, bucket...)
		w.n -= len(bucket)
		clear(bucket)
		w.buckets[b&mask] = bucket[:0]
	}
	w.pos = last
	return out
}

// next is the end of the first non-empty bucket: by then something filed
// is due. ok is false when nothing is filed. w.mu is held.
func (w *deadlineWheel) next() (ns int64, ok bool) {
	if w.n == 0 {
		return 0, false
	}
	mask := int64(len(w.buckets) - 1)
	for b := w.pos; b < w.pos+int64(len(w.buckets)); b++ {
		if len(w.buckets[b&mask]) > 0 {
			return (b + 1) * w.width, true
		}
	}
	return 0, false // unreachable: n > 0
}

// reset empties the wheel.
func (w *deadlineWheel) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.buckets)
	w.n = 0
}

// deadline is c's next deadline, monotonic ns: its next keep-alive, or its
// timeout if that comes first.
func (c *Client) deadline() int64 {
	due := c.sendLocked.lastSend.Load() + int64(KeepAliveInterval)
	if c.timeout > 0 {
		if to := c.lastRecv.Load() + int64(c.timeout); to < due {
			due = to
		}
	}
	return due
}
