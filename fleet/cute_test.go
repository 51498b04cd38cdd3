package fleet_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/fleet"
)

// startCuteServer listens with Cute on udp4 loopback with sk, echoes
// messages, and registers under id with the application id as the
// registry's protocol id.
func startCuteServer(t *testing.T, cfg fleet.ServerConfig, sk cute.SecretKey) (*cute.Listener, *fleet.Server) {
	t.Helper()
	l, err := cute.Listen("udp4", "127.0.0.1:0", &cute.ServerConfig{ApplicationID: protocolID, PublicKey: sk.Public(), SecretKey: sk})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, reliable, err := c.ReadMessage(buf)
					if err != nil {
						return
					}
					if _, err := c.Send(buf[:n], reliable); err != nil {
						return
					}
				}
			})
		}
	})
	cfg.ProtocolID, cfg.Heartbeat, cfg.TTL, cfg.Region = protocolID, testHeartbeat, testTTL, "test"
	reg, err := fleet.Register(context.Background(), fleet.CuteSource(l), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		reg.Close()
		l.Close()
		wg.Wait()
	})
	return l, reg
}

// TestCuteFleet: Cute servers register, are chosen by a backend minting
// Cute tokens, report their players, and drain through Server.Drain as
// netcode's do (real Redis, real UDP): once Drain returns, no token names
// the drained server, a dial to it alone is denied, and a stale token
// naming it first lands on the other one.
func TestCuteFleet(t *testing.T) {
	_, rdb := startRedis(t)
	_, sk := cute.GenerateKeyPair()
	a, _ := startCuteServer(t, fleet.ServerConfig{Client: rdb, ID: "a"}, sk)
	b, regB := startCuteServer(t, fleet.ServerConfig{Client: rdb, ID: "b"}, sk)
	aAddr := netip.MustParseAddrPort(a.Addr().String())
	bAddr := netip.MustParseAddrPort(b.Addr().String())
	be := startBackend(t, rdb, func(_ *fleet.ChooserConfig, c *backend.Config) {
		c.Cute = &backend.CuteTokens{ApplicationID: protocolID, SecretKey: sk}
	})
	waitFor(t, 10*time.Second, "the backend sees both", func() bool { return len(be.ch.Servers("test")) == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := fetchToken(ctx, be.srv.URL, 1)
	require.NoError(t, err)
	ct, err := cute.ParseToken(tok)
	require.NoError(t, err)
	assert.ElementsMatch(t, []netip.AddrPort{aAddr, bAddr}, ct.ServerAddrs)
	c, err := cute.DialContext(ctx, tok)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf[:n]))
	waitFor(t, 10*time.Second, "the registry counts the player", func() bool {
		connected := 0
		for _, info := range listed(rdb) {
			connected += info.Connected
		}
		return connected == 1
	})

	require.NoError(t, regB.Drain(ctx))
	assert.True(t, b.Stats().Draining, "Server.Drain drains the Cute Listener")
	assert.True(t, listed(rdb)["b"].Draining)
	fresh := startBackend(t, rdb, func(_ *fleet.ChooserConfig, c *backend.Config) {
		c.Cute = &backend.CuteTokens{ApplicationID: protocolID, SecretKey: sk}
	})
	for user := uint64(2); user <= 21; user++ {
		tok, err := fetchToken(ctx, fresh.srv.URL, user)
		require.NoError(t, err)
		ct, err := cute.ParseToken(tok)
		require.NoError(t, err)
		require.Equal(t, []netip.AddrPort{aAddr}, ct.ServerAddrs, "a backend started after Drain returned")
	}
	mint := func(id uint64, servers ...netip.AddrPort) []byte {
		tok, err := cute.GenerateToken(&cute.TokenParams{ApplicationID: protocolID, ClientID: id, SecretKey: sk, ServerAddrs: servers})
		require.NoError(t, err)
		return tok
	}
	_, err = cute.DialContext(ctx, mint(30, bAddr))
	require.ErrorIs(t, err, cute.ErrConnectionDenied)
	stale, err := cute.DialContext(ctx, mint(31, bAddr, aAddr))
	require.NoError(t, err)
	defer stale.Close()
	assert.Equal(t, aAddr.String(), stale.RemoteAddr().String())
}
