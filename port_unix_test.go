//go:build unix

package netcode_test

import "syscall"

// reuseAddr sets SO_REUSEADDR on a socket before it is bound (a
// SocketConfig.Control or net.ListenConfig.Control hook): see reservePort.
var reuseAddr = func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
