package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// ServerAddrs returns the addresses a server is known by, for the check of
// connection requests against the token's internal address list: the public
// address, if one is configured, and the bound address (every interface
// address at the bound port, for a wildcard bind). A server behind NAT is
// named by its bound address in the tokens' internal lists and by the public
// one in their client-facing lists; a server reached directly is named by
// the same address in both. Both dialects' Listeners use it. Its errors
// name the setting; the caller prefixes its package.
func ServerAddrs(public string, bound net.Addr) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	if public != "" {
		ua, err := net.ResolveUDPAddr("udp", public)
		if err != nil {
			return nil, fmt.Errorf("PublicAddr: %w", err)
		}
		ap := ua.AddrPort()
		out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	local, err := boundAddrs(bound)
	if err != nil {
		if len(out) > 0 {
			return out, nil // the public address is enough
		}
		return nil, fmt.Errorf("%w; set PublicAddr", err)
	}
	for _, a := range local {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// boundAddrs returns the addresses a socket bound to bound is reached at.
func boundAddrs(bound net.Addr) ([]netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(bound.String())
	if err != nil {
		return nil, fmt.Errorf("cannot tell the server's address from %q", bound)
	}
	ip := ap.Addr().Unmap()
	if !ip.IsUnspecified() {
		return []netip.AddrPort{netip.AddrPortFrom(ip.WithZone(""), ap.Port())}, nil
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	var out []netip.AddrPort
	for _, a := range ifaddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ia := pfx.Addr().Unmap()
		if ip.Is4() && !ia.Is4() {
			continue // an IPv4 socket cannot be reached at an IPv6 address
		}
		out = append(out, netip.AddrPortFrom(ia.WithZone(""), ap.Port()))
	}
	if len(out) == 0 {
		return nil, errors.New("no interface address to check tokens against")
	}
	return out, nil
}
