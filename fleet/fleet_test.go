package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/token"
)

// dialDirect connects to the servers with a token minted here.
func dialDirect(t *testing.T, user uint64, servers ...netip.AddrPort) *netcode.Conn {
	t.Helper()
	tok, err := token.Generate(&token.Params{
		ProtocolID: protocolID, ClientID: user, PrivateKey: testKey, ServerAddrs: servers, TimeoutSeconds: testTimeout,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := netcode.DialContext(ctx, tok)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRegistryLifecycle: a registered server's entry says what it is; the
// heartbeat carries its clients; Drain marks it before it returns, Close
// removes it before it returns.
func TestRegistryLifecycle(t *testing.T) {
	_, rdb := startRedis(t)
	gs := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a", Tags: []string{"ranked", "map=dust"}, Version: "9.9"})

	e := listed(rdb)["a"]
	require.NotNil(t, e, "registered before Register returned")
	assert.Equal(t, []string{gs.addr.String()}, e.Addrs)
	assert.Equal(t, uint64(protocolID), e.ProtocolID)
	assert.Equal(t, "test", e.Region)
	assert.Equal(t, []string{"ranked", "map=dust"}, e.Tags)
	assert.Equal(t, 256, e.MaxClients)
	assert.Zero(t, e.Connected)
	assert.False(t, e.Draining)
	assert.Equal(t, "9.9", e.Version)
	assert.WithinDuration(t, time.Now().Add(testTTL), e.Expires, testTTL, "expires within the TTL")

	c := dialDirect(t, 1, gs.addr)
	require.NoError(t, echoOnce(c, "hi"))
	waitFor(t, 10*time.Second, "the heartbeat carries the connected client", func() bool {
		e := listed(rdb)["a"]
		return e != nil && e.Connected == 1
	})

	regions, err := fleet.Regions(context.Background(), rdb, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"test"}, regions)

	require.NoError(t, gs.reg.Drain(context.Background()))
	require.True(t, listed(rdb)["a"].Draining, "marked draining before Drain returned")
	require.NoError(t, echoOnce(c, "still served"), "a drained server keeps its clients")
	require.NoError(t, gs.reg.Close())
	assert.Nil(t, listed(rdb)["a"], "removed before Close returned")
	assert.ErrorIs(t, gs.reg.Close(), fleet.ErrClosed)
}

// TestRegisterRefuses: configurations no registry should hold.
func TestRegisterRefuses(t *testing.T) {
	_, rdb := startRedis(t)
	l, err := netcode.Listen("udp4", "0.0.0.0:0", &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: testKey})
	require.NoError(t, err)
	defer l.Close()
	for _, tc := range []struct {
		name string
		cfg  fleet.ServerConfig
	}{
		{"no client", fleet.ServerConfig{}},
		{"wildcard address", fleet.ServerConfig{Client: rdb}},
		{"wildcard in Addrs", fleet.ServerConfig{Client: rdb, Addrs: []string{"0.0.0.0:1"}}},
		{"bad region", fleet.ServerConfig{Client: rdb, Addrs: []string{"127.0.0.1:1"}, Region: "{eu}"}},
		{"bad tag", fleet.ServerConfig{Client: rdb, Addrs: []string{"127.0.0.1:1"}, Tags: []string{"a b"}}},
		{"TTL not above heartbeat", fleet.ServerConfig{Client: rdb, Addrs: []string{"127.0.0.1:1"}, Heartbeat: time.Second, TTL: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := fleet.Register(context.Background(), l, tc.cfg)
			assert.Error(t, err)
			assert.Nil(t, s)
		})
	}
}

// TestKilledServer: a game server killed with SIGKILL (a real child
// process) leaves the registry within the TTL, by Redis's clock, and its
// clients get new tokens and land on another server.
func TestKilledServer(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	child, childAddr := startChild(t, redisSrv.URL(), "doomed")
	be := startBackend(t, rdb, nil)
	waitFor(t, 10*time.Second, "the backend names the child", func() bool {
		tok, err := fetchToken(context.Background(), be.srv.URL, 1)
		return err == nil && slices.Contains(named(t, tok), childAddr)
	})
	tok, err := fetchToken(context.Background(), be.srv.URL, 1)
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{childAddr}, named(t, tok), "the only server")
	c, err := netcode.Dial(tok)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, echoOnce(c, "before"))

	other := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "survivor"})

	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	e := listed(rdb)["doomed"]
	if e != nil { // not yet expired: its expiry is at most one TTL after the kill
		assert.LessOrEqual(t, e.Expires.Sub(killed), testTTL+50*time.Millisecond, "the entry's expiry")
	}
	gone := waitFor(t, testTTL+10*time.Second, "the killed server leaves the registry", func() bool {
		l := listed(rdb)
		return l != nil && l["doomed"] == nil
	})
	t.Logf("the SIGKILLed server left the registry %v after the kill (TTL %v, heartbeat %v)", gone.Round(time.Millisecond), testTTL, testHeartbeat)
	waitFor(t, 10*time.Second, "the backend stops naming the killed server", func() bool {
		tok, err := fetchToken(context.Background(), be.srv.URL, 2)
		return err == nil && !slices.Contains(named(t, tok), childAddr)
	})

	// The client notices within its timeout, asks for a new token, and
	// lands on the survivor.
	var buf [16]byte
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = c.Read(buf[:])
	require.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
	tok, err = fetchToken(context.Background(), be.srv.URL, 1)
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{other.addr}, named(t, tok))
	c2, err := netcode.Dial(tok)
	require.NoError(t, err)
	defer c2.Close()
	assert.Equal(t, other.addr.String(), c2.RemoteAddr().String())
	require.NoError(t, echoOnce(c2, "after"))
}

