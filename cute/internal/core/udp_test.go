package core

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUDP runs the cores over real loopback sockets, IPv4 and IPv6, on the
// wall clock: handshake, a payload each way, keepalives, disconnect.
func TestUDP(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "udp6" {
				host = "::1"
			}
			sc, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(host)})
			if err != nil && network == "udp6" && os.Getenv("CI") != "true" {
				t.Skipf("no IPv6 loopback on this machine: %v", err)
			}
			require.NoError(t, err)
			defer sc.Close()
			cc, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(host)})
			require.NoError(t, err)
			defer cc.Close()
			saddr := sc.LocalAddr().(*net.UDPAddr).AddrPort()
			saddr = netip.AddrPortFrom(saddr.Addr().Unmap(), saddr.Port())

			s, _ := newServer(t, func(c *ServerConfig) { c.Addrs = []netip.AddrPort{saddr} })
			c, err := NewClient(time.Now(), makeToken(t, tokenOpts{clientID: 77, endpoints: []netip.AddrPort{saddr}, created: time.Now()}), testApp)
			require.NoError(t, err)

			send := func(conn *net.UDPConn, d datagrams) {
				for _, m := range d.Datagrams {
					_, err := conn.WriteToUDPAddrPort(m.Buf, m.Addr)
					require.NoError(t, err)
				}
			}
			read := func(conn *net.UDPConn, buf []byte) (int, netip.AddrPort, bool) {
				require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Millisecond)))
				n, from, err := conn.ReadFromUDPAddrPort(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return 0, netip.AddrPort{}, false
				}
				require.NoError(t, err)
				return n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), true
			}
			var cout ClientOutput
			var sout ServerOutput
			sbuf, cbuf := make([]byte, 1500), make([]byte, 1500)
			gotServer, gotClient, disconnected := false, false, false
			deadline := time.Now().Add(10 * time.Second)
			for !disconnected && time.Now().Before(deadline) {
				c.Update(time.Now(), &cout)
				send(cc, cout.datagrams)
				for {
					n, from, ok := read(sc, sbuf)
					if !ok {
						break
					}
					s.Receive(time.Now(), from, sbuf[:n], &sout)
					send(sc, sout.datagrams)
					for _, e := range sout.Events {
						switch e.Kind {
						case EventConnected:
							require.NoError(t, s.Send(time.Now(), e.Index, []byte("hello client"), &sout))
							send(sc, sout.datagrams)
						case EventPayload:
							gotServer = string(e.Payload) == "hello server"
						case EventDisconnected:
							disconnected = true
						}
					}
				}
				s.Update(time.Now(), &sout)
				send(sc, sout.datagrams)
				for {
					n, from, ok := read(cc, cbuf)
					if !ok {
						break
					}
					was := c.State()
					c.Receive(time.Now(), from, cbuf[:n], &cout)
					if cout.Payload != nil {
						gotClient = string(cout.Payload) == "hello client"
					}
					if was != Connected && c.State() == Connected {
						require.NoError(t, c.Send(time.Now(), []byte("hello server"), &cout))
						send(cc, cout.datagrams)
					}
				}
				if gotServer && gotClient && c.State() == Connected {
					c.Disconnect(time.Now(), &cout)
					send(cc, cout.datagrams)
				}
			}
			require.True(t, gotServer, "payload to the server")
			require.True(t, gotClient, "payload to the client")
			require.True(t, disconnected, "the server saw the disconnect")
			require.Equal(t, Disconnected, c.State())
		})
	}
}
