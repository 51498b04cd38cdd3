//go:build linux

package transport

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minBatch is the smallest number of headers a scratch batch is built with.
const minBatch = 64

// mmsgConn is a *net.UDPConn driven with recvmmsg and sendmmsg through its
// syscall.RawConn. The header, iovec and sockaddr arrays are kept and
// reused, so a call allocates nothing in steady state.
//
// With gso set, a batch write sends each train of consecutive datagrams to
// one destination, all of one size but the last (which may be shorter), as
// one super-datagram that the kernel cuts into those datagrams (UDP GSO,
// the UDP_SEGMENT control message): one header of sendmmsg, one trip
// through the stack, for the whole train. The receiver sees the same
// datagrams as without it.
//
// Locks: rmu and wmu are leaves, taken by the goroutine reading or writing
// with no lock of this package held, and never together. rmu is held
// across the recvmmsg call (one reader at a time owns r); wmu only to take
// or return write scratch, never across a system call, so that writers
// run in parallel.
type mmsgConn struct {
	c      *net.UDPConn
	rc     syscall.RawConn
	family int // unix.AF_INET or unix.AF_INET6

	rmu sync.Mutex // one reader at a time owns r and gro; held across recvmmsg
	r   *batch
	gro *groReader // set by EnableGRO or AskGRO: reads take coalesced datagrams

	groAsk atomic.Int32 // AskGRO's slots, for the next read to take up
	groOn  atomic.Bool  // gro is set (for GRO, without rmu)

	wmu    sync.Mutex // guards wfree and wfree1; a leaf
	wfree  []*batch   // idle batch-write scratch: writers run in parallel
	wfree1 []*batch   // idle one-datagram scratch for WriteTo

	// gso: batch writes send trains as GSO super-datagrams. Set when the
	// socket is made if the kernel has UDP_SEGMENT (and the path is
	// PathBest); cleared for good by the first train the kernel refuses
	// with EIO (a device without checksum offload).
	gso atomic.Bool
	// offload: the socket was made on PathBest of a kernel with UDP GSO;
	// EnableGRO and AskGRO may turn GRO on (Linux 5.0; its setsockopt
	// says).
	offload bool

	// peer: the address the socket is connected to (Connect), set once;
	// datagrams to it are sent without a destination.
	peer atomic.Pointer[netip.AddrPort]
}

// maxFree bounds the idle write scratch kept. The lists only ever hold as
// many entries as there were writers at once, so the bound is for the
// pathological case; it is high enough that thousands of connections
// writing from their own goroutines never fall back to allocating.
const (
	maxFree  = 256  // batches of minBatch headers (~7 KiB each)
	maxFree1 = 8192 // one-header scratch (~100 bytes each)
)

// newUDP returns the recvmmsg/sendmmsg Conn, or nil if the socket does
// not allow it.
func newUDP(uc *net.UDPConn) Conn {
	if Path(forcedPath.Load()) == PathPlain {
		return nil
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	family := -1
	cerr := rc.Control(func(fd uintptr) {
		if d, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil {
			family = d
		}
	})
	if cerr != nil || (family != unix.AF_INET && family != unix.AF_INET6) {
		return nil
	}
	c := &mmsgConn{c: uc, rc: rc, family: family}
	if Path(forcedPath.Load()) == PathBest && gsoSupported(rc) {
		c.offload = true
		c.gso.Store(true)
	}
	// The scratch grows to the batches the owner asks for, and write
	// scratch is made on the first batched write: a client's socket, which
	// reads a few datagrams at a time and rarely writes a batch, then
	// carries a few hundred bytes of it instead of 14 KiB.
	c.r = newBatch(0)
	c.r.fn = c.r.recv
	return c
}

// mmsghdr is struct mmsghdr of recvmmsg(2) and sendmmsg(2). x/sys/unix
// has it (as Mmsghdr) only from v0.49.0, newer than the x/sys this module
// requires; it is declared here until the module moves to that x/sys. Go
// lays it out as C does: the trailing padding to the alignment of Hdr is
// implicit on both.
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}

