//go:build unix

package wsbridge

import "syscall"

// nonblockingWrites reports whether a nonblockingWriter can write.
const nonblockingWrites = true

// nonblockingWriter writes to a socket once, without waiting for room. It
// is made once per connection (its callback is a closure that would cost
// allocations per write otherwise) and used under the connection's lock.
type nonblockingWriter struct {
	raw syscall.RawConn
	fn  func(fd uintptr) bool // bound to this writer once
	p   []byte                // what write is writing
	n   int                   // how much of p the socket took
	err error                 // what broke the connection
}

func newNonblockingWriter(raw syscall.RawConn) *nonblockingWriter {
	w := &nonblockingWriter{raw: raw}
	w.fn = w.try
	return w
}

// write writes p: it returns how much the socket took (0 when it has no
// room), or the error that broke the connection.
func (w *nonblockingWriter) write(p []byte) (int, error) {
	w.p, w.n, w.err = p, 0, nil
	err := w.raw.Write(w.fn)
	n := w.n
	if err == nil {
		err = w.err
	}
	w.p, w.err = nil, nil
	return n, err
}

// try is the RawConn's callback: it never asks to wait for the socket.
func (w *nonblockingWriter) try(fd uintptr) bool {
	for w.n < len(w.p) {
		m, e := syscall.Write(int(fd), w.p[w.n:])
		if m > 0 {
			w.n += m
		}
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return true // no room now: the rest is left
		case e != nil:
			w.err = e
			return true
		case m <= 0:
			return true
		}
	}
	return true
}
