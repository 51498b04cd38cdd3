package bench

import (
	"context"
	"io"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
)

// TestLightGenerator connects light clients to a real Listener over UDP:
// the server accepts each from its own source address (lightAddr), and
// with no payload sent the clients' tickers keep the connections alive
// with keep-alives the server counts as received datagrams. After Close,
// the server reads the disconnect packets as a clean end (io.EOF).
func TestLightGenerator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the light generator needs Linux's IP_PKTINFO")
	}
	const n = 3
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: DefaultProtocolID, PrivateKey: key, MaxClients: n})
	require.NoError(t, err)
	defer l.Close()
	addr := netip.MustParseAddrPort(l.Addr().String())
	tokens, err := mintTokens(n, DefaultProtocolID, 10, key, addr)
	require.NoError(t, err)

	cfg := &Config{Clients: n}
	require.NoError(t, cfg.fill())
	r := newRun(context.Background(), cfg, "netcode")
	r.clients = make([]*client, n)
	for i := range r.clients {
		r.clients[i] = new(client)
	}
	gen, err := newLightGen(r, addr)
	require.NoError(t, err)
	defer gen.close()
	for i := range n {
		ep, err := gen.dial(context.Background(), i, tokens[i])
		require.NoError(t, err)
		r.clients[i].ep = ep
	}
	seen := map[netip.AddrPort]bool{}
	conns := make([]*netcode.Conn, n)
	for i := range n {
		c, err := l.Accept()
		require.NoError(t, err)
		conns[i] = c.(*netcode.Conn)
		ap := netip.MustParseAddrPort(c.RemoteAddr().String())
		seen[ap] = true
		assert.Contains(t, []netip.Addr{lightAddr(0), lightAddr(1), lightAddr(2)}, ap.Addr())
	}
	assert.Len(t, seen, n, "one address per client")

	// Keep-alives: a connected client sends one each SendInterval when it
	// has nothing else to send; wait for several per client.
	base := l.Stats().PacketsReceived
	for l.Stats().PacketsReceived < base+3*n {
		time.Sleep(20 * time.Millisecond) // polling the counter, not asserting a time
	}

	for _, c := range r.clients {
		require.NoError(t, c.ep.Close())
	}
	buf := make([]byte, netcode.MaxPayloadBytes)
	for _, c := range conns {
		_, err := c.Read(buf)
		assert.ErrorIs(t, err, io.EOF, "the server reads the disconnect")
	}
	gen.close()
	for _, c := range r.clients {
		assert.NoError(t, c.ep.(*lightConn).endErr())
	}
}