// batch is the scratch for one recvmmsg or sendmmsg call.
//
// For reading, header i receives into iovs[i]. For writing, message k of
// the caller's is iovs[k], and header i, with names[i], carries segs[i]
// messages from iovs[k] on: one, or a GSO train, whose segment size is in
// its control message at ctrl[i*cmsgSegSpace:].
type batch struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family
	segs  []int                   // writing: the messages of each header
	ctrl  []byte                  // writing: each header's UDP_SEGMENT control message

	fn     func(fd uintptr) bool // b.recv or b.send, made once
	n      int                   // headers in use
	done   int                   // headers completed
	errno  syscall.Errno
	waited bool // reading: recv found the socket empty
}

func newBatch(n int) *batch {
	b := &batch{}
	b.grow(n)
	return b
}

// grow makes room for n headers.
func (b *batch) grow(n int) {
	if n <= len(b.hdrs) {
		return
	}
	b.hdrs = make([]mmsghdr, n)
	b.iovs = make([]unix.Iovec, n)
	b.names = make([]unix.RawSockaddrInet6, n)
	b.segs = make([]int, n)
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
}

// setBuf points header i's iovec at p[:cap(p)] (reading) or p (writing).
func (b *batch) setBuf(i int, p []byte) {
	if cap(p) == 0 {
		b.iovs[i].Base = nil
		b.iovs[i].SetLen(0)
		return
	}
	b.iovs[i].Base = &p[:1][0]
	b.iovs[i].SetLen(len(p))
}

// release drops the references to the caller's buffers after a read.
func (b *batch) release() {
	for i := 0; i < b.n; i++ {
		b.iovs[i].Base = nil
	}
}

// releaseWrite drops the references to the caller's buffers after a
// write, whose headers carry segs[i] iovecs each.
func (b *batch) releaseWrite() {
	k := 0
	for i := 0; i < b.n; i++ {
		k += b.segs[i]
	}
	for j := range k {
		b.iovs[j].Base = nil
	}
}

func (b *batch) recv(fd uintptr) bool {
	for i := 0; i < b.n; i++ {
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		b.hdrs[i].Hdr.Flags = 0
		b.hdrs[i].Len = 0
	}
	for {
		// The socket does not block (the runtime's poller waits for it),
		// so the call is made raw: without the scheduler's bookkeeping of
		// a call that may block, which costs about a sixth of a read that
		// finds the socket empty.
		var r uintptr
		var e syscall.Errno
		if b.n == 1 && b.hdrs[0].Hdr.Controllen == 0 {
			r, e = b.recvOne(fd)
		} else {
			r, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(b.n), 0, 0, 0)
		}
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			b.waited = true
			return false // wait until readable
		}
		b.done, b.errno = int(r), e
		return true
	}
}

// recvOne reads one datagram, with no control message, into header 0 as
// recvmmsg would (its length, its sender) and returns what recvmmsg
// would: recvfrom(2) takes no message header to copy in and out, and
// costs the kernel less.
func (b *batch) recvOne(fd uintptr) (uintptr, syscall.Errno) {
	h := &b.hdrs[0]
	namelen := uint32(unix.SizeofSockaddrInet6)
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(b.iovs[0].Base)), uintptr(b.iovs[0].Len),
		0, uintptr(unsafe.Pointer(h.Hdr.Name)), uintptr(unsafe.Pointer(&namelen)))
	if e != 0 {
		return 0, e
	}
	h.Len = uint32(r)
	h.Hdr.Namelen = namelen
	return 1, 0
}

