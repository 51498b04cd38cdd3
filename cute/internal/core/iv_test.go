package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute/internal/wire"
)

// TestIVSource: a connection's IVs come from its generator, seeded by one
// 32-byte draw of the core's entropy, not one draw per packet; each box
// still opens on the other side, and no two IVs repeat. With a test's
// entropy (ivDirect) every IV is drawn from it, as the transcripts need.
func TestIVSource(t *testing.T) {
	s, c, n, addr := connectedPair(t, tokenOpts{clientID: 7})
	// Production's path (ivDirect false) with a counting source.
	var draws []int
	count := func(b []byte) { draws = append(draws, len(b)); systemEntropy(b) }
	c.rand, c.ivDirect = count, false
	s.rand, s.ivDirect = count, false
	c.ivs, s.slots[0].ivs = ivSource{}, ivSource{}

	const packets = 50
	seen := make(map[wire.IV]bool)
	var cout ClientOutput
	var sout ServerOutput
	now := n.now
	for i := range packets {
		now = now.Add(time.Millisecond)
		require.NoError(t, c.Send(now, []byte{byte(i), 1, 2, 3}, &cout))
		require.False(t, seen[c.iv], "client IV repeated")
		seen[c.iv] = true
		s.Receive(now, addr, cout.Datagrams[0].Buf, &sout)
		require.Len(t, sout.Events, 1)
		require.Equal(t, byte(i), sout.Events[0].Payload[0])

		require.NoError(t, s.Send(now, 0, []byte{byte(i), 4, 5}, &sout))
		iv := s.slots[0].iv
		require.False(t, seen[iv], "server IV repeated")
		seen[iv] = true
		c.Receive(now, testServer, sout.Datagrams[0].Buf, &cout)
		require.NotNil(t, cout.Payload)
		require.Equal(t, byte(i), cout.Payload[0])
	}
	require.Equal(t, []int{32, 32}, draws, "one seed per side, no draw per packet")

	// A test's entropy gives every IV itself.
	draws = nil
	c.setEntropy(count)
	for range 3 {
		require.NoError(t, c.Send(now, []byte{1}, &cout))
	}
	require.Equal(t, []int{len(wire.IV{}), len(wire.IV{}), len(wire.IV{})}, draws)
}
