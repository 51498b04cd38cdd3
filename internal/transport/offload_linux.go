package transport

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// gsoKernel is whether the kernel has UDP GSO (UDP_SEGMENT, Linux 4.18),
// asked once, of the first socket wrapped: the option is the UDP layer's,
// the same for every UDP socket of either family.
var (
	gsoOnce   sync.Once
	gsoKernel bool
)

// gsoSupported reports whether the kernel segments UDP trains for rc's
// socket. A device without checksum offload refuses a train with EIO
// later; the socket then stops sending trains (WriteBatch).
func gsoSupported(rc syscall.RawConn) bool {
	gsoOnce.Do(func() {
		_ = rc.Control(func(fd uintptr) {
			_, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
			gsoKernel = err == nil
		})
	})
	return gsoKernel
}

// gsoFault, when not 0, is the error the kernel is made to return for
// every GSO train: tests set it to see the fallback, as a device without
// checksum offload would refuse a train (EIO).
var gsoFault syscall.Errno

// GSO reports whether c sends trains of datagrams as GSO super-datagrams.
func GSO(c Conn) bool {
	m, ok := c.(*mmsgConn)
	return ok && m.gso.Load()
}

// SendsBatches reports whether c's WriteBatch sends several datagrams, to
// any destinations, in one system call (sendmmsg): a sender then gains by
// letting a batch form rather than writing each datagram alone.
func SendsBatches(c Conn) bool {
	_, ok := c.(*mmsgConn)
	return ok
}
