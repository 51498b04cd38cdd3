//go:build !unix

package netcode_test

import "syscall"

// reuseAddr is nil where SO_REUSEADDR does not mean what reservePort
// needs (on Windows it lets any socket take the port): reservePort then
// only finds a free port, which another socket may take before the test
// binds it again.
var reuseAddr func(network, address string, c syscall.RawConn) error
