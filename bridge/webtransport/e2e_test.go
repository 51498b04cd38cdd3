package webtransport_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"net/netip"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
)

func TestSmokeTransport(t *testing.T) {
	ms := bridgetest.NewMuxServer(t, 8, transport.MuxConfig{})
	srv, err := webtransport.NewServer(&webtransport.Config{Mux: ms.Mux})
	require.NoError(t, err)
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	go srv.Serve(udp)
	defer srv.Close()
	for srv.Addr() == nil {
		time.Sleep(time.Millisecond)
	}
	hashes, err := srv.CertificateHashes()
	require.NoError(t, err)
	url := "https://" + srv.Addr().String() + "/transport"
	d := netcode.Dialer{ListenPacket: webtransport.ListenPacket(url, &webtransport.Options{CertificateHashes: hashes})}
	c, err := d.DialContext(bridgetest.Ctx(t, 10*time.Second), ms.Token(t))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, bridgetest.Echo(t, c, 1, 50, false))
	t.Log(ms.Mux.Sessions())
}

func TestSmokeRelay(t *testing.T) {
	ms := bridgetest.NewMuxServer(t, 8, transport.MuxConfig{})
	h := bridge.NewHandler(&bridge.Config{AllowedServers: []netip.AddrPort{ms.Addr}})
	defer h.Close()
	srv, err := webtransport.NewServer(&webtransport.Config{Relay: h})
	require.NoError(t, err)
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	go srv.Serve(udp)
	defer srv.Close()
	for srv.Addr() == nil {
		time.Sleep(time.Millisecond)
	}
	hashes, err := srv.CertificateHashes()
	require.NoError(t, err)
	url := "https://" + srv.Addr().String() + "/relay"
	c, err := webtransport.DialRelay(bridgetest.Ctx(t, 10*time.Second), url, ms.Token(t), &webtransport.Options{CertificateHashes: hashes})
	require.NoError(t, err)
	t.Log(c.ClientIndex(), c.MaxClients(), c.MaxDatagram(), h.Sessions())
	buf := make([]byte, 1500)
	for i := range 50 {
		p := bridgetest.Payload(1, i)
		if len(p) > c.MaxDatagram() {
			continue
		}
		_, err := c.Write(p)
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, p, buf[:n])
	}
	require.NoError(t, c.Close())
}
