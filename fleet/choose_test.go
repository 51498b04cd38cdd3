package fleet

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pure selection logic, on entries made here (no Redis: the only place
// the package's tests do without a real redis-server).

func testEntry(id string, connected, maxClients int, tags ...string) *entry {
	e := &entry{Info: Info{ID: id, ProtocolID: 7, MaxClients: maxClients, Connected: connected, Tags: tags}, capacity: maxClients}
	e.addrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1")}
	return e
}

func ids(es []*entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func TestChooseFilters(t *testing.T) {
	draining := testEntry("draining", 0, 10)
	draining.draining.Store(true)
	gone := testEntry("gone", 0, 10)
	gone.gone.Store(true)
	otherProto := testEntry("proto", 0, 10)
	otherProto.ProtocolID = 8
	servers := []*entry{
		testEntry("full", 10, 10),
		draining, gone, otherProto,
		testEntry("half", 5, 10, "ranked"),
		testEntry("empty", 0, 10),
		testEntry("tenth", 1, 10, "ranked", "eu"),
		testEntry("zero-slots", 0, 0),
	}
	for _, tc := range []struct {
		name  string
		tags  []string
		count int
		want  []string
	}{
		{"least loaded first", nil, 32, []string{"empty", "tenth", "half"}},
		{"count bounds", nil, 2, []string{"empty", "tenth"}},
		{"one", nil, 1, []string{"empty"}},
		{"a tag", []string{"ranked"}, 32, []string{"tenth", "half"}},
		{"every tag", []string{"ranked", "eu"}, 32, []string{"tenth"}},
		{"no match", []string{"asia"}, 32, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf [MaxCount]*entry
			got := choose(buf[:0], servers, 7, tc.tags, tc.count)
			assert.Equal(t, tc.want, ids(got))
		})
	}
}

// TestChoosePending: tokens named first since the read count as load, so
// one backend spreads a burst of tokens between reads.
func TestChoosePending(t *testing.T) {
	a, b := testEntry("a", 0, 4), testEntry("b", 1, 4)
	var buf [MaxCount]*entry
	first := map[string]int{}
	for range 6 {
		got := choose(buf[:0], []*entry{a, b}, 7, nil, 1)
		if len(got) == 0 {
			break
		}
		got[0].pending.Add(1)
		first[got[0].ID]++
	}
	// a has 4 free slots and b 3: 6 tokens take 6 of the 7.
	assert.Equal(t, 6, first["a"]+first["b"])
	assert.LessOrEqual(t, first["a"]-first["b"], 2, "the least loaded alternates once loads meet: %v", first)
	// The 7th takes the last slot; then neither has room.
	got := choose(buf[:0], []*entry{a, b}, 7, nil, 1)
	require.Len(t, got, 1)
	got[0].pending.Add(1)
	assert.Empty(t, choose(buf[:0], []*entry{a, b}, 7, nil, 1), "every slot is named")
}

// TestChooseTiesAtRandom: among equally loaded servers, each comes first
// about equally often, so replicas do not stampede one server.
func TestChooseTiesAtRandom(t *testing.T) {
	var servers []*entry
	for i := range 4 {
		servers = append(servers, testEntry(fmt.Sprint(i), 3, 10))
	}
	const n = 4000
	first := map[string]int{}
	var buf [MaxCount]*entry
	for range n {
		got := choose(buf[:0], servers, 7, nil, 4)
		require.Len(t, got, 4)
		first[got[0].ID]++
	}
	for id, c := range first {
		// Expected 1000 each; 800 is over 7 standard deviations away.
		assert.Greater(t, c, 800, "server %s first %d times of %d", id, c, n)
	}
	assert.Len(t, first, 4)
}

func TestChooseAllocs(t *testing.T) {
	var servers []*entry
	for i := range 1000 {
		servers = append(servers, testEntry(fmt.Sprint(i), i%50, 64))
	}
	var buf [MaxCount]*entry
	allocs := testing.AllocsPerRun(100, func() { choose(buf[:0], servers, 7, nil, 32) })
	assert.Zero(t, allocs)
}

func BenchmarkChoose1000(b *testing.B) {
	var servers []*entry
	for i := range 1000 {
		servers = append(servers, testEntry(fmt.Sprint(i), i%50, 64, "ranked"))
	}
	var buf [MaxCount]*entry
	b.ReportAllocs()
	for b.Loop() {
		choose(buf[:0], servers, 7, []string{"ranked"}, 8)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"eu-west", true}, {"map=dust", true}, {"", false}, {"a b", false}, {"{x}", false},
		{"a,b", false}, {"é", false}, {string(make([]byte, 65)), false}, {"x\n", false},
	} {
		assert.Equal(t, tc.ok, checkName("tag", tc.s) == nil, "%q", tc.s)
	}
	tags, err := ParseTags(" ranked, eu ")
	require.NoError(t, err)
	assert.Equal(t, []string{"ranked", "eu"}, tags)
	tags, err = ParseTags("")
	assert.NoError(t, err)
	assert.Nil(t, tags)
	_, err = ParseTags("a,,b")
	assert.Error(t, err)
}

