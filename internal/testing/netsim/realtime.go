package netsim

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/transport"
)

// recvQueue is how many datagrams wait in a Conn before more are dropped,
// as in a socket's receive buffer.
const recvQueue = 1024

// maxDatagram is the largest datagram a Conn sends: the largest its
// receive queue holds, a link MTU well above any netcode packet. Larger
// writes fail with EMSGSIZE, as over a real link.
const maxDatagram = packetq.MaxBytes

// firstEphemeral is where Listen starts choosing ports for port 0.
const firstEphemeral = 49152

// realtime is the state of the real-time mode, guarded by Network.mu
// except where noted.
type realtime struct {
	conns    map[netip.AddrPort]*Conn
	nextPort uint16
	closed   bool
	started  bool
	running  atomic.Bool   // the scheduler is running: Send must wake it
	wake     chan struct{} // capacity 1
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// kick wakes the scheduler, if there is one, to look at the queue again.
func (r *realtime) kick() {
	if r.running.Load() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

var (
	errAddrInUse   = errors.New("netsim: address already in use")
	errInvalidAddr = errors.New("netsim: invalid address")
	errNoPorts     = errors.New("netsim: no free port")
)

// Listen opens a connection at addr on the network, for tests in real
// time: what it writes travels through the network on the wall clock with
// the links' delay and loss, delivered by a scheduler goroutine that
// starts with the first Listen and stops at Close. Port 0 picks a free
// port. A connection on an unspecified address (0.0.0.0, ::) receives
// datagrams sent to any address with its port, but sends from the
// unspecified address. IPv4-mapped addresses are unmapped.
//
// The connection also has the allocation-free ReadFromUDPAddrPort and
// WriteToUDPAddrPort methods of *net.UDPConn.
func (n *Network) Listen(addr netip.AddrPort) (net.PacketConn, error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if !addr.Addr().IsValid() {
		return nil, &net.OpError{Op: "listen", Net: "udp", Err: errInvalidAddr}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := &n.rt
	if r.closed {
		return nil, &net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: net.ErrClosed}
	}
	if r.conns == nil {
		r.conns = map[netip.AddrPort]*Conn{}
	}
	if addr.Port() == 0 {
		p, ok := n.freePortLocked(addr.Addr())
		if !ok {
			return nil, &net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: errNoPorts}
		}
		addr = netip.AddrPortFrom(addr.Addr(), p)
	}
	if r.conns[addr] != nil {
		return nil, &net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: errAddrInUse}
	}
	c := &Conn{
		n:     n,
		addr:  addr,
		laddr: net.UDPAddrFromAddrPort(addr),
		q:     packetq.New(recvQueue),
	}
	r.conns[addr] = c
	if !r.started {
		r.started = true
		r.wake = make(chan struct{}, 1)
		r.quit = make(chan struct{})
		r.done = make(chan struct{})
		r.running.Store(true)
		go n.schedule()
	}
	return c, nil
}

func (n *Network) freePortLocked(a netip.Addr) (uint16, bool) {
	r := &n.rt
	for range 65536 - firstEphemeral {
		if r.nextPort < firstEphemeral {
			r.nextPort = firstEphemeral
		}
		p := r.nextPort
		r.nextPort++
		if r.conns[netip.AddrPortFrom(a, p)] == nil {
			return p, true
		}
	}
	return 0, false
}

// Close stops the real-time scheduler and closes every connection from
// Listen. Datagrams in flight stay queued.
func (n *Network) Close() error {
	n.mu.Lock()
	r := &n.rt
	r.closed = true
	started := r.started
	conns := make([]*Conn, 0, len(r.conns))
	for _, c := range r.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	if started {
		r.stopOnce.Do(func() {
			r.running.Store(false)
			close(r.quit)
		})
		<-r.done
	}
	for _, c := range conns {
		_ = c.Close()
	}
	return nil
}

