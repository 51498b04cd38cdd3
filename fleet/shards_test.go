package fleet_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/fleet"
)

// shardKey names shard i of region "test".
func shardKey(i int) string {
	if i == 0 {
		return "netcode:fleet:{test}:servers"
	}
	return fmt.Sprintf("netcode:fleet:{test,%d}:servers", i)
}

// shardCounts returns how many servers each of the first n shards holds.
func shardCounts(t *testing.T, rdb redis.UniversalClient, n int) []int {
	t.Helper()
	var out []int
	for i := range n {
		fields, err := rdb.HKeys(context.Background(), shardKey(i)).Result()
		require.NoError(t, err)
		c := 0
		for _, f := range fields {
			if f != "{shards}" {
				c++
			}
		}
		out = append(out, c)
	}
	return out
}

// loadedFleet registers n servers of 64 slots in region "test", ids s1
// and on, server i (from 0) with 8×i clients, at 127.0.0.1:42001 and on.
func loadedFleet(t *testing.T, rdb redis.UniversalClient, n int) []*fleet.Server {
	t.Helper()
	return simFleet(t, rdb, n, 42001, 8)
}

// TestShards: a region split in 4 shards spreads its servers over them,
// and the Chooser, reading every shard, names the least loaded across
// them, in order. On one node and on the 3-master Cluster.
func TestShards(t *testing.T) {
	t.Parallel() // as the Cluster tests: mostly waiting on Redis
	t.Run("one node", func(t *testing.T) {
		_, rdb := startRedis(t)
		testShards(t, rdb)
	})
	t.Run("3 masters 3 replicas", func(t *testing.T) {
		_, rdb, _ := startClusterFleet(t)
		testShards(t, rdb)
	})
}

func testShards(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	require.NoError(t, fleet.SetShards(ctx, rdb, "", "test", 4))
	n, prev, err := fleet.ReadShards(ctx, rdb, "", "test")
	require.NoError(t, err)
	assert.Equal(t, [2]int{4, 1}, [2]int{n, prev})
	loadedFleet(t, rdb, 8)
	counts := shardCounts(t, rdb, 4)
	used := 0
	for _, c := range counts {
		if c > 0 {
			used++
		}
	}
	assert.GreaterOrEqual(t, used, 2, "servers spread over the shards: %v", counts)
	ch, err := fleet.NewChooser(ctx, fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh, Count: 8})
	require.NoError(t, err)
	defer ch.Close()
	got, err := ch.Choose(fleet.Query{})
	require.NoError(t, err)
	var ports []int
	for _, s := range got {
		ports = append(ports, int(s.Addr.Port()))
	}
	// The startClusterFleet servers (udp, 0 clients) come too on the
	// Cluster; the simulated ones follow in load order.
	var sim []int
	for _, p := range ports {
		if p >= 42001 && p < 42009 {
			sim = append(sim, p)
		}
	}
	assert.Equal(t, []int{42001, 42002, 42003, 42004, 42005, 42006, 42007, 42008}[:len(sim)], sim, "least loaded first, across shards")
	assert.GreaterOrEqual(t, len(sim), 5)
	infos, err := fleet.List(ctx, rdb, "", "test")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(infos), 8, "List reads every shard")
	regions, err := fleet.Regions(ctx, rdb, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"test"}, regions, "a shard is not a region")
}