// TestDrainedNeverNamed: once Drain has returned, a Chooser that reads
// the registry never names the server, and one that was running stops as
// soon as the drain message reaches it; a client whose token still names
// it first is denied at once and lands on the next server.
func TestDrainedNeverNamed(t *testing.T) {
	_, rdb := startRedis(t)
	a := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	b := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "b"})
	running := startBackend(t, rdb, nil)
	waitFor(t, 10*time.Second, "the backend sees both", func() bool { return len(running.ch.Servers("test")) == 2 })
	events := running.ch.Stats().Events

	require.NoError(t, b.reg.Drain(context.Background()))
	fresh := startBackend(t, rdb, nil)
	for user := uint64(1); user <= 100; user++ {
		tok, err := fetchToken(context.Background(), fresh.srv.URL, user)
		require.NoError(t, err)
		require.Equal(t, []netip.AddrPort{a.addr}, named(t, tok), "a backend started after Drain returned")
	}
	waitFor(t, 10*time.Second, "the drain message reaches the running backend", func() bool {
		return running.ch.Stats().Events > events
	})
	for user := uint64(1); user <= 100; user++ {
		tok, err := fetchToken(context.Background(), running.srv.URL, user)
		require.NoError(t, err)
		require.Equal(t, []netip.AddrPort{a.addr}, named(t, tok))
	}
	// A stale token naming b first: b denies, the client moves on to a.
	c := dialDirect(t, 7, b.addr, a.addr)
	assert.Equal(t, a.addr.String(), c.RemoteAddr().String())
}

// TestDrainBound: what Server.Drain promises a running Chooser that has
// not had the message yet: once it has finished a read begun after Drain
// returned (two reads counted from then: the one under way and the next),
// it never names the server. The Chooser hears no message, so that the
// read alone must do it.
func TestDrainBound(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	a := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	b := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "b"})
	// The Chooser's Redis user may not subscribe to any channel: it never
	// hears the drain, and must see it in a read.
	require.NoError(t, rdb.Do(context.Background(), "ACL", "SETUSER", "deaf", "on", ">pw", "~*", "resetchannels", "+@all").Err())
	deaf, err := fleet.NewClient("redis://deaf:pw@" + redisSrv.Addr())
	require.NoError(t, err)
	defer deaf.Close()
	ch, err := fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: deaf, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh})
	require.NoError(t, err)
	defer ch.Close()
	waitFor(t, 10*time.Second, "the Chooser sees both", func() bool { return len(ch.Servers("test")) == 2 })

	require.NoError(t, b.reg.Drain(context.Background()))
	reads := ch.Stats().Reads
	waitFor(t, 10*time.Second, "two reads since Drain returned", func() bool { return ch.Stats().Reads >= reads+2 })
	for range 100 {
		got, err := ch.Choose(fleet.Query{})
		require.NoError(t, err)
		require.Equal(t, []netip.AddrPort{a.addr}, []netip.AddrPort{got[0].Addr}, "the drained server named after a read begun after Drain")
		require.Len(t, got, 1)
	}
	assert.Zero(t, ch.Stats().Events, "the Chooser heard no message")
}

