package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/fleet"
)

// The registry's trust boundary: a writer who can set one entry must not
// steer the fleet. Each case writes a lying entry beside three honest
// servers, asks for 160 tokens (the honest servers have 192 slots), and counts the tokens each entry leads
// (names first, where the client lands): the liar gets at most its fair
// share, a quarter, the share of an honest empty server.

// honestFleet registers n empty servers of 64 slots in region "test"
// that exist only in the registry, at 127.0.0.1:41001 and on.
func honestFleet(t *testing.T, rdb redis.UniversalClient, n int) []*fleet.Server {
	t.Helper()
	return simFleet(t, rdb, n, 41001, 0)
}

// simFleet registers n servers of 64 slots in region "test" that exist
// only in the registry, with ids s1 and on at 127.0.0.1:port and on,
// server i (from 0) with i × load clients.
func simFleet(t *testing.T, rdb redis.UniversalClient, n, port, load int) []*fleet.Server {
	t.Helper()
	var regs []*fleet.Server
	for i := range n {
		src := &simServer{addr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port + i}}
		src.connected.Store(int64(load * i))
		reg, err := fleet.Register(context.Background(), src, fleet.ServerConfig{
			Client: rdb, ID: fmt.Sprintf("s%d", i+1), ProtocolID: protocolID, Region: "test", Heartbeat: testHeartbeat, TTL: testTTL,
		})
		require.NoError(t, err)
		t.Cleanup(func() { reg.Close() })
		regs = append(regs, reg)
	}
	return regs
}

// writeEntry writes a raw entry under field in region "test", as a
// hostile writer would: any JSON, expiring in a minute of Redis's clock.
func writeEntry(t *testing.T, rdb redis.UniversalClient, field string, entry map[string]any) {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	body, err := json.Marshal(entry)
	require.NoError(t, err)
	val := fmt.Sprintf("%d %s", now.Add(time.Minute).UnixMilli(), body)
	require.NoError(t, rdb.HSet(ctx, "netcode:fleet:{test}:servers", field, val).Err())
}

// liar is an entry claiming an empty server; addrs are its addresses.
func liar(id string, maxClients uint64, addrs []string) map[string]any {
	return map[string]any{"id": id, "addrs": addrs, "protocol": fmt.Sprint(protocolID), "region": "test",
		"max_clients": maxClients, "connected": 0, "started": "2026-11-29T00:00:00Z"}
}

// foreign returns n addresses that no test server owns (TEST-NET-2).
func foreign(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("198.51.%d.%d:%d", i/250, i%250+1, 40000+i))
	}
	return out
}

// leads asks the Chooser for n tokens of 8 servers and counts the first
// address of each; it checks that every token names several servers.
func leads(t *testing.T, ch *fleet.Chooser, n int) map[netip.AddrPort]int {
	t.Helper()
	count := map[netip.AddrPort]int{}
	for range n {
		got, err := ch.Choose(fleet.Query{})
		require.NoError(t, err)
		count[got[0].Addr]++
	}
	return count
}