// FuzzParseEntry: a registry entry is read from a store others may write
// to; no input makes parseEntry panic or accept what Register would not
// write.
func FuzzParseEntry(f *testing.F) {
	f.Add(`1700000003000 {"id":"a","addrs":["127.0.0.1:40000"],"protocol":"7","region":"eu","max_clients":256,"connected":3,"started":"2026-11-25T18:00:00Z"}`)
	f.Add(`1 {}`)
	f.Add(`x {"id":"a"}`)
	f.Add(`99999999999999999999 {"id":"a","region":"eu"}`)
	f.Add(`1700000003000 {"id":"a b","region":"eu"}`)
	local := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		info, ok := parseEntry(s, 1_700_000_000_000, local)
		if !ok {
			return
		}
		if checkName("id", info.ID) != nil || checkName("region", info.Region) != nil || info.MaxClients < 0 || info.Connected < 0 ||
			info.MaxClients > MaxMaxClients || info.Connected > info.MaxClients || len(info.Addrs) == 0 || len(info.Addrs) > MaxCount {
			t.Fatalf("accepted %+v", info)
		}
		for _, a := range info.Addrs {
			if ap, err := netip.ParseAddrPort(a); err != nil || !unicast(ap) {
				t.Fatalf("accepted address %q", a)
			}
		}
		if info.Expires.Before(local) || info.Expires.After(local.Add(24*time.Hour)) {
			t.Fatalf("expiry %v out of range", info.Expires)
		}
	})
}

