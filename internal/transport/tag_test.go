package transport

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrafficClass: an IP socket takes the class and reads it back; a
// PacketConn that hides its socket is refused with ErrTagUnsupported, not
// a panic.
func TestTrafficClass(t *testing.T) {
	forFamilies(t, func(t *testing.T, network, addr string) {
		pc, err := net.ListenPacket(network, addr)
		require.NoError(t, err)
		defer pc.Close()
		uc := pc.(*net.UDPConn)
		for _, pc := range []net.PacketConn{uc, apOnly{uc}} {
			require.NoError(t, SetTrafficClass(pc, ExpeditedForwarding), "%T", pc)
			got, err := TrafficClass(pc)
			require.NoError(t, err, "%T", pc)
			assert.Equal(t, ExpeditedForwarding, got, "%T", pc)
		}
		h := hidden{uc}
		assert.ErrorIs(t, SetTrafficClass(h, ExpeditedForwarding), ErrTagUnsupported)
		_, err = TrafficClass(h)
		assert.ErrorIs(t, err, ErrTagUnsupported)
	})
}

// forFamilies runs test on IPv4 and on IPv6 loopback, each a subtest;
// the IPv6 one skips on a machine that has none.
func forFamilies(t *testing.T, test func(t *testing.T, network, addr string)) {
	for _, tt := range []struct{ name, network, addr string }{
		{"ipv4", "udp4", "127.0.0.1:0"},
		{"ipv6", "udp6", "[::1]:0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.network == "udp6" {
				probe, err := net.ListenPacket("udp6", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback on this machine: %v", err)
				}
				probe.Close()
			}
			test(t, tt.network, tt.addr)
		})
	}
}
