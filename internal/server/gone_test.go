package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGoneClientsBounded: the kicked clients remembered are at most the
// ring's capacity, the oldest go first, and expired ones are forgotten as
// new ones come.
func TestGoneClientsBounded(t *testing.T) {
	kicked := func(i int, at time.Time) *Client {
		return &Client{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), 5000), timeout: 5 * time.Second, lastRecv: at}
	}
	tests := []struct {
		name     string
		kicks    int
		every    time.Duration
		wantKept int
	}{
		{"fewer than the capacity", 3, 0, 3},
		{"more than the capacity", 20, 0, 8},
		{"expired ones go", 20, 2 * time.Second, 3}, // a 6 s window: the two before and the new one
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g goneClients
			at := epoch
			var cs []*Client
			for i := range tt.kicks {
				c := kicked(i, at)
				cs = append(cs, c)
				g.add(c, 8)
				at = at.Add(tt.every)
			}
			require.Equal(t, tt.wantKept, g.n)
			require.Len(t, g.byAddr, tt.wantKept)
			for i, c := range cs {
				_, kept := g.byAddr[c.addr]
				require.Equal(t, i >= tt.kicks-tt.wantKept, kept, "client %d", i)
			}
		})
	}
}