func TestHostileEntries(t *testing.T) {
	const tokens, servers = 160, 4 // three honest servers of 64 slots and the liar
	// Its fair share, give or take what a read landing mid-burst rounds
	// (each read forgets at least one pending token of every server).
	fair := tokens/servers + 2
	s1 := netip.MustParseAddrPort("127.0.0.1:41001")
	for _, tc := range []struct {
		name string
		// write writes the hostile entries.
		write func(t *testing.T, rdb redis.UniversalClient)
		// refused and conflicts are what the Chooser must count at
		// least; liarLeads counts the liar's tokens from the leads.
		refused, conflicts bool
		liarLeads          func(map[netip.AddrPort]int) int
		limit              int
	}{{
		name: "max_clients 2^40 and 32 foreign addresses",
		write: func(t *testing.T, rdb redis.UniversalClient) {
			writeEntry(t, rdb, "evil", liar("evil", 1<<40, foreign(32)))
		},
		liarLeads: func(m map[netip.AddrPort]int) int { return m[netip.MustParseAddrPort(foreign(1)[0])] },
		limit:     fair,
	}, {
		name: "600 addresses",
		write: func(t *testing.T, rdb redis.UniversalClient) {
			writeEntry(t, rdb, "evil", liar("evil", 64, foreign(600)))
		},
		refused:   true,
		liarLeads: func(m map[netip.AddrPort]int) int { return len(m) - 3 },
		limit:     0,
	}, {
		name: "max_clients 2^62 naming a real server's address",
		write: func(t *testing.T, rdb redis.UniversalClient) {
			writeEntry(t, rdb, "evil", liar("evil", 1<<62, []string{s1.String()}))
		},
		// s1's address leads its own share and the liar's, no more.
		liarLeads: func(m map[netip.AddrPort]int) int { return m[s1] - tokens/servers },
		limit:     fair,
	}, {
		name: "an entry under another field claiming s1's id",
		write: func(t *testing.T, rdb redis.UniversalClient) {
			writeEntry(t, rdb, "evil", liar("s1", 1<<40, foreign(1)))
		},
		conflicts: true,
		liarLeads: func(m map[netip.AddrPort]int) int { return m[netip.MustParseAddrPort(foreign(1)[0])] },
		limit:     0,
	}, {
		name: "multicast, broadcast, zoned and portless addresses",
		write: func(t *testing.T, rdb redis.UniversalClient) {
			for i, a := range []string{"224.0.0.1:40000", "255.255.255.255:40000", "[ff02::1]:40000", "[fe80::1%eth0]:40000", "0.0.0.0:40000", "10.0.0.1:0", "example.com:40000"} {
				writeEntry(t, rdb, fmt.Sprintf("evil%d", i), liar(fmt.Sprintf("evil%d", i), 64, []string{a}))
			}
		},
		refused:   true,
		liarLeads: func(m map[netip.AddrPort]int) int { return len(m) - 3 },
		limit:     0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := startRedis(t)
			honestFleet(t, rdb, 3)
			tc.write(t, rdb)
			ch, err := fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh})
			require.NoError(t, err)
			defer ch.Close()
			got := leads(t, ch, tokens)
			t.Logf("leads: %v", got)
			assert.LessOrEqual(t, tc.liarLeads(got), tc.limit, "the liar's tokens")
			for i := range 3 {
				honest := netip.AddrPortFrom(s1.Addr(), s1.Port()+uint16(i))
				assert.Positive(t, got[honest], "honest server %v leads tokens", honest)
			}
			st := ch.Stats()
			if tc.refused {
				assert.Positive(t, st.Refused, "refused entries counted")
			}
			if tc.conflicts {
				assert.Positive(t, st.Conflicts, "conflicts counted")
			}
		})
	}
}

// TestTokenSpreadsSlots: a token of 8 servers gives each chosen server its
// share of the 32 address slots, so an entry with 32 addresses cannot
// fill the token and leave the client no honest server to try.
func TestTokenSpreadsSlots(t *testing.T) {
	_, rdb := startRedis(t)
	honestFleet(t, rdb, 3)
	writeEntry(t, rdb, "evil", liar("evil", 64, foreign(32)))
	ch, err := fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh})
	require.NoError(t, err)
	defer ch.Close()
	for range 20 {
		got, err := ch.Choose(fleet.Query{})
		require.NoError(t, err)
		honest := 0
		for _, s := range got {
			if s.Addr.Addr() == netip.MustParseAddr("127.0.0.1") {
				honest++
			}
		}
		assert.Equal(t, 3, honest, "every honest server is in the token: %v", got)
		if got[0].Addr.Addr() != netip.MustParseAddr("127.0.0.1") {
			assert.Len(t, got, fleet.MaxCount/4+3, "the liar first takes its quarter of the slots, no more")
		}
	}
}

// TestIDTakenOver: a writer that overwrites a live server's entry under
// its own id is noticed by the server at its next heartbeat (counted and
// logged), and the server's heartbeat takes its entry back.
func TestIDTakenOver(t *testing.T) {
	_, rdb := startRedis(t)
	regs := honestFleet(t, rdb, 1)
	waitFor(t, 10*time.Second, "a second heartbeat", func() bool { w, _ := regs[0].Heartbeats(); return w >= 2 })
	writeEntry(t, rdb, "s1", liar("s1", 1<<40, foreign(1)))
	waitFor(t, 10*time.Second, "the server counts the conflict", func() bool { return regs[0].Conflicts() > 0 })
	waitFor(t, 10*time.Second, "the server's entry is back", func() bool {
		i := listed(rdb)["s1"]
		return i != nil && i.Addrs[0] == "127.0.0.1:41001"
	})
}