// rawTrain is the longest train (datagrams in one sendmsg) sent as a raw
// system call, as recv's reads and a lone sendto are: the socket does not
// block, so the call needs none of the scheduler's bookkeeping for one
// that may. That bookkeeping is what wakes the runtime's sysmon thread
// from its deep sleep (entersyscall, when every P was idle): a server at
// one client goes idle between bursts, and its burst's one train, sent
// with Syscall, woke sysmon once per burst, which then slept in 20 µs
// steps until the process was idle again (docs/performance.md, "The
// server at one client without waking sysmon": nanosleep 0.08 -> 0.003,
// futex 0.10 -> 0.04, context switches 0.31 -> 0.17 per echo). A held
// Conn's trains are at most 16 (engine.HeldTrain); longer ones, the send
// queue's trains of up to 64 KiB, which the kernel may take tens of
// microseconds to deliver on loopback, keep Syscall, so that a thread the
// kernel preempts in one does not keep its P from the scheduler.
const rawTrain = 16

func (b *batch) send(fd uintptr) bool {
	if gsoFault != 0 && b.done < b.n && b.segs[b.done] > 1 {
		b.errno = gsoFault // a test's stand-in for the kernel's refusal
		return true
	}
	if b.n == 1 && b.done == 0 {
		// One header: sendto (one datagram) or sendmsg (one train) costs
		// the kernel less than sendmmsg.
		h := &b.hdrs[0].Hdr
		for {
			var e syscall.Errno
			if h.Controllen == 0 {
				name := uintptr(unsafe.Pointer(h.Name))
				if h.Namelen == 0 {
					name = 0 // a connected socket's peer (sendto takes a non-NULL name of length 0 as invalid)
				}
				// Raw, as recv's: one datagram on a socket that does
				// not block.
				_, _, e = unix.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(b.iovs[0].Base)), uintptr(b.iovs[0].Len),
					0, name, uintptr(h.Namelen))
			} else if b.segs[0] <= rawTrain {
				_, _, e = unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(h)), 0)
			} else {
				_, _, e = unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(h)), 0)
			}
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			case 0:
				b.done = 1
			default:
				b.errno = e
			}
			return true
		}
	}
	for b.done < b.n {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[b.done])), uintptr(b.n-b.done), 0, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN || (e == 0 && r == 0):
			return false // wait until writable
		case e != 0:
			b.errno = e
			return true
		}
		b.done += int(r)
	}
	return true
}

// getBatch takes an idle write scratch or makes one. Unlike a sync.Pool,
// the free list survives garbage collections, so steady state never
// allocates.
func (c *mmsgConn) getBatch() *batch {
	c.wmu.Lock()
	if n := len(c.wfree); n > 0 {
		b := c.wfree[n-1]
		c.wfree = c.wfree[:n-1]
		c.wmu.Unlock()
		return b
	}
	c.wmu.Unlock()
	return newWriteBatch()
}

func newWriteBatch() *batch {
	b := newBatch(minBatch)
	b.ctrl = make([]byte, minBatch*cmsgSegSpace)
	b.fn = b.send
	return b
}

func (c *mmsgConn) putBatch(b *batch) {
	c.wmu.Lock()
	if len(c.wfree) < maxFree {
		c.wfree = append(c.wfree, b)
	}
	c.wmu.Unlock()
}

// getOne takes an idle one-datagram scratch or makes one.
func (c *mmsgConn) getOne() *batch {
	c.wmu.Lock()
	if n := len(c.wfree1); n > 0 {
		b := c.wfree1[n-1]
		c.wfree1 = c.wfree1[:n-1]
		c.wmu.Unlock()
		return b
	}
	c.wmu.Unlock()
	b := newBatch(1)
	b.fn = b.send
	return b
}

func (c *mmsgConn) putOne(b *batch) {
	c.wmu.Lock()
	if len(c.wfree1) < maxFree1 {
		c.wfree1 = append(c.wfree1, b)
	}
	c.wmu.Unlock()
}

func (c *mmsgConn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.groAsk.Load() != 0 {
		_ = c.rc.Control(c.takeGRO)
	}
	if c.gro != nil {
		c.gro.b.waited = false
		return c.readGRO(ms)
	}
	c.r.waited = false
	c.prepareRead(ms)
	err := c.rc.Read(c.r.fn)
	return c.finishRead(ms, err)
}

