package fleet_test

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/testing/redistest"
)

// TestCluster runs the registry through a redis.ClusterClient against a
// real Redis Cluster, of one node holding every slot and of three masters
// with a replica each: the scripts' keys, the regions' scan over every
// master, pub/sub and the rate limit all go through the Cluster's routing.
func TestCluster(t *testing.T) {
	t.Parallel() // each has its own Redis; most of their time is waiting on it
	t.Run("one node", func(t *testing.T) { clusterScenario(t, redistest.StartCluster(t).ClusterURL()) })
	t.Run("3 masters 3 replicas", func(t *testing.T) { clusterScenario(t, redistest.StartReplicatedCluster(t).URL()) })
}

func clusterScenario(t *testing.T, url string) {
	rdb, err := fleet.NewClient(url)
	require.NoError(t, err)
	defer rdb.Close()
	_, isCluster := rdb.(*redis.ClusterClient)
	require.True(t, isCluster, "a Cluster URL makes a ClusterClient")

	eu := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "eu1", Region: "eu"})
	us := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "us1", Region: "us"})
	ch, err := fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"eu", "us"}, Refresh: testRefresh})
	require.NoError(t, err)
	defer ch.Close()
	for region, want := range map[string]netip.AddrPort{"eu": eu.addr, "us": us.addr} {
		got, err := ch.Choose(fleet.Query{Region: region})
		require.NoError(t, err, region)
		require.Len(t, got, 1)
		assert.Equal(t, want, got[0].Addr)
	}
	regions, err := fleet.Regions(context.Background(), rdb, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"eu", "us"}, regions)

	events := ch.Stats().Events
	require.NoError(t, eu.reg.Drain(context.Background()))
	waitFor(t, 10*time.Second, "the drain message through the Cluster", func() bool { return ch.Stats().Events > events })
	_, err = ch.Choose(fleet.Query{Region: "eu"})
	assert.Error(t, err, "the drained server is the region's only one")

	lim, err := fleet.NewRateLimiter(rdb, "", 1, 2)
	require.NoError(t, err)
	for i, want := range []bool{true, true, false} {
		ok, _, err := lim.Allow(context.Background(), 9)
		require.NoError(t, err)
		assert.Equal(t, want, ok, "request %d", i)
	}
}

// fleetLoad is a fleet at work on a Cluster: three registered servers in
// region "test", a Chooser and a rate limiter, driven by run's loop.
type fleetLoad struct {
	servers []*gameServer
	ch      *fleet.Chooser
	lim     *fleet.RateLimiter
}

// startClusterFleet starts a Cluster of 3 masters and 3 replicas, a
// client of it, and a fleet at work on it.
func startClusterFleet(t *testing.T) (*redistest.Cluster, redis.UniversalClient, *fleetLoad) {
	t.Helper()
	c := redistest.StartReplicatedCluster(t)
	rdb, err := fleet.NewClient(c.URL())
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	return c, rdb, startFleetLoad(t, rdb)
}

func startFleetLoad(t *testing.T, rdb redis.UniversalClient) *fleetLoad {
	t.Helper()
	f := &fleetLoad{}
	for _, id := range []string{"a", "b", "c"} {
		// The default TTL: a failover (NodeTimeout and an election) must
		// not outlast it.
		f.servers = append(f.servers, startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: id, TTL: fleet.DefaultTTL}))
	}
	var err error
	f.ch, err = fleet.NewChooser(context.Background(), fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh})
	require.NoError(t, err)
	t.Cleanup(func() { f.ch.Close() })
	f.lim, err = fleet.NewRateLimiter(rdb, "", 1000, 1000)
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "the Chooser sees the three servers", func() bool { return len(f.ch.Servers("test")) == 3 })
	return f
}

// loadReport is what the loop saw.
type loadReport struct {
	rounds, chooseErrors, limitErrors int
	// missing is the longest time the Chooser listed fewer than three
	// servers; limitGap the longest run of failing rate-limit calls;
	// readGap the longest time without a successful region read.
	missing, limitGap, readGap time.Duration
}

// start runs the loop until the function it returns is called, which
// returns what the loop saw.
func (f *fleetLoad) start() func() loadReport {
	done := make(chan struct{})
	report := make(chan loadReport, 1)
	go func() { report <- f.run(done) }()
	return func() loadReport {
		close(done)
		return <-report
	}
}

