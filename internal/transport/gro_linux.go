package transport

import (
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// With UDP GRO (UDP_GRO, Linux 5.0) on, the kernel may hand the socket
// several datagrams of one sender as one super-datagram, all of one
// segment size but the last, with a UDP_GRO control message that gives
// the size: what a peer sent as a GSO train over loopback, or what a
// network card's GRO merged of one flow. A read must then take up to
// 64 KiB per header, and cuts what it took into the datagrams again.
const (
	groMax   = 1 << 16 // the largest super-datagram
	groSlots = 64      // super-datagrams one read of a Listener's socket takes
)

// cmsgGROSpace is the room of one UDP_GRO control message (an int).
var cmsgGROSpace = unix.CmsgSpace(4)

// groReader is an mmsgConn's reading with GRO on: it reads super-
// datagrams into slots of its own and hands them out cut into datagrams,
// keeping what a caller's batch had no room for until the next read.
// It is used under mmsgConn.rmu.
type groReader struct {
	b     *batch
	slots [][]byte // groMax bytes each: pages are touched only as datagrams come
	max   int      // slots grows up to max, while reads find every slot filled by a train
	ctrl  []byte   // a UDP_GRO control message's room per header
	lens  []int
	segs  []int // the segment size of each; 0: one datagram
	addrs []netip.AddrPort

	n, next, off int  // read, handed out whole, and bytes of next handed out
	drained      bool // the last read took fewer than it asked: the socket was empty
	coalesced    int  // super-datagrams of more than one datagram read so far (tests)
}

// newGROReader returns a groReader with slots slots to read into, growing
// up to max.
func newGROReader(slots, max int) *groReader {
	b := newBatch(max)
	b.fn = b.recv
	g := &groReader{
		b:     b,
		max:   max,
		ctrl:  make([]byte, max*cmsgGROSpace),
		lens:  make([]int, max),
		segs:  make([]int, max),
		addrs: make([]netip.AddrPort, max),
	}
	for range slots {
		g.slots = append(g.slots, make([]byte, groMax))
	}
	return g
}

// groFault, when set, makes the kernel refuse UDP_GRO: tests set it to
// see a socket fall back as on a kernel without it (before Linux 5.0).
var groFault bool

// EnableGRO asks the kernel to hand c's socket coalesced datagrams (UDP
// GRO), if c is a socket on PathBest of a kernel that has it, and reports
// whether it did. Call it before the first read: it waits for a read in
// progress. It costs the socket 4 MiB of address space for its reads
// (resident only as datagrams come): a Listener's socket, which reads
// many senders' datagrams at once, is worth it. A client's socket asks
// with AskGRO instead.
func EnableGRO(c Conn) bool {
	m, ok := c.(*mmsgConn)
	if !ok || !m.offload {
		return false
	}
	m.rmu.Lock()
	defer m.rmu.Unlock()
	_ = m.rc.Control(func(fd uintptr) { m.startGRO(fd, groSlots, groSlots) })
	return m.gro != nil
}

// AskGRO asks that c's reads take coalesced datagrams (UDP GRO) from its
// next read on, for a socket that is to receive bulk trains (a dialed
// Conn carrying a reliable stream), and reports whether c may: a socket
// on PathBest of a kernel with UDP GSO. It never waits: the goroutine
// that reads next turns GRO on before it reads, so that no datagram is
// read into a buffer too small for a train. Its reads start with one
// 64 KiB slot, and take up to slots super-datagrams at once as trains
// come faster than one read takes them. A kernel that refuses UDP_GRO
// leaves the reads as they were.
func AskGRO(c Conn, slots int) bool {
	m, ok := c.(*mmsgConn)
	if !ok || !m.offload {
		return false
	}
	m.groAsk.CompareAndSwap(0, int32(min(max(slots, 1), groSlots)))
	return true
}

// takeGRO turns GRO on if AskGRO asked for it; c.rmu is held.
func (c *mmsgConn) takeGRO(fd uintptr) {
	if k := c.groAsk.Swap(0); k > 0 {
		c.startGRO(fd, 1, int(k))
	}
}

// startGRO turns GRO on for fd, c's socket, with slots slots growing up
// to max, unless it is on or the kernel refuses it; c.rmu is held.
func (c *mmsgConn) startGRO(fd uintptr, slots, max int) {
	if c.gro != nil || groFault || unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) != nil {
		return
	}
	c.gro = newGROReader(slots, max)
	c.groOn.Store(true)
}