// ReadWaited reports whether the last ReadBatch found the socket empty
// and waited for a datagram: datagrams come one at a time. Only the
// goroutine that made that ReadBatch may ask, before its next one.
func (c *mmsgConn) ReadWaited() bool {
	if c.gro != nil {
		return c.gro.b.waited
	}
	return c.r.waited
}

// prepareRead sets c.r up to read into ms; c.r.recv then reads and
// finishRead takes the datagrams in. c.rmu is held.
func (c *mmsgConn) prepareRead(ms []Message) {
	b := c.r
	if len(ms) > len(b.hdrs) {
		b.grow(len(ms))
	}
	b.n, b.done, b.errno = len(ms), 0, 0
	for i := range ms {
		b.setBuf(i, ms[i].Buf[:cap(ms[i].Buf)])
	}
}

// finishRead returns how many datagrams c.r.recv read into ms; err is
// the RawConn's. c.rmu is held.
func (c *mmsgConn) finishRead(ms []Message, err error) (int, error) {
	b := c.r
	b.release()
	if err != nil {
		return 0, opError("read", c.c.LocalAddr(), err)
	}
	if b.errno != 0 {
		return 0, &net.OpError{Op: "read", Net: "udp", Source: c.c.LocalAddr(), Err: os.NewSyscallError("recvmmsg", b.errno)}
	}
	for i := 0; i < b.done; i++ {
		// A datagram longer than the buffer arrives truncated to
		// cap(Buf) (MSG_TRUNC); the caller's size check discards it.
		ms[i].Buf = ms[i].Buf[:b.hdrs[i].Len]
		ms[i].Addr = decodeSockaddr(&b.names[i], b.hdrs[i].Hdr.Namelen)
	}
	return b.done, nil
}

