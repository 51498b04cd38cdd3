// Package netsim is a deterministic in-memory datagram network for tests:
// every link (one direction between two addresses) has a latency, jitter,
// loss, duplication and reordering, drawn from a seeded random source.
//
// It has two modes. In simulated time, the test drives the clock: Send puts
// a datagram in flight at a given time and Deliver hands over every datagram
// due by a given time; nothing runs in the background and a seed always
// gives the same outcome. In real time, Listen returns net.PacketConns whose
// datagrams travel through the network on the wall clock, delivered by a
// scheduler goroutine that Close stops. Use one mode per Network.
package netsim

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Config describes a link. The zero value is a perfect link with no delay.
type Config struct {
	// Latency is the one-way delay of every datagram.
	Latency time.Duration
	// Jitter adds a delay drawn uniformly from [0, Jitter].
	Jitter time.Duration
	// Loss is the probability, 0..1, that a datagram is lost.
	Loss float64
	// Duplicate is the probability that a datagram arrives twice; the copy
	// gets its own jitter and reordering.
	Duplicate float64
	// Reorder is the probability that a datagram is held back by
	// ReorderDelay, so later datagrams overtake it.
	Reorder float64
	// ReorderDelay is the extra delay of a reordered datagram; zero means
	// Latency+Jitter, at least a millisecond.
	ReorderDelay time.Duration
	// MaxQueue bounds the datagrams in flight on the link; more are
	// dropped (counted in Stats.Dropped). Zero means no bound.
	MaxQueue int
}

// Stats counts what happened to datagrams.
type Stats struct {
	Sent       uint64 // Send calls (datagrams offered to the network)
	Delivered  uint64 // datagrams handed to a receiver, copies included
	Lost       uint64 // datagrams lost to Config.Loss
	Duplicated uint64 // extra copies made by Config.Duplicate
	Reordered  uint64 // datagrams held back by Config.Reorder
	Dropped    uint64 // datagrams over MaxQueue, or (real time) with no receiver or a full receive queue
}

// linkKey is one direction between two addresses.
type linkKey struct{ from, to netip.AddrPort }

type link struct {
	cfg      Config
	override bool // cfg was set with SetLink
	inflight int
}

// packet is a datagram in flight.
type packet struct {
	due  time.Time
	seq  uint64 // send order: ties on due are delivered in it
	from netip.AddrPort
	to   netip.AddrPort
	buf  []byte
	link *link
}

// Network is the simulated network. Its methods are safe for concurrent
// use.
type Network struct {
	mu      sync.Mutex
	rng     *rand.Rand
	cfg     Config
	links   map[linkKey]*link
	queue   pqueue
	seq     uint64
	stats   Stats
	free    [][]byte // recycled datagram buffers
	scratch []packet // reused by Deliver

	rt realtime
}

// maxFree bounds the recycled buffers kept; bufCap is their capacity.
const (
	maxFree = 1024
	bufCap  = 1500
)

// New makes a network whose links all have cfg, with random choices drawn
// from seed.
func New(seed int64, cfg Config) *Network {
	return &Network{
		rng:   rand.New(rand.NewPCG(uint64(seed), 0x6e6574636f6465)),
		cfg:   cfg,
		links: map[linkKey]*link{},
	}
}

// SetLink overrides the configuration of the direction from → to. Datagrams
// already in flight keep their schedule.
func (n *Network) SetLink(from, to netip.AddrPort, cfg Config) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkLocked(from, to)
	l.cfg, l.override = cfg, true
}

func (n *Network) linkLocked(from, to netip.AddrPort) *link {
	k := linkKey{from, to}
	l := n.links[k]
	if l == nil {
		l = &link{cfg: n.cfg}
		n.links[k] = l
	}
	return l
}

// Send puts a copy of b in flight from one address to another at time now,
// subject to the link's loss, duplication, delay and queue bound.
func (n *Network) Send(now time.Time, from, to netip.AddrPort, b []byte) {
	n.mu.Lock()
	n.sendLocked(now, from, to, b)
	n.mu.Unlock()
	n.rt.kick()
}

