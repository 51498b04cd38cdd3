//go:build !linux

package transport

import (
	"errors"
	"net"
)

// ReusePortSupported reports whether ListenUDPShards can open more than one
// socket.
const ReusePortSupported = false

func listenReusePort(network, address string, control Control) (*net.UDPConn, error) {
	return nil, errors.New("netcode/transport: SO_REUSEPORT read shards need Linux")
}