// TestRedisRestartedEmpty: when Redis comes back empty, every live server
// is back in the registry at its next heartbeat, and the Chooser's reads
// and pub/sub recover.
func TestRedisRestartedEmpty(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	a := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "b"})
	be := startBackend(t, rdb, nil)
	waitFor(t, 10*time.Second, "the backend sees both", func() bool { return len(be.ch.Servers("test")) == 2 })

	redisSrv.Restart()
	back := waitFor(t, 10*time.Second, "both servers back in the registry", func() bool {
		return len(listed(rdb)) == 2
	})
	t.Logf("both servers back %v after Redis restarted empty (heartbeat %v)", back.Round(time.Millisecond), testHeartbeat)
	waitFor(t, 10*time.Second, "the backend names both again", func() bool {
		tok, err := fetchToken(context.Background(), be.srv.URL, 1)
		return err == nil && len(named(t, tok)) == 2
	})
	// Pub/sub resubscribed: a drain reaches the backend without a read.
	events := be.ch.Stats().Events
	waitFor(t, 10*time.Second, "a drain after the restart reaches the backend", func() bool {
		require.NoError(t, a.reg.Drain(context.Background()))
		return be.ch.Stats().Events > events
	})
}

// TestRedisDown: while Redis is down the game servers keep serving and
// retry with backoff; the backend serves its last known list for the
// grace period, then answers 503 with Retry-After, and limits rates in
// memory; everything recovers when Redis is back.
func TestRedisDown(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	a := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	lim, err := fleet.NewRateLimiter(rdb, "", 1000, 1000)
	require.NoError(t, err)
	const grace = 2 * time.Second
	be := startBackend(t, rdb, func(c *fleet.ChooserConfig, b *backend.Config) {
		c.Grace = grace
		b.Limiter = lim
	})
	waitFor(t, 10*time.Second, "the backend names a", func() bool { return len(be.ch.Servers("test")) == 1 })
	c := dialDirect(t, 1, a.addr)
	require.NoError(t, echoOnce(c, "up"))
	_, failedBefore := a.reg.Heartbeats()

	redisSrv.Stop()
	stopped := time.Now()
	// The grace period runs from the start of the Chooser's last
	// successful read (ChooserStats.Stale ago), not from the Stop: that
	// read began up to a Refresh before, and longer if its loop was
	// starved or a read was cut off by the Stop. Now taken before Stats,
	// lastRead is that read's start or earlier (no read succeeds after the
	// Stop), which keeps both checks below sound.
	now := time.Now()
	lastRead := now.Add(-be.ch.Stats().Stale)
	// Within the grace period: the last known list.
	tok, err := fetchToken(context.Background(), be.srv.URL, 2)
	if time.Since(lastRead) < grace {
		require.NoError(t, err, "within the grace period")
		assert.Equal(t, []netip.AddrPort{a.addr}, named(t, tok))
	}
	waitFor(t, 10*time.Second, "failed heartbeats", func() bool {
		_, failed := a.reg.Heartbeats()
		return failed >= failedBefore+2
	})
	require.NoError(t, echoOnce(c, "still up"), "the server serves without Redis")
	var es *errStatus
	waitFor(t, grace+10*time.Second, "503 after the grace period", func() bool {
		_, err := fetchToken(context.Background(), be.srv.URL, 3)
		return errors.As(err, &es)
	})
	assert.Equal(t, http.StatusServiceUnavailable, es.code)
	assert.Equal(t, "1", es.retryAfter)
	assert.GreaterOrEqual(t, time.Since(lastRead), grace, "503 before the grace period ended")
	written, failed := a.reg.Heartbeats()
	t.Logf("Redis down %v: %d failed heartbeats at heartbeat %v with backoff (heartbeat/8 doubling to the heartbeat), %d written before", time.Since(stopped).Round(time.Millisecond), failed-failedBefore, testHeartbeat, written)

	redisSrv.Restart()
	waitFor(t, 10*time.Second, "the server back in the registry", func() bool { return listed(rdb)["a"] != nil })
	waitFor(t, 10*time.Second, "the backend answers again", func() bool {
		_, err := fetchToken(context.Background(), be.srv.URL, 4)
		return err == nil
	})
	require.NoError(t, echoOnce(c, "through it all"))
}

