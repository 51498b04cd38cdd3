//go:build !unix

package wsbridge

import "syscall"

// nonblockingWrites reports whether a nonblockingWriter can write: not
// here, so that every write goes through the session's writer.
const nonblockingWrites = false

type nonblockingWriter struct{}

func newNonblockingWriter(syscall.RawConn) *nonblockingWriter { return nil }

func (*nonblockingWriter) write([]byte) (int, error) { return 0, syscall.EINVAL }
