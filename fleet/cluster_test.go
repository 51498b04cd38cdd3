package fleet_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/testing/redistest"
)

// TestCluster runs the registry through a redis.ClusterClient against a
// real Redis Cluster (one node holding every slot): the scripts' keys,
// the regions' scan over every master, pub/sub and the rate limit all go
// through the Cluster's routing.
func TestCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	rdb, err := fleet.NewClient(srv.ClusterURL())
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
