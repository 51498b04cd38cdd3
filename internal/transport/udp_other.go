//go:build !linux

package transport

import (
	"net"
	"net/netip"
)

// newUDP has no batched path off Linux: New falls back to the allocation-free
// netip.AddrPort methods of *net.UDPConn.
func newUDP(*net.UDPConn) Conn { return nil }

// SetBuffers asks for size-byte socket buffers (best effort).
func SetBuffers(uc *net.UDPConn, size int) {
	_ = uc.SetReadBuffer(size)
	_ = uc.SetWriteBuffer(size)
}

// GSO reports whether c sends trains of datagrams as GSO super-datagrams:
// never off Linux.
func GSO(Conn) bool { return false }

// SendsBatches reports whether c's WriteBatch sends several datagrams in
// one system call: never off Linux.
func SendsBatches(Conn) bool { return false }

// EnableGRO asks for coalesced datagrams: there is no UDP GRO off Linux.
func EnableGRO(Conn) bool { return false }

// AskGRO asks for coalesced datagrams: there is no UDP GRO off Linux.
func AskGRO(Conn, int) bool { return false }

// GRO reports whether c's reads take coalesced datagrams: never off Linux.
func GRO(Conn) bool { return false }

// Connect fixes the socket's peer on Linux's recvmmsg/sendmmsg path
// only: elsewhere it does nothing and reports false.
func Connect(Conn, netip.AddrPort) bool { return false }
