package webtransport

import (
	"net/netip"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdmission drives the admission of QUIC connections as sources that
// renew idle connections do: each connection closed to make room is
// opened again at once from its source, a thousand times over. A client
// that opens its session at once, from a source of its own or from a
// renewing one's, is never the one closed while it waits, and claims its
// session; only a cap of sessions refuses a new connection.
func TestAdmission(t *testing.T) {
	src := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }
	const renewals = 1000
	tests := []struct {
		name            string
		max, perSource  int
		sources, perSrc int // the renewing sources, and the connections each opens
		client          netip.Addr
		survives        int // renewals the client's connection survives: renewals, never closed
	}{
		{name: "client of its own source", max: 8, perSource: 2, sources: 4, perSrc: 2, client: src(99), survives: renewals},
		{name: "one source, at its limit", max: 8, perSource: 4, sources: 1, perSrc: 8, client: src(99), survives: renewals},
		{name: "more sources than the cap", max: 8, perSource: 2, sources: 6, perSrc: 2, client: src(99), survives: renewals},
		// From the renewing source itself, the client's connection is
		// the newest of its source: it survives MaxWaitingPerSource-1
		// renewals at least.
		{name: "client behind the renewing source", max: 8, perSource: 8, sources: 1, perSrc: 16, client: src(1), survives: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdmission(tt.max, tt.perSource, 10*time.Second)
			owner := map[*quic.Conn]netip.Addr{}
			open := func(addr netip.Addr) (*connState, *connState, time.Duration) {
				c := new(quic.Conn)
				owner[c] = addr
				st, ev, wait := a.admit(c, addr)
				require.LessOrEqual(t, a.n, tt.max, "held at once")
				if ev != nil {
					a.leave(ev) // its connection closes, later
					require.LessOrEqual(t, a.n, tt.max)
				}
				return st, ev, wait
			}
			var evicted []*connState
			for s := 1; s <= tt.sources; s++ {
				for range tt.perSrc {
					st, ev, _ := open(src(s))
					require.NotNil(t, st)
					if ev != nil {
						evicted = append(evicted, ev)
					}
				}
			}
			assert.LessOrEqual(t, a.n, tt.max)
			cl, ev, wait := open(tt.client)
			require.NotNil(t, cl, "the client is admitted")
			assert.Equal(t, pressureSessionWait, wait, "under pressure")
			if ev != nil {
				evicted = append(evicted, ev)
			}
			// Every connection closed is opened again from its source,
			// and more open while none is.
			survived := 0
			for ; survived < renewals; survived++ {
				reopen := src(1 + survived%tt.sources)
				if len(evicted) > 0 {
					ev := evicted[0]
					evicted = evicted[1:]
					if ev == cl {
						break
					}
					reopen = owner[ev.conn]
				}
				st, again, _ := open(reopen)
				require.NotNil(t, st)
				if again != nil {
					evicted = append(evicted, again)
				}
				require.LessOrEqual(t, a.n, tt.max)
			}
			assert.GreaterOrEqual(t, survived, tt.survives, "renewals the client's connection survived")
			if tt.survives < renewals {
				return
			}
			assert.True(t, a.claim(cl.conn), "the client claims its session")
			assert.False(t, a.claim(cl.conn), "one session a connection")
			assert.LessOrEqual(t, a.n, tt.max)
		})
	}

	// Sessions hold their connections: past the cap of sessions, a new
	// connection is refused; a waiting one times out once.
	a := newAdmission(2, 8, time.Second)
	addr := src(1)
	for range 2 {
		c := new(quic.Conn)
		st, ev, wait := a.admit(c, addr)
		require.NotNil(t, st)
		require.Nil(t, ev)
		assert.Equal(t, time.Second, wait)
		require.True(t, a.claim(c))
	}
	st, _, _ := a.admit(new(quic.Conn), addr)
	assert.Nil(t, st, "every connection carries a session")
	a = newAdmission(4, 8, 10*time.Second)
	st, _, wait := a.admit(new(quic.Conn), addr)
	assert.Equal(t, 10*time.Second, wait, "no pressure")

	// Without pressure, one source (players behind one NAT connecting at
	// once) may have more than MaxWaitingPerSource waiting: none of them
	// is closed for the others while half of the cap is free.
	nat := newAdmission(64, 8, 10*time.Second)
	for i := range 31 {
		st, ev, wait := nat.admit(new(quic.Conn), src(7))
		require.NotNil(t, st, "connection %d", i)
		assert.Nil(t, ev, "connection %d closed another of its source without pressure", i)
		assert.Equal(t, 10*time.Second, wait)
	}
	_, ev, wait := nat.admit(new(quic.Conn), src(7)) // the 32nd: half of the cap waits
	assert.Nil(t, ev)
	assert.Equal(t, pressureSessionWait, wait)
	_, ev, _ = nat.admit(new(quic.Conn), src(7)) // under pressure: the source renews its own
	assert.NotNil(t, ev, "under pressure, a source at its limit closes its oldest")
	assert.True(t, a.expire(st))
	assert.False(t, a.expire(st))
	assert.False(t, a.claim(st.conn), "timed out: no session")
	a.leave(st)
	assert.Zero(t, a.n)
	assert.Empty(t, a.sources)
}
