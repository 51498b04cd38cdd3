package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// ExpeditedForwarding is the IPv4 TOS / IPv6 traffic class byte that packet
// tagging sets, as the C reference does: DSCP 46 (expedited forwarding,
// RFC 3246) in the upper six bits, no ECN.
const ExpeditedForwarding = 46 << 2

// ErrTagUnsupported: the socket is not one whose traffic class can be set
// (not an IP socket).
var ErrTagUnsupported = errors.New("netcode/transport: packet tagging needs an IP socket")

// SetTrafficClass marks the packets pc sends with the IPv4 TOS or IPv6
// traffic class byte tos: IP_TOS on an IPv4 socket; IPV6_TCLASS on an IPv6
// one, and IP_TOS as well where it is dual-stack (the IPv4 packets it
// sends). It returns the operating system's refusal, if any; tagging is
// a hint to the network, so callers report it and carry on.
func SetTrafficClass(pc net.PacketConn, tos int) error {
	ap, err := ipSocket(pc)
	if err != nil {
		return err
	}
	if ap.Addr().Is4() {
		if err := ipv4.NewPacketConn(pc).SetTOS(tos); err != nil {
			return fmt.Errorf("netcode/transport: setting IP_TOS: %w", err)
		}
		return nil
	}
	if err := ipv6.NewPacketConn(pc).SetTrafficClass(tos); err != nil {
		return fmt.Errorf("netcode/transport: setting IPV6_TCLASS: %w", err)
	}
	if ap.Addr().IsUnspecified() {
		// A dual-stack socket: its IPv4 packets take IP_TOS. An IPv6-only
		// socket refuses it, which changes nothing.
		_ = ipv4.NewPacketConn(pc).SetTOS(tos)
	}
	return nil
}

// TrafficClass reads back the traffic class byte of pc's packets: IP_TOS on
// an IPv4 socket, IPV6_TCLASS on an IPv6 one.
func TrafficClass(pc net.PacketConn) (int, error) {
	ap, err := ipSocket(pc)
	if err != nil {
		return 0, err
	}
	if ap.Addr().Is4() {
		return ipv4.NewPacketConn(pc).TOS()
	}
	return ipv6.NewPacketConn(pc).TrafficClass()
}

// ipSocket returns pc's local address if pc is a socket whose IP options
// x/net's ipv4 and ipv6 packages can reach: a net.Conn (they assert it,
// panicking otherwise) with a file descriptor (syscall.Conn) and an IP
// address. A wrapper that hides its socket, a tunnel or an in-memory
// transport is not.
func ipSocket(pc net.PacketConn) (netip.AddrPort, error) {
	_, isConn := pc.(net.Conn)
	_, hasFD := pc.(syscall.Conn)
	if !isConn || !hasFD {
		return netip.AddrPort{}, fmt.Errorf("%w: %T", ErrTagUnsupported, pc)
	}
	ap, err := netip.ParseAddrPort(pc.LocalAddr().String())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: local address %q", ErrTagUnsupported, pc.LocalAddr())
	}
	return ap, nil
}
