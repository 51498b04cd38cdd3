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
	groSlots = 64      // super-datagrams one read takes
)

// cmsgGROSpace is the room of one UDP_GRO control message (an int).
var cmsgGROSpace = unix.CmsgSpace(4)

// groReader is an mmsgConn's reading with GRO on: it reads super-
// datagrams into slots of its own and hands them out cut into datagrams,
// keeping what a caller's batch had no room for until the next read.
// It is used under mmsgConn.rmu.
type groReader struct {
	b     *batch
	slots []byte // groSlots × groMax, reserved: pages are touched only as datagrams come
	ctrl  []byte // a UDP_GRO control message's room per header
	lens  []int
	segs  []int // the segment size of each; 0: one datagram
	addrs []netip.AddrPort

	n, next, off int  // read, handed out whole, and bytes of next handed out
	drained      bool // the last read took fewer than it asked: the socket was empty
	coalesced    int  // super-datagrams of more than one datagram read so far (tests)
}

// EnableGRO asks the kernel to hand c's socket coalesced datagrams (UDP
// GRO), if c is a socket on PathBest of a kernel that has it, and reports
// whether it did. Call it before the first read. It costs the socket
// 4 MiB of address space for its reads (resident only as datagrams
// come); a server's socket, which reads many, is worth it, not a
// client's.
func EnableGRO(c Conn) bool {
	m, ok := c.(*mmsgConn)
	if !ok || !m.offload {
		return false
	}
	var serr error
	if err := m.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err != nil || serr != nil {
		return false
	}
	b := newBatch(groSlots)
	b.fn = b.recv
	m.rmu.Lock()
	m.gro = &groReader{
		b:     b,
		slots: make([]byte, groSlots*groMax),
		ctrl:  make([]byte, groSlots*cmsgGROSpace),
		lens:  make([]int, groSlots),
		segs:  make([]int, groSlots),
		addrs: make([]netip.AddrPort, groSlots),
	}
	m.rmu.Unlock()
	return true
}

// GRO reports whether c's reads take coalesced datagrams.
func GRO(c Conn) bool {
	m, ok := c.(*mmsgConn)
	if !ok {
		return false
	}
	m.rmu.Lock()
	defer m.rmu.Unlock()
	return m.gro != nil
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
		d := g.slots[i*groMax : i*groMax+g.lens[i]]
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

// prepare sets g's batch up to take up to k super-datagrams; g.b.recv
// then reads them and finish takes them in.
func (g *groReader) prepare(k int) {
	b := g.b
	b.n, b.done, b.errno = k, 0, 0
	for i := range k {
		b.setBuf(i, g.slots[i*groMax:(i+1)*groMax])
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