// schedule delivers datagrams to connections when they fall due.
func (n *Network) schedule() {
	r := &n.rt
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		batch   []packet
		targets []*Conn
	)
	for {
		now := time.Now()
		n.mu.Lock()
		batch = n.popDueLocked(now, batch[:0])
		targets = targets[:0]
		for i := range batch {
			targets = append(targets, n.routeLocked(batch[i].to))
		}
		var next time.Time
		pending := n.queue.len() > 0
		if pending {
			next = n.queue.peek().due
		}
		n.mu.Unlock()

		var delivered, dropped uint64
		for i := range batch {
			if c := targets[i]; c != nil && c.q.Push(batch[i].from, batch[i].buf) {
				delivered++
			} else {
				dropped++
			}
		}
		n.mu.Lock()
		n.stats.Delivered += delivered
		n.stats.Dropped += dropped
		for i := range batch {
			n.recycleLocked(batch[i].buf) // the connection keeps a copy
			batch[i] = packet{}
		}
		n.mu.Unlock()
		clear(targets)

		var fire <-chan time.Time
		if pending {
			timer.Reset(time.Until(next))
			fire = timer.C
		}
		select {
		case <-r.wake:
		case <-fire:
		case <-r.quit:
			return
		}
	}
}

// routeLocked finds the connection for a destination: the exact address,
// else one on the unspecified address of its family with the same port.
func (n *Network) routeLocked(to netip.AddrPort) *Conn {
	if c := n.rt.conns[to]; c != nil {
		return c
	}
	unspec := netip.IPv4Unspecified()
	if to.Addr().Is6() {
		unspec = netip.IPv6Unspecified()
	}
	return n.rt.conns[netip.AddrPortFrom(unspec, to.Port())]
}

// Conn is a real-time connection on a Network: a net.PacketConn. It is safe
// for concurrent use. What the scheduler delivers waits in a bounded queue
// (recvQueue datagrams), as in a socket's receive buffer.
type Conn struct {
	n     *Network
	addr  netip.AddrPort
	laddr *net.UDPAddr
	q     *packetq.Queue
	wd    deadline.Deadline
}

var _ net.PacketConn = (*Conn)(nil)

func (c *Conn) opError(op string, addr netip.AddrPort, err error) error {
	oe := &net.OpError{Op: op, Net: "udp", Source: c.laddr, Err: err}
	if addr.IsValid() {
		oe.Addr = net.UDPAddrFromAddrPort(addr)
	}
	return oe
}

// ReadFromUDPAddrPort reads one datagram into b, truncating it if b is
// short, and returns its length and sender.
func (c *Conn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	k, from, err := c.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, c.opError("read", netip.AddrPort{}, err)
	}
	return k, from, nil
}

// ReadFrom reads one datagram into b, truncating it if b is short; the
// address is a *net.UDPAddr.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	k, from, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return k, net.UDPAddrFromAddrPort(from), nil
}

// WriteToUDPAddrPort sends b as one datagram to addr through the network.
func (c *Conn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	select {
	case <-c.q.Done():
		return 0, c.opError("write", addr, net.ErrClosed)
	case <-c.wd.Wait():
		return 0, c.opError("write", addr, os.ErrDeadlineExceeded)
	default:
	}
	if !addr.Addr().IsValid() || addr.Port() == 0 {
		return 0, c.opError("write", addr, errInvalidAddr)
	}
	if len(b) > maxDatagram {
		return 0, c.opError("write", addr, syscall.EMSGSIZE)
	}
	to := netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	c.n.Send(time.Now(), c.addr, to, b)
	return len(b), nil
}

// WriteTo sends b as one datagram to addr, a *net.UDPAddr (or any address
// whose String is "host:port" with a literal IP).
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	return c.WriteToUDPAddrPort(b, transport.AddrPortOf(addr))
}

// Close closes the connection: blocked reads return net.ErrClosed, what
// is queued is discarded and the address is free again.
func (c *Conn) Close() error {
	if !c.q.Close() {
		return c.opError("close", netip.AddrPort{}, net.ErrClosed)
	}
	c.wd.Stop()
	n := c.n
	n.mu.Lock()
	if n.rt.conns[c.addr] == c {
		delete(n.rt.conns, c.addr)
	}
	n.mu.Unlock()
	return nil
}

// LocalAddr returns the connection's address, a *net.UDPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.q.SetReadDeadline(t)
	c.wd.Set(t)
	return nil
}

// SetReadDeadline sets the deadline after which reads fail with
// os.ErrDeadlineExceeded; the zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline after which writes fail with
// os.ErrDeadlineExceeded; writes never block, so it only matters once
// passed.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wd.Set(t)
	return nil
}
