package netcode

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOpErrorLocalAddr: a dial error names the local port, and the local IP
// only when the socket is bound to one (not 0.0.0.0:PORT, which names no
// address a reader could look for).
func TestOpErrorLocalAddr(t *testing.T) {
	remote := &net.UDPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40000}
	tests := []struct {
		local net.Addr
		want  string
	}{
		{&net.UDPAddr{IP: net.IPv4zero, Port: 51234}, "dial netcode :51234->203.0.113.7:40000: netcode: connection denied"},
		{&net.UDPAddr{IP: net.IPv6unspecified, Port: 51234}, "dial netcode :51234->203.0.113.7:40000: netcode: connection denied"},
		{&net.UDPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 51234}, "dial netcode 10.0.0.2:51234->203.0.113.7:40000: netcode: connection denied"},
		{nil, "dial netcode 203.0.113.7:40000: netcode: connection denied"},
	}
	for _, tt := range tests {
		err := opError("dial", tt.local, remote, ErrConnectionDenied)
		assert.Equal(t, tt.want, err.Error())
		assert.ErrorIs(t, err, ErrConnectionDenied)
	}
}