func (n *Network) sendLocked(now time.Time, from, to netip.AddrPort, b []byte) {
	n.stats.Sent++
	l := n.linkLocked(from, to)
	cfg := &l.cfg
	if cfg.Loss > 0 && n.rng.Float64() < cfg.Loss {
		n.stats.Lost++
		return
	}
	copies := 1
	if cfg.Duplicate > 0 && n.rng.Float64() < cfg.Duplicate {
		copies = 2
		n.stats.Duplicated++
	}
	for range copies {
		if cfg.MaxQueue > 0 && l.inflight >= cfg.MaxQueue {
			n.stats.Dropped++
			continue
		}
		d := cfg.Latency
		if cfg.Jitter > 0 {
			d += time.Duration(n.rng.Int64N(int64(cfg.Jitter) + 1))
		}
		if cfg.Reorder > 0 && n.rng.Float64() < cfg.Reorder {
			rd := cfg.ReorderDelay
			if rd <= 0 {
				rd = max(cfg.Latency+cfg.Jitter, time.Millisecond)
			}
			d += rd
			n.stats.Reordered++
		}
		l.inflight++
		n.seq++
		n.queue.push(packet{due: now.Add(d), seq: n.seq, from: from, to: to, buf: n.copyLocked(b), link: l})
	}
}

// copyLocked copies b into a recycled buffer if one fits.
func (n *Network) copyLocked(b []byte) []byte {
	if len(b) <= bufCap {
		if k := len(n.free); k > 0 {
			buf := n.free[k-1]
			n.free[k-1] = nil
			n.free = n.free[:k-1]
			return append(buf[:0], b...)
		}
		return append(make([]byte, 0, bufCap), b...)
	}
	return append([]byte(nil), b...)
}

// recycleLocked keeps buf for a later copy.
func (n *Network) recycleLocked(buf []byte) {
	if cap(buf) == bufCap && len(n.free) < maxFree {
		n.free = append(n.free, buf)
	}
}

// popDueLocked moves every packet due at or before now, in due order, to
// the end of out.
func (n *Network) popDueLocked(now time.Time, out []packet) []packet {
	for n.queue.len() > 0 && !n.queue.peek().due.After(now) {
		p := n.queue.pop()
		p.link.inflight--
		out = append(out, p)
	}
	return out
}

// Deliver calls fn for every datagram due at or before now, in order of due
// time (datagrams due at the same time in the order they were sent). b is
// only valid during the call.
//
// fn may call Send. Datagrams it sends are never delivered by the same
// Deliver call, even if they are already due (zero latency): the next
// Deliver call hands them over. So one Deliver is one step of the network,
// and a reply cannot loop back within it.
func (n *Network) Deliver(now time.Time, fn func(from, to netip.AddrPort, b []byte)) {
	n.mu.Lock()
	due := n.popDueLocked(now, n.scratch[:0])
	n.scratch = nil // a nested Deliver (from fn) gets its own
	n.mu.Unlock()

	for i := range due {
		fn(due[i].from, due[i].to, due[i].buf)
	}

	n.mu.Lock()
	n.stats.Delivered += uint64(len(due))
	for i := range due {
		n.recycleLocked(due[i].buf)
		due[i] = packet{}
	}
	n.scratch = due[:0]
	n.mu.Unlock()
}

// NextDue reports when the earliest datagram in flight is due, and false
// if none is.
func (n *Network) NextDue() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.queue.len() == 0 {
		return time.Time{}, false
	}
	return n.queue.peek().due, true
}

// InFlight returns the number of datagrams in flight.
func (n *Network) InFlight() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.queue.len()
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// pqueue is a binary min-heap of packets by (due, seq), typed so that pushes
// do not box.
type pqueue struct{ h []packet }

func (q *pqueue) len() int      { return len(q.h) }
func (q *pqueue) peek() *packet { return &q.h[0] }

func (q *pqueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

func (q *pqueue) push(p packet) {
	q.h = append(q.h, p)
	for i := len(q.h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.h[i], q.h[parent] = q.h[parent], q.h[i]
		i = parent
	}
}

func (q *pqueue) pop() packet {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = packet{}
	q.h = q.h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
