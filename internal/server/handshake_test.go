package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandshakeRaceOneConnection: two holders of one token's keys,
// from two addresses. The second is refused while the first's handshake
// is in progress; after the first connects, the token never connects
// again; a handshake that is never answered holds its token for
// HandshakeTimeout only.
func TestHandshakeRaceOneConnection(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 4})
	tok := tokenWith(t, privKey, 1, h.now)
	a, b := addrN(1), addrN(2)
	var sink recSink
	h.srv.Receive(h.now, a, requestOf(t, tok), &sink.Output)
	require.Len(t, sink.pkts(), 1, "a's challenge")
	h.srv.Receive(h.now, b, requestOf(t, tok), &sink.Output)
	assert.Len(t, sink.pkts(), 1, "b is refused while a's handshake is in progress")
	assert.Equal(t, uint64(1), h.srv.Stats().TokenReuseRefused)

	// a never answers: after HandshakeTimeout, b may try, and connects.
	h.now = h.now.Add(HandshakeTimeout)
	h.srv.Update(h.now, &sink.Output)
	assert.Zero(t, h.srv.Stats().Mappings, "a's half-open handshake expired")
	cb := h.dial(tok, b, 20)
	require.Equal(t, client.Connected, cb.State())
	ca := h.dial(tok, a, 20)
	assert.NotEqual(t, client.Connected, ca.State(), "one connection per token")
	assert.Equal(t, uint64(1), h.srv.Stats().ConnectionsOpened)
}

// TestHalfOpenFloodCannotHoldMappings is the handshake flood of issue
// 36: 2,000 half-open handshakes, each sent again every second, against
// 1,024 mappings (256 slots). Each request that finds the table full
// drops the oldest handshake, resending renews none, and a legitimate
// client connects while the flood runs.
func TestHalfOpenFloodCannotHoldMappings(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 256})
	const flood = 2000
	reqs := make([][]byte, flood)
	for i := range reqs {
		reqs[i] = requestOf(t, tokenWith(t, privKey, i, h.now))
	}
	var sink recSink
	buf := make([]byte, 1078)
	// The flood's requests go out in ten bursts a second, each token
	// once a second, as the legitimate client's rounds go by.
	burst := func(k int) {
		for i := k; i < flood; i += 10 {
			copy(buf, reqs[i])
			h.srv.Receive(h.now, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 80, byte(i >> 8), byte(i)}), 1000), buf, &sink.Output)
		}
		sink.Reset()
	}
	for k := range 20 {
		burst(k % 10)
		h.srv.Update(h.now, &sink.Output)
		h.now = h.now.Add(100 * time.Millisecond)
	}
	st := h.srv.Stats()
	require.Equal(t, st.MappingsLimit, st.Mappings, "the flood fills the mappings")
	require.Positive(t, st.MappingsFull)

	c := client.New(h.now, tokenWith(t, privKey, flood+1, h.now), nil)
	player := netip.MustParseAddrPort("10.60.0.3:5000")
	for k := 0; k < 20 && c.State() != client.Connected; k++ {
		burst(k % 10)
		h.exchange(c, player)
	}
	assert.Equal(t, client.Connected, c.State(), "the legitimate client connects during the flood")
}

// TestMappingsCap: the encryption mappings are capped at MappingsPerSlot
// per slot; a request past the cap drops the oldest handshake in progress
// and is counted; unanswered handshakes expire after HandshakeTimeout,
// however often their requests are sent again.
func TestMappingsCap(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 2})
	limit := h.srv.Stats().MappingsLimit
	require.Equal(t, 2*MappingsPerSlot, limit)
	var sink recSink
	for i := range limit + 5 {
		h.srv.Receive(h.now, addrN(i), requestOf(t, tokenWith(t, privKey, i, h.now)), &sink.Output)
	}
	st := h.srv.Stats()
	assert.Equal(t, limit, st.Mappings)
	assert.Equal(t, uint64(5), st.MappingsFull)
	assert.Equal(t, uint64(limit+5), st.ChallengesSent, "every request answered")
	h.srv.mu.RLock()
	assert.Nil(t, h.srv.byAddr[addrN(0)], "the oldest were dropped")
	assert.NotNil(t, h.srv.byAddr[addrN(limit+4)])
	h.srv.mu.RUnlock()
	// Sent again every second, the handshakes still expire
	// HandshakeTimeout after their first request: each request after that
	// begins a handshake anew.
	h.srv.mu.RLock()
	first := make(map[*Client]bool)
	for _, c := range h.srv.byAddr {
		first[c] = true
	}
	h.srv.mu.RUnlock()
	for range HandshakeTimeout / time.Second {
		h.now = h.now.Add(time.Second)
		for i := 5; i < limit+5; i++ {
			h.srv.Receive(h.now, addrN(i), requestOf(t, tokenWith(t, privKey, i, epoch)), &sink.Output)
		}
		h.srv.Update(h.now, &sink.Output)
	}
	h.srv.mu.RLock()
	for _, c := range h.srv.byAddr {
		assert.False(t, first[c], "a handshake outlived HandshakeTimeout")
	}
	h.srv.mu.RUnlock()
	assert.Equal(t, limit, h.srv.Stats().Mappings)
	// Once the requests stop, the handshakes expire.
	h.now = h.now.Add(HandshakeTimeout)
	h.srv.Update(h.now, &sink.Output)
	assert.Zero(t, h.srv.Stats().Mappings)
}

// TestSweepWalksHandshakesOnly: the periodic sweep of expired mappings
// looks at the handshakes in progress, never at the connections, and
// frees a silent handshake's mapping while the connections keep theirs.
func TestSweepWalksHandshakesOnly(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 4})
	var sink recSink
	live := []*peer{connectPeer(t, h.srv, 100, h.now, token.NoTimeout), connectPeer(t, h.srv, 101, h.now, token.NoTimeout)}
	for i := range 3 {
		h.srv.Receive(h.now, addrN(i), requestOf(t, tokenWith(t, privKey, i, h.now)), &sink.Output)
	}
	h.srv.mu.RLock()
	pending := h.srv.handshakes.n
	h.srv.mu.RUnlock()
	assert.Equal(t, 3, pending, "the handshakes, not the connections")
	assert.Equal(t, 5, h.srv.Stats().Mappings)
	// The handshakes go unanswered for HandshakeTimeout.
	h.now = h.now.Add(HandshakeTimeout)
	h.srv.Update(h.now, &sink.Output)
	h.srv.mu.RLock()
	pending = h.srv.handshakes.n
	h.srv.mu.RUnlock()
	assert.Zero(t, pending)
	st := h.srv.Stats()
	assert.Equal(t, 2, st.Mappings, "the connections keep theirs")
	assert.Equal(t, 2, st.Connected)
	for _, p := range live {
		assert.True(t, p.c.live.Load())
	}
}
