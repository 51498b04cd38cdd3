package core

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute/internal/wire"
)

// TestDrain: a draining server denies a token as a full one does, denies
// a handshake already in progress at its challenge response, takes no
// slot for either, and leaves a connected client connected.
func TestDrain(t *testing.T) {
	s, _ := newServer(t, nil)
	n := newNet(t, s)
	live := n.add(netip.MustParseAddrPort("10.0.0.2:1000"), makeToken(t, tokenOpts{clientID: 2}))
	n.run(300*time.Millisecond, dt)
	require.Equal(t, Connected, live.State())

	// A handshake whose challenge is on its way when the drain begins.
	midAddr := netip.MustParseAddrPort("10.0.0.3:1000")
	mid := n.add(midAddr, makeToken(t, tokenOpts{clientID: 3}))
	challenged := func() bool {
		for _, b := range n.queue[midAddr] {
			if b[0] == byte(wire.ChallengeRequest) {
				return true
			}
		}
		return false
	}
	for i := 0; i < 100 && !challenged(); i++ {
		n.step(dt)
	}
	require.True(t, challenged())
	require.Equal(t, 1, s.PendingCount())
	require.False(t, s.Draining())
	s.Drain()
	assert.True(t, s.Draining())

	fresh := n.add(netip.MustParseAddrPort("10.0.0.4:1000"), makeToken(t, tokenOpts{clientID: 4}))
	n.run(2*time.Second, dt)
	assert.Equal(t, ConnectionDenied, mid.State(), "denied at its challenge response")
	assert.Equal(t, ConnectionDenied, fresh.State(), "denied at its token")
	assert.Equal(t, Connected, live.State())
	assert.Equal(t, 1, s.ClientCount())
	assert.Equal(t, 0, s.PendingCount())
	st := s.Stats()
	assert.Equal(t, uint64(2), st.Denied)
	assert.Equal(t, uint64(1), st.ConnectionsOpened)
}