// run chooses, rate-limits and watches the Chooser every 10 ms until done
// is closed.
func (f *fleetLoad) run(done <-chan struct{}) loadReport {
	var r loadReport
	var missingSince, limitSince time.Time
	lastOK, lastReads := time.Now(), f.ch.Stats()
	for {
		select {
		case <-done:
			return r
		case <-time.After(10 * time.Millisecond):
		}
		now := time.Now()
		r.rounds++
		if _, err := f.ch.Choose(fleet.Query{}); err != nil {
			r.chooseErrors++
		}
		if n := len(f.ch.Servers("test")); n < 3 && missingSince.IsZero() {
			missingSince = now
		} else if n == 3 && !missingSince.IsZero() {
			r.missing = max(r.missing, now.Sub(missingSince))
			missingSince = time.Time{}
		}
		if _, _, err := f.lim.Allow(context.Background(), uint64(r.rounds)); err != nil {
			r.limitErrors++
			if limitSince.IsZero() {
				limitSince = now
			}
		} else if !limitSince.IsZero() {
			r.limitGap = max(r.limitGap, now.Sub(limitSince))
			limitSince = time.Time{}
		}
		st := f.ch.Stats()
		if st.Reads-st.ReadErrors > lastReads.Reads-lastReads.ReadErrors {
			lastOK = now
		}
		r.readGap = max(r.readGap, now.Sub(lastOK))
		lastReads = st
	}
}

// TestClusterFailover: SIGKILL the master that holds region "test"; its
// replica takes over within the node timeout (and an election), and
// meanwhile the Chooser answers every token from its copy, heartbeats
// resume, and the rate limit falls back to memory and back to Redis.
func TestClusterFailover(t *testing.T) {
	t.Parallel() // each has its own Redis; most of their time is waiting on it
	c, rdb, f := startClusterFleet(t)
	slot := c.Slot("netcode:fleet:{test}:servers")
	master, _ := c.MasterOf(slot)
	require.NotNil(t, master)

	stop := f.start()
	beats := make([]uint64, len(f.servers))
	for i, s := range f.servers {
		beats[i], _ = s.reg.Heartbeats()
	}
	master.Stop() // SIGKILL
	killed := time.Now()
	promoted := waitFor(t, 30*time.Second, "a replica promoted for the region's slot", func() bool {
		m, _ := c.MasterOf(slot)
		return m != nil && m != master
	})
	for i, s := range f.servers {
		waitFor(t, 30*time.Second, "heartbeats written again", func() bool { w, _ := s.reg.Heartbeats(); return w > beats[i]+1 })
	}
	waitFor(t, 30*time.Second, "the rate limit in Redis again", func() bool {
		_, _, err := f.lim.Allow(context.Background(), 1<<40)
		return err == nil
	})
	recovered := time.Since(killed)
	time.Sleep(4 * testRefresh) // let the loop see a few reads after the recovery
	r := stop()
	t.Logf("master killed: replica promoted after %v (cluster-node-timeout %v); fleet recovered after %v; %d rounds: %d failed choices, servers missing for at most %v, no successful read for at most %v, rate limit in memory for at most %v (%d calls)",
		promoted.Round(time.Millisecond), redistest.NodeTimeout, recovered.Round(time.Millisecond), r.rounds, r.chooseErrors, r.missing.Round(time.Millisecond),
		r.readGap.Round(time.Millisecond), r.limitGap.Round(time.Millisecond), r.limitErrors)
	assert.Zero(t, r.chooseErrors, "tokens through the failover: the Chooser's grace covers it")
	assert.Len(t, listed(rdb), 3, "every server in the registry after the failover")
	c.WaitHealthy(30 * time.Second)
}

// TestClusterSlotMigration: the region's slot moves to another master
// (IMPORTING, MIGRATING, MIGRATE, SETSLOT NODE) while servers heartbeat,
// the Chooser reads and the rate limit runs: no token refused, every
// server stays, and the region is then served by the new master.
func TestClusterSlotMigration(t *testing.T) {
	t.Parallel() // each has its own Redis; most of their time is waiting on it
	c, rdb, f := startClusterFleet(t)
	slot := c.Slot("netcode:fleet:{test}:servers")

	stop := f.start()
	time.Sleep(4 * testRefresh)
	dst := c.MigrateSlot(slot)
	reads := f.ch.Stats()
	waitFor(t, 10*time.Second, "reads from the new master", func() bool {
		st := f.ch.Stats()
		return st.Reads-st.ReadErrors > reads.Reads-reads.ReadErrors+4
	})
	r := stop()
	t.Logf("slot %d migrated: %d rounds, %d failed choices, servers missing for at most %v, no successful read for at most %v, %d rate-limit errors",
		slot, r.rounds, r.chooseErrors, r.missing.Round(time.Millisecond), r.readGap.Round(time.Millisecond), r.limitErrors)
	m, _ := c.MasterOf(slot)
	assert.Equal(t, dst, m)
	assert.Zero(t, r.chooseErrors)
	assert.Zero(t, r.missing, "no server missing")
	assert.Len(t, listed(rdb), 3)
	keys, err := c.Do(dst, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot))
	require.NoError(t, err)
	assert.Equal(t, "1", keys, "the region's hash lives on the new master")
}
