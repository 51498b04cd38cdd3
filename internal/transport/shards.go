package transport

import (
	"fmt"
	"net"
)

// ListenUDPShards opens n UDP sockets bound to one address (network is
// "udp", "udp4" or "udp6"); with n > 1 they share the port with
// SO_REUSEPORT (Linux only), and the kernel spreads incoming datagrams
// over them by the sender's address, so one sender's datagrams always
// reach the same socket, in order. Each socket gets large buffers (best
// effort). n <= 1 opens one plain socket, as ListenUDP does.
func ListenUDPShards(network, address string, n, buffer int, control Control) ([]*net.UDPConn, error) {
	if n <= 1 {
		uc, err := ListenUDP(network, address, buffer, control)
		if err != nil {
			return nil, err
		}
		return []*net.UDPConn{uc}, nil
	}
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	first, err := listenReusePort(network, address, control)
	if err != nil {
		return nil, err
	}
	out := []*net.UDPConn{first}
	// Later sockets bind the port the first one got (address may say :0).
	bound := first.LocalAddr().String()
	for len(out) < n {
		uc, err := listenReusePort(network, bound, control)
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("netcode/transport: read shard %d of %d: %w", len(out)+1, n, err)
		}
		out = append(out, uc)
	}
	if buffer <= 0 {
		buffer = DefaultSocketBuffer
	}
	for _, uc := range out {
		SetBuffers(uc, buffer)
	}
	return out, nil
}