// TestReshard: the shard count changes while the fleet runs (4, 7, 2, 1):
// every server moves to its new shard at its next heartbeat, and the
// Chooser, reading the old shards as well as the new until told
// otherwise, never misses a server for more than one read.
func TestReshard(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	const servers = 12
	regs := loadedFleet(t, rdb, servers)
	ch, err := fleet.NewChooser(ctx, fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh})
	require.NoError(t, err)
	defer ch.Close()
	waitFor(t, 10*time.Second, "the Chooser sees every server", func() bool { return len(ch.Servers("test")) == servers })

	done := make(chan struct{})
	worst := make(chan uint64, 1)
	go func() {
		var maxReads, since uint64
		missing := false
		for {
			select {
			case <-done:
				worst <- maxReads
				return
			case <-time.After(2 * time.Millisecond):
			}
			reads := ch.Stats().Reads
			switch n := len(ch.Servers("test")); {
			case n < servers && !missing:
				missing, since = true, reads
			case n == servers && missing:
				missing = false
				maxReads = max(maxReads, reads-since)
			}
		}
	}()
	for _, n := range []int{4, 7, 2, 1} {
		require.NoError(t, fleet.SetShards(ctx, rdb, "", "test", n))
		// Every server in its shard (FNV-1a of its id, mod n), and in
		// no other.
		waitFor(t, 10*time.Second, fmt.Sprintf("every server moved to %d shards", n), func() bool {
			total := 0
			for _, c := range shardCounts(t, rdb, 8) {
				total += c
			}
			for i := range servers {
				id := fmt.Sprintf("s%d", i+1)
				h := fnv.New32a()
				h.Write([]byte(id))
				in, err := rdb.HExists(ctx, shardKey(int(h.Sum32()%uint32(n))), id).Result()
				require.NoError(t, err)
				if !in {
					return false
				}
			}
			return total == servers
		})
	}
	close(done)
	reads := <-worst
	t.Logf("resharded 1 → 4 → 7 → 2 → 1 with %d servers: a server missing from the Chooser for at most %d reads (Refresh %v, heartbeat %v)", servers, reads, testRefresh, testHeartbeat)
	assert.LessOrEqual(t, reads, uint64(1), "no server missing for more than one read")
	for _, r := range regs {
		_, failed := r.Heartbeats()
		assert.Zero(t, failed)
	}
	after := ch.Stats().Reads
	waitFor(t, 10*time.Second, "a read begun after the last move", func() bool { return ch.Stats().Reads >= after+2 })
	assert.Len(t, ch.Servers("test"), servers)
}

// failFirstWrite fails, once, the first heartbeat script run on key: a
// write to a server's new shard lost to a Redis call's timeout.
type failFirstWrite struct {
	key    string
	failed atomic.Bool
}

func (h *failFirstWrite) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failFirstWrite) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "evalsha", "eval":
			if slices.Contains(cmd.Args(), any(h.key)) && h.failed.CompareAndSwap(false, true) {
				cmd.SetErr(context.DeadlineExceeded)
				return context.DeadlineExceeded
			}
		}
		return next(ctx, cmd)
	}
}

func (h *failFirstWrite) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReshardWriteFails: a server whose write to its new shard fails
// (a call's timeout, on a loaded Redis) still leaves its old shard once
// a later beat has written the new one, and moves that follow each
// other leave no entry behind. Before, the failed write lost the old
// shard's name, and the entry stayed there for good (TestReshard failed
// so under load: "every server moved to 1 shards").
func TestReshardWriteFails(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	ctx := context.Background()
	id := "s1"
	h := fnv.New32a()
	h.Write([]byte(id))
	to := int(h.Sum32() % 4)
	require.NotZero(t, to, "the test wants s1 to move from shard 0")
	hook := &failFirstWrite{key: shardKey(to)}
	hooked := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	hooked.AddHook(hook)
	defer hooked.Close()
	simFleet(t, hooked, 1, 42001, 0)
	waitFor(t, 10*time.Second, "s1 in shard 0", func() bool { return shardCounts(t, rdb, 1)[0] == 1 })

	require.NoError(t, fleet.SetShards(ctx, rdb, "", "test", 4))
	waitFor(t, 10*time.Second, "the write to the new shard failed once", hook.failed.Load)
	waitFor(t, 10*time.Second, fmt.Sprintf("s1 in shard %d alone", to), func() bool {
		counts := shardCounts(t, rdb, 8)
		return counts[to] == 1 && slices.Equal(slices.Delete(slices.Clone(counts), to, to+1), make([]int, 7))
	})
	require.NoError(t, fleet.SetShards(ctx, rdb, "", "test", 1))
	waitFor(t, 10*time.Second, "s1 back in shard 0 alone", func() bool {
		counts := shardCounts(t, rdb, 8)
		return counts[0] == 1 && slices.Equal(counts[1:], make([]int, 7))
	})
}