// TestRateLimitAcrossReplicas: two backend replicas share one user's rate
// in Redis: together they allow one burst, not one each.
func TestRateLimitAcrossReplicas(t *testing.T) {
	_, rdb := startRedis(t)
	startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	const burst = 5
	var replicas []*tokenBackend
	for range 2 {
		lim, err := fleet.NewRateLimiter(rdb, "", 1, burst)
		require.NoError(t, err)
		replicas = append(replicas, startBackend(t, rdb, func(_ *fleet.ChooserConfig, b *backend.Config) {
			b.Limiter = lim
			b.Rate, b.Burst = 1, burst
		}))
	}
	for _, r := range replicas {
		waitFor(t, 10*time.Second, "the replica names a", func() bool { return len(r.ch.Servers("test")) == 1 })
	}
	start := time.Now()
	ok, limited := 0, 0
	for i := range 40 {
		_, err := fetchToken(context.Background(), replicas[i%2].srv.URL, 42)
		switch statusOf(err) {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			var es *errStatus
			require.ErrorAs(t, err, &es)
			assert.NotEmpty(t, es.retryAfter)
		default:
			t.Fatalf("request %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	// The bucket holds burst and refills at 1/s.
	allowed := burst + int(elapsed.Seconds()) + 1
	t.Logf("2 replicas, burst %d at 1/s: %d of 40 requests allowed in %v (in-memory limits would allow %d)", burst, ok, elapsed.Round(time.Millisecond), 2*burst)
	assert.GreaterOrEqual(t, ok, burst)
	assert.LessOrEqual(t, ok, allowed)
	assert.Equal(t, 40, ok+limited)
	// Another user has their own bucket.
	_, err := fetchToken(context.Background(), replicas[1].srv.URL, 43)
	assert.NoError(t, err)
}

// TestIPv6: a server registered on the IPv6 loopback is named and reached.
func TestIPv6(t *testing.T) {
	if !hasIPv6() {
		t.Skip("no IPv6 loopback on this machine")
	}
	_, rdb := startRedis(t)
	gs := startServer(t, "udp6", fleet.ServerConfig{Client: rdb, ID: "v6"})
	be := startBackend(t, rdb, nil)
	tok, err := fetchToken(context.Background(), be.srv.URL, 1)
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{gs.addr}, named(t, tok))
	c, err := netcode.Dial(tok)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, echoOnce(c, "v6"))
}

// TestChooserQuery: the query hook chooses region, tags and count; a
// region the Chooser does not read, or tags no server has, find none.
func TestChooserQuery(t *testing.T) {
	_, rdb := startRedis(t)
	var eu []netip.AddrPort
	for i := range 3 {
		eu = append(eu, startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: fmt.Sprint("eu", i), Region: "eu", Tags: []string{"ranked"}}).addr)
	}
	us := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "us0", Region: "us"})
	other := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "eu-other", Region: "eu", ProtocolID: protocolID + 1})
	ch, err := fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"eu", "us"}, Count: 2})
	require.NoError(t, err)
	defer ch.Close()
	for _, tc := range []struct {
		q    fleet.Query
		from []netip.AddrPort
		n    int
	}{
		{fleet.Query{}, eu, 2},
		{fleet.Query{Region: "eu", Count: 32}, eu, 3},
		{fleet.Query{Region: "eu", Tags: []string{"ranked"}, Count: 1}, eu, 1},
		{fleet.Query{Region: "us"}, []netip.AddrPort{us.addr}, 1},
		{fleet.Query{Region: "us", Tags: []string{"ranked"}}, nil, 0},
		{fleet.Query{Region: "asia"}, nil, 0},
	} {
		got, err := ch.Choose(tc.q)
		if tc.n == 0 {
			assert.ErrorIs(t, err, backend.ErrNoServers, "%+v", tc.q)
			continue
		}
		require.NoError(t, err, "%+v", tc.q)
		require.Len(t, got, tc.n, "%+v", tc.q)
		for _, s := range got {
			assert.Contains(t, tc.from, s.Addr, "%+v", tc.q)
			assert.NotEqual(t, other.addr, s.Addr, "another protocol id")
		}
	}
	_, err = ch.Choose(fleet.Query{Count: 33})
	assert.Error(t, err)
	require.NoError(t, ch.Close())
	_, err = ch.Choose(fleet.Query{})
	assert.ErrorIs(t, err, fleet.ErrClosed)
}

func TestNewClient(t *testing.T) {
	srv, _ := startRedis(t)
	c, err := fleet.NewClient(srv.URL() + "/0")
	require.NoError(t, err)
	require.NoError(t, c.Ping(context.Background()).Err())
	c.Close()
	for _, u := range []string{
		"redis://127.0.0.1:1?addr=127.0.0.1:2",
		"redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster",
		"unix:///tmp/redis.sock",
	} {
		c, err := fleet.NewClient(u)
		require.NoError(t, err, u)
		c.Close()
	}
	for _, u := range []string{"http://x", "redis+sentinel://127.0.0.1:1", "redis://[bad"} {
		_, err := fleet.NewClient(u)
		assert.Error(t, err, u)
	}
}

// TestListenerDrainedDirectly: a Listener drained without its Server is
// marked draining at the next heartbeat.
func TestListenerDrainedDirectly(t *testing.T) {
	_, rdb := startRedis(t)
	gs := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	require.False(t, listed(rdb)["a"].Draining)
	gs.l.Drain()
	waitFor(t, 10*time.Second, "marked draining by a heartbeat", func() bool {
		e := listed(rdb)["a"]
		return e != nil && e.Draining
	})
}
