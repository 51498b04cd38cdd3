package transport

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReusePortSupported reports whether ListenUDPShards can open more than one
// socket.
const ReusePortSupported = true

// listenReusePort opens a UDP socket with SO_REUSEPORT set before bind.
func listenReusePort(network, address string, control Control) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		if control != nil {
			if err := control(network, address, c); err != nil {
				return err
			}
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
