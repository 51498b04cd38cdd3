//go:build lockrank

package engine

// The lock-order check of a test build (go test -tags lockrank): each
// goroutine's engine locks are tracked by rank, and taking one whose rank
// is not above every rank the goroutine holds panics, naming both. CI runs
// the adapter-level soak and the engine's tests with it, under -race. The
// ranks, in the order the doc gives: the read turn → a Conn's write turn
// → the leaves (Socket.dmu, Due.mu, Ticker.mu), none of which is held
// across a call into the binding (checkBinding).

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

type rank int

const (
	rankReadTurn rank = iota + 1
	rankWriteTurn
	rankLeaf
)

var rankNames = map[rank]string{rankReadTurn: "the read turn", rankWriteTurn: "a write turn", rankLeaf: "a leaf lock"}

var (
	ranksMu sync.Mutex
	ranks   = map[uint64][]rank{} // by goroutine: the ranks it holds, in the order taken
)

// goid is the calling goroutine's id, from its stack's first line.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// acquire records that the goroutine takes a lock of rank r, and panics
// if it holds one of rank r or above.
func acquire(r rank) {
	id := goid()
	ranksMu.Lock()
	held := ranks[id]
	for _, h := range held {
		if h >= r {
			ranksMu.Unlock()
			panic(fmt.Sprintf("engine: lock order: goroutine %d takes %s while it holds %s", id, rankNames[r], rankNames[h]))
		}
	}
	ranks[id] = append(held, r)
	ranksMu.Unlock()
}

// release records that the goroutine gave a lock of rank r back.
func release(r rank) {
	id := goid()
	ranksMu.Lock()
	defer ranksMu.Unlock()
	held := ranks[id]
	for i := len(held) - 1; i >= 0; i-- {
		if held[i] == r {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(ranks, id)
	} else {
		ranks[id] = held
	}
}

// checkBinding panics if the goroutine, about to call into the binding,
// holds a lock of rank above most.
func checkBinding(most rank) {
	id := goid()
	ranksMu.Lock()
	defer ranksMu.Unlock()
	for _, h := range ranks[id] {
		if h > most {
			panic(fmt.Sprintf("engine: lock order: goroutine %d calls into its binding holding %s", id, rankNames[h]))
		}
	}
}