func TestParseEntry(t *testing.T) {
	local := time.Unix(1_700_000_000, 0)
	info, ok := parseEntry(`1700000001500 {"id":"a","addrs":["127.0.0.1:40000"],"protocol":"18446744073709551615","region":"eu","tags":["ranked"],"max_clients":256,"connected":3,"draining":true,"version":"0.1.0"}`, 1_700_000_000_000, local)
	require.True(t, ok)
	assert.Equal(t, Info{ID: "a", Addrs: []string{"127.0.0.1:40000"}, ProtocolID: 1<<64 - 1, Region: "eu", Tags: []string{"ranked"},
		MaxClients: 256, Connected: 3, Draining: true, Version: "0.1.0", Expires: local.Add(1500 * time.Millisecond)}, *info)
	// Clamped: the slots to the protocol's limit, the clients to the
	// slots; repeated addresses once.
	info, ok = parseEntry(`1700000001500 {"id":"a","addrs":["127.0.0.1:40000","127.0.0.1:40000","[::ffff:127.0.0.1]:40001"],"region":"eu","max_clients":1099511627776,"connected":4611686018427387904}`, 1_700_000_000_000, local)
	require.True(t, ok)
	assert.Equal(t, MaxMaxClients, info.MaxClients)
	assert.Equal(t, MaxMaxClients, info.Connected)
	assert.Equal(t, []string{"127.0.0.1:40000", "[::ffff:127.0.0.1]:40001"}, info.Addrs)
	for _, bad := range []string{
		`1699999999999 {"id":"a","region":"eu"}`, // expired
		`1700000001500 {"id":"","region":"eu"}`,
		`1700000001500 {"id":"a","region":"e u"}`,
		`1700000001500 {"id":"a","region":"eu","connected":-1}`,
		`1700000001500 {"id":"a","region":"eu","protocol":7}`, // a number, not the string Register writes
		`1700000001500`,
		`1700000001500 ` + strings.Repeat(" ", maxEntry),
		`1700000001500 {"id":"a","region":"eu","max_clients":1}`,                         // no address
		`1700000001500 {"id":"a","region":"eu","addrs":["224.0.0.1:1"]}`,                 // multicast
		`1700000001500 {"id":"a","region":"eu","addrs":["127.0.0.1:1","[fe80::1%e]:1"]}`, // a zone
		`1700000001500 {"id":"a","region":"eu","addrs":["127.0.0.1:1"],"tags":["a b"]}`,
		`1700000001500 {"id":"a","region":"eu","addrs":[` + strings.Repeat(`"127.0.0.1:1",`, 32) + `"127.0.0.1:2"]}`, // 33
	} {
		_, ok := parseEntry(bad, 1_700_000_000_000, local)
		assert.False(t, ok, "%.80q", bad)
	}
}

// TestInstallCarriesPending: tokens named first stay counted against a
// server across reads until its Connected shows them, or until their
// share of pendingWindow has passed; and the load is a share of the
// capacity clamped to the region's median.
func TestInstallCarriesPending(t *testing.T) {
	rg := &region{recent: map[string]regionEvent{}}
	rg.snap.Store(&snapshot{})
	info := func(id string, connected, maxClients int) *Info {
		return &Info{ID: id, Addrs: []string{"127.0.0.1:1"}, ProtocolID: 7, MaxClients: maxClients, Connected: connected, Instance: "i-" + id}
	}
	t0 := time.Unix(1_700_000_000, 0)
	rg.install(t0, []*Info{info("a", 0, 64), info("b", 0, 64), info("liar", 0, MaxMaxClients)}, time.Second)
	s := rg.snap.Load()
	assert.Equal(t, 64, s.byID["a"].capacity)
	s.byID["a"].pending.Store(10)
	s.byID["liar"].pending.Store(10)
	// 100 ms later: a's server shows 6 of its 10 clients; the liar shows
	// none. A 50th of the window passed: one more is forgotten.
	rg.install(t0.Add(100*time.Millisecond), []*Info{info("a", 6, 64), info("b", 0, 64), info("liar", 0, MaxMaxClients)}, time.Second)
	s = rg.snap.Load()
	assert.EqualValues(t, 3, s.byID["a"].pending.Load())
	assert.EqualValues(t, 9, s.byID["liar"].pending.Load())
	assert.Equal(t, 64, s.byID["liar"].capacity, "the liar's claim is clamped to the median")
	// A new registration under the id starts afresh.
	again := info("liar", 0, 64)
	again.Instance = "other"
	rg.install(t0.Add(200*time.Millisecond), []*Info{info("a", 6, 64), info("b", 0, 64), again}, time.Second)
	assert.EqualValues(t, 0, rg.snap.Load().byID["liar"].pending.Load())
	// Back to the first: two writers take turns.
	assert.Equal(t, 1, rg.install(t0.Add(300*time.Millisecond), []*Info{info("liar", 0, 64)}, time.Second))
	// After the whole window, nothing pends.
	s = rg.snap.Load()
	s.byID["liar"].pending.Store(40)
	rg.install(t0.Add(300*time.Millisecond+pendingWindow), []*Info{info("liar", 0, 64)}, time.Second)
	assert.EqualValues(t, 0, rg.snap.Load().byID["liar"].pending.Load())
}