func (c *mmsgConn) WriteBatch(ms []Message) (int, error) {
	sent := 0
	for sent < len(ms) {
		n, train, err := c.writeSome(ms[sent:], c.gso.Load())
		sent += n
		if err == nil {
			continue
		}
		if train == 0 {
			return sent, err
		}
		// The kernel refused a train. EIO says the device cannot
		// segment it (no checksum offload): this socket sends no more
		// trains. Whatever the cause, the train's datagrams go again
		// one by one, so that an error concerns one datagram.
		if errors.Is(err, unix.EIO) {
			c.gso.Store(false)
		}
		n, _, err = c.writeSome(ms[sent:sent+train], false)
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// writeSome sends up to one scratch batch of ms, with GSO trains if gso.
// It returns how many of ms it sent and, if the kernel refused a train
// (err not nil), how many datagrams that train carries, which follow
// them.
func (c *mmsgConn) writeSome(ms []Message, gso bool) (n, train int, err error) {
	b := c.getBatch()
	defer c.putBatch(b)
	if len(ms) > len(b.iovs) {
		ms = ms[:len(b.iovs)]
	}
	placed := c.plan(b, ms, gso)
	done, err := c.flush(b)
	for i := range done {
		n += b.segs[i]
	}
	if err != nil {
		if done < b.n && b.segs[done] > 1 {
			train = b.segs[done]
		}
		return n, train, err
	}
	if placed < len(ms) {
		err = &net.OpError{Op: "write", Net: "udp", Source: c.c.LocalAddr(), Addr: net.UDPAddrFromAddrPort(ms[n].Addr), Err: errInvalidAddr}
	}
	return n, 0, err
}

// cmsgSegSpace is the room of one UDP_SEGMENT control message.
var cmsgSegSpace = unix.CmsgSpace(2)

// plan lays ms out in b's headers, stopping before a destination the
// socket cannot reach, and returns how many messages it placed. With
// gso, each run of consecutive datagrams to one destination, all of the
// first one's size but the last (which may be shorter), takes one header
// with a UDP_SEGMENT control message, up to the kernel's limits; else
// each datagram takes one header.
func (c *mmsgConn) plan(b *batch, ms []Message, gso bool) (placed int) {
	b.n, b.done, b.errno = 0, 0, 0
	k := 0
	for k < len(ms) {
		i := b.n
		h := &b.hdrs[i].Hdr
		if !c.encodeSockaddr(&b.names[i], h, ms[k].Addr) {
			break
		}
		e := k + 1
		size := len(ms[k].Buf)
		if gso && size > 0 {
			bytes := size
			for e < len(ms) && e-k < MaxTrainSegments && ms[e].Addr == ms[k].Addr {
				m := len(ms[e].Buf)
				if m == 0 || m > size || bytes+m > MaxTrainBytes {
					break
				}
				bytes += m
				e++
				if m < size {
					break // the shorter one ends the train
				}
			}
		}
		for j := k; j < e; j++ {
			b.setBuf(j, ms[j].Buf)
		}
		h.Iov = &b.iovs[k]
		h.SetIovlen(e - k)
		if e-k > 1 {
			ctl := b.ctrl[i*cmsgSegSpace : (i+1)*cmsgSegSpace]
			putSegment(ctl, size)
			h.Control = &ctl[0]
			h.SetControllen(len(ctl))
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
		b.segs[i] = e - k
		b.n++
		k = e
	}
	return k
}

// putSegment writes a UDP_SEGMENT control message of segment size size
// into p (cmsgSegSpace bytes).
func putSegment(p []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&p[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&p[unix.CmsgLen(0)])) = uint16(size)
}

// flush sends b's n headers and returns how many the kernel took.
func (c *mmsgConn) flush(b *batch) (int, error) {
	if b.n == 0 {
		return 0, nil
	}
	err := c.rc.Write(b.fn)
	b.releaseWrite()
	if err != nil {
		return b.done, opError("write", c.c.LocalAddr(), err)
	}
	if b.errno != 0 {
		return b.done, &net.OpError{Op: "write", Net: "udp", Source: c.c.LocalAddr(), Err: os.NewSyscallError("sendmmsg", b.errno)}
	}
	return b.done, nil
}

func (c *mmsgConn) WriteTo(p []byte, addr netip.AddrPort) error {
	b := c.getOne()
	defer c.putOne(b)
	b.n, b.done, b.errno = 0, 0, 0
	if !c.encodeSockaddr(&b.names[0], &b.hdrs[0].Hdr, addr) {
		return &net.OpError{Op: "write", Net: "udp", Source: c.c.LocalAddr(), Addr: net.UDPAddrFromAddrPort(addr), Err: errInvalidAddr}
	}
	b.setBuf(0, p)
	b.segs[0] = 1
	b.n = 1
	_, err := c.flush(b)
	return err
}

func (c *mmsgConn) LocalAddr() net.Addr               { return c.c.LocalAddr() }
func (c *mmsgConn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }
func (c *mmsgConn) Close() error                      { return c.c.Close() }

// opError renames the RawConn's "raw-read"/"raw-write" errors; the cause
// (net.ErrClosed, os.ErrDeadlineExceeded) stays reachable with errors.Is.
func opError(op string, local net.Addr, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: "udp", Source: local, Err: err}
}

// SetBuffers asks for size-byte socket buffers, above the system limit if
// the process may (SO_RCVBUFFORCE), else as large as allowed.
func SetBuffers(uc *net.UDPConn, size int) {
	rc, err := uc.SyscallConn()
	if err == nil {
		var rok, wok bool
		_ = rc.Control(func(fd uintptr) {
			rok = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size) == nil
			wok = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size) == nil
		})
		if rok && wok {
			return
		}
		if !rok {
			_ = uc.SetReadBuffer(size)
		}
		if !wok {
			_ = uc.SetWriteBuffer(size)
		}
		return
	}
	_ = uc.SetReadBuffer(size)
	_ = uc.SetWriteBuffer(size)
}