// GRO reports whether c's reads take coalesced datagrams.
func GRO(c Conn) bool {
	m, ok := c.(*mmsgConn)
	return ok && m.groOn.Load()
}

// readGRO is ReadBatch with GRO on; c.rmu is held.
func (c *mmsgConn) readGRO(ms []Message) (int, error) {
	g := c.gro
	if g.next >= g.n {
		g.prepare(min(len(ms), groSlots))
		err := c.rc.Read(g.b.fn)
		if err := g.finish(c, err); err != nil {
			return 0, err
		}
	}
	return g.split(ms), nil
}

// split hands out the datagrams read and not yet handed out, as many as
// ms has room for, and returns how many.
func (g *groReader) split(ms []Message) int {
	k := 0
	for k < len(ms) && g.next < g.n {
		i := g.next
		d := g.slots[i][:g.lens[i]]
		seg := g.segs[i]
		if seg <= 0 {
			seg = len(d)
		}
		end := min(g.off+seg, len(d))
		buf := ms[k].Buf[:cap(ms[k].Buf)]
		ms[k].Buf = buf[:copy(buf, d[g.off:end])]
		ms[k].Addr = g.addrs[i]
		k++
		g.off = end
		if g.off >= len(d) {
			g.next, g.off = g.next+1, 0
		}
	}
	return k
}

// prepare sets g's batch up to take up to k super-datagrams (at most
// one per slot); g.b.recv
// then reads them and finish takes them in.
func (g *groReader) prepare(k int) {
	b := g.b
	k = min(k, len(g.slots))
	b.n, b.done, b.errno = k, 0, 0
	for i := range k {
		b.setBuf(i, g.slots[i])
		h := &b.hdrs[i].Hdr
		h.Control = &g.ctrl[i*cmsgGROSpace]
		h.SetControllen(cmsgGROSpace)
	}
}

// finish takes in what g.b.recv read; err is the RawConn's. It reports
// in g.drained whether the read emptied the socket (fewer than asked).
func (g *groReader) finish(c *mmsgConn, err error) error {
	b := g.b
	b.release()
	g.n, g.next, g.off = 0, 0, 0
	if err != nil {
		return opError("read", c.c.LocalAddr(), err)
	}
	if b.errno != 0 {
		return &net.OpError{Op: "read", Net: "udp", Source: c.c.LocalAddr(), Err: os.NewSyscallError("recvmmsg", b.errno)}
	}
	for i := range b.done {
		h := &b.hdrs[i]
		g.lens[i] = int(h.Len)
		g.addrs[i] = decodeSockaddr(&b.names[i], h.Hdr.Namelen)
		g.segs[i] = groSegment(g.ctrl[i*cmsgGROSpace:][:min(int(h.Hdr.Controllen), cmsgGROSpace)])
		if g.segs[i] > 0 && g.segs[i] < g.lens[i] {
			g.coalesced++
		}
	}
	g.n = b.done
	g.drained = b.done < b.n
	if g.n == len(g.slots) && g.n < g.max && g.segs[g.n-1] > 0 && g.segs[g.n-1] < g.lens[g.n-1] {
		// Every slot took something and the last a train: trains
		// wait, more than one read takes. Another slot for the next.
		g.slots = append(g.slots, make([]byte, groMax))
	}
	return nil
}

// groSegment returns the segment size of a UDP_GRO control message in
// p, or 0 if p has none.
func groSegment(p []byte) int {
	for len(p) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&p[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(p) {
			return 0
		}
		data := p[unix.CmsgLen(0):n]
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO {
			switch {
			case len(data) >= 4:
				return int(*(*int32)(unsafe.Pointer(&data[0])))
			case len(data) >= 2:
				return int(*(*uint16)(unsafe.Pointer(&data[0])))
			}
			return 0
		}
		next := unix.CmsgSpace(n - unix.CmsgLen(0))
		if next > len(p) {
			return 0
		}
		p = p[next:]
	}
	return 0
}
