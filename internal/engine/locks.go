package engine

// The engine's locks, ranked in the order the package doc gives (the
// read turn is turn.go's): a Conn's write turn, and the leaf mutexes.

import (
	"os"
	"sync"

	"github.com/gonetcode/netcode/internal/sendq"
)

// WriteTurn is a Conn's write turn, held from the sealing of its packets
// to their hand-off to the socket or its send queue, so that they leave in
// sequence order (the peer's replay window drops a packet far behind the
// newest). It is a channel of capacity 1, so that waiting for it is a
// select that also watches the Conn's end and its write deadline. Its
// rank, in the lock order, follows the read turn's and precedes the
// core's locks (lockrank.go checks it in a lockrank build).
type WriteTurn chan struct{}

// NewWriteTurn returns a free write turn.
func NewWriteTurn() WriteTurn { return make(WriteTurn, 1) }

// Take takes the turn, waiting for it until stop or deadline is closed;
// it reports whether it has it. The turn is free almost always: that case
// costs one channel send.
func (w WriteTurn) Take(stop, deadline <-chan struct{}) bool {
	if w.TryTake() {
		return true
	}
	select {
	case w <- struct{}{}:
		acquire(rankWriteTurn)
		return true
	case <-stop:
	case <-deadline:
	}
	return false
}

// TryTake takes the turn if it is free, and reports whether it did.
func (w WriteTurn) TryTake() bool {
	select {
	case w <- struct{}{}:
		acquire(rankWriteTurn)
		return true
	default:
		return false
	}
}

// Wait takes the turn, however long it takes (Close, once the Writes
// waiting for it have given up).
func (w WriteTurn) Wait() {
	w <- struct{}{}
	acquire(rankWriteTurn)
}

// Give gives the turn back.
func (w WriteTurn) Give() {
	release(rankWriteTurn)
	<-w
}

// TurnErr is why Take gave up: the Conn's end (sendq.ErrStopped) or its
// write deadline.
func TurnErr(stop <-chan struct{}) error {
	select {
	case <-stop:
		return sendq.ErrStopped
	default:
		return os.ErrDeadlineExceeded
	}
}

// leafMutex is a sync.Mutex that is a leaf in the lock order: nothing is
// taken while it is held (lockrank.go checks it in a lockrank build).
type leafMutex struct{ mu sync.Mutex }

func (m *leafMutex) Lock() {
	acquire(rankLeaf)
	m.mu.Lock()
}

func (m *leafMutex) Unlock() {
	m.mu.Unlock()
	release(rankLeaf)
}
