package webtransport

import (
	"net/netip"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// admission decides which QUIC connections a Server holds, so that
// connections that open no session cannot hold the cap however often
// their client renews them. Every mode served on the Server (every path
// of its HTTP/3 handler) gets it: a connection is admitted here before
// any request is read, and a handler takes its one session with
// Server.claimSession.
//
// The rules, each O(1):
//   - At most Config.MaxConnections connections, sessions and waiting
//     (session-less) ones together. A new connection that finds them all
//     taken closes a waiting one to make room: the oldest of the source
//     (IP address) with the most connections waiting. Only when every
//     connection carries a session is a new one refused (codeTooMany).
//   - Under pressure (half of MaxConnections waiting or more), at most
//     Config.MaxWaitingPerSource waiting connections from one source: a
//     new one from a source at its limit closes that source's oldest, so
//     a source that renews its connections renews its own. Without
//     pressure a source may have more waiting: many players behind one
//     address (a carrier's NAT) connecting at once are not made to close
//     each other's connections while there is room.
//   - A waiting connection is closed after Config.SessionWait; under
//     pressure (half of MaxConnections waiting or more) a new one gets
//     pressureSessionWait at most.
//
// The bound: a connection is never closed to make room while another
// source has more connections waiting than its own. So a client that
// opens its session at once is served whatever the sources that renew
// idle connections do, as long as they have more connections waiting than
// sources; from the same source as such a client (one address behind a
// NAT), it is served if its CONNECT request comes before its source opens
// MaxWaitingPerSource more (one round trip after its QUIC handshake).
type admission struct {
	max       int
	perSource int
	wait      time.Duration

	// Lock order: mu is a leaf.
	mu      sync.Mutex
	n       int // connections held, less those closed to make room
	waiting int
	sources map[netip.Addr]*source // the sources with connections waiting
	// byCount[k] lists the sources with k connections waiting (k from 1
	// to max: perSource bounds k only under pressure); top is the largest
	// k with any.
	byCount []*source
	top     int
	byConn  map[*quic.Conn]*connState
}

// source is one IP address's waiting connections, oldest first; its
// links are guarded by admission.mu.
type source struct {
	addr       netip.Addr
	head, tail *connState
	n          int
	prev, next *source // in admission.byCount[n]
}

// connState is what the Server knows of one QUIC connection; its fields
// are guarded by admission.mu.
type connState struct {
	conn       *quic.Conn
	addr       netip.Addr
	src        *source    // while it waits
	prev, next *connState // in src's list
	claimed    bool       // a session was admitted or refused on it
	evicted    bool       // closed to make room: no longer counted in n
}

// pressureSessionWait is the longest a connection admitted under
// pressure waits for its session.
const pressureSessionWait = time.Second

// defaultWaitingPerSource is Config.MaxWaitingPerSource's default.
const defaultWaitingPerSource = 8

func newAdmission(max, perSource int, wait time.Duration) *admission {
	limit := max // how many one source can have waiting: all, without pressure
	if perSource > limit {
		limit = perSource
	}
	return &admission{max: max, perSource: perSource, wait: wait,
		sources: make(map[netip.Addr]*source), byCount: make([]*source, limit+1), byConn: make(map[*quic.Conn]*connState)}
}

// admit takes c, from the IP address addr, in, or returns nil if it
// must be closed (codeTooMany). It returns the waiting connection closed
// to make room, if any, for the caller to close, and how long c may wait
// for its session.
func (a *admission) admit(c *quic.Conn, addr netip.Addr) (st, evicted *connState, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch src := a.sources[addr]; {
	case src != nil && src.n >= a.perSource && 2*a.waiting >= a.max:
		evicted = src.head // under pressure: the source renews its own
	case a.n >= a.max:
		if a.top == 0 {
			return nil, nil, 0 // every connection carries a session
		}
		evicted = a.byCount[a.top].head
	}
	if evicted != nil {
		a.unwait(evicted)
		evicted.evicted = true
		a.n-- // it is closing: its place is the new one's
	}
	st = &connState{conn: c, addr: addr}
	a.await(st)
	a.byConn[c] = st
	a.n++
	wait = a.wait
	if 2*a.waiting >= a.max {
		wait = min(wait, pressureSessionWait)
	}
	return st, evicted, wait
}

// await files st as its source's newest waiting connection; a.mu is held.
func (a *admission) await(st *connState) {
	src := a.sources[st.addr]
	if src == nil {
		src = &source{addr: st.addr}
		a.sources[st.addr] = src
	} else {
		a.uncount(src)
	}
	st.src, st.prev = src, src.tail
	if src.tail != nil {
		src.tail.next = st
	} else {
		src.head = st
	}
	src.tail = st
	src.n++
	a.count(src)
	a.waiting++
}

// unwait takes st out of the waiting connections, if it is in; a.mu is
// held.
func (a *admission) unwait(st *connState) {
	src := st.src
	if src == nil {
		return
	}
	if st.prev != nil {
		st.prev.next = st.next
	} else {
		src.head = st.next
	}
	if st.next != nil {
		st.next.prev = st.prev
	} else {
		src.tail = st.prev
	}
	st.src, st.prev, st.next = nil, nil, nil
	a.uncount(src)
	src.n--
	if src.n > 0 {
		a.count(src)
	} else {
		delete(a.sources, src.addr)
	}
	a.waiting--
}

// count files src under its count; a.mu is held.
func (a *admission) count(src *source) {
	src.prev, src.next = nil, a.byCount[src.n]
	if src.next != nil {
		src.next.prev = src
	}
	a.byCount[src.n] = src
	a.top = max(a.top, src.n)
}

// uncount takes src from under its count; a.mu is held.
func (a *admission) uncount(src *source) {
	if src.prev != nil {
		src.prev.next = src.next
	} else {
		a.byCount[src.n] = src.next
	}
	if src.next != nil {
		src.next.prev = src.prev
	}
	src.prev, src.next = nil, nil
	for a.top > 0 && a.byCount[a.top] == nil {
		a.top--
	}
}

// claim marks c's one session: it reports false if c is not admitted,
// had one already, or was closed to make room or timed out (it is
// closing).
func (a *admission) claim(c *quic.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.byConn[c]
	if st == nil || st.claimed || st.src == nil {
		return false
	}
	st.claimed = true
	a.unwait(st)
	return true
}

// expire ends st's wait: it reports whether st was still waiting (its
// connection is to be closed).
func (a *admission) expire(st *connState) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st.src == nil {
		return false
	}
	a.unwait(st)
	return true
}

// leave forgets st once its connection has ended.
func (a *admission) leave(st *connState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unwait(st)
	delete(a.byConn, st.conn)
	if !st.evicted {
		a.n--
	}
}

// sourceOf is the IP address c comes from.
func sourceOf(c *quic.Conn) netip.Addr {
	if ua, ok := c.RemoteAddr().(interface{ AddrPort() netip.AddrPort }); ok {
		return ua.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
