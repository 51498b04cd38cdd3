package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/fleet"
)

// TestCollectors: the registry's and the backend's metrics, as scraped.
func TestCollectors(t *testing.T) {
	_, rdb := startRedis(t)
	gs := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	be := startBackend(t, rdb, nil)
	waitFor(t, 10*time.Second, "the backend sees a", func() bool { return len(be.ch.Servers("test")) == 1 })
	_, err := be.ch.Choose(fleet.Query{})
	require.NoError(t, err)
	_, err = be.ch.Choose(fleet.Query{Tags: []string{"none"}})
	require.Error(t, err)
	require.NoError(t, gs.reg.Drain(context.Background()))

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fleet.NewServerCollector(gs.reg, prometheus.Labels{"server": "a"}), fleet.NewChooserCollector(be.ch, nil))
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP netcode_fleet_draining 1 once the server is marked draining in the registry.
# TYPE netcode_fleet_draining gauge
netcode_fleet_draining{server="a"} 1
# HELP netcode_fleet_chooser_choices_total Token requests answered with servers (ChooserStats.Choices).
# TYPE netcode_fleet_chooser_choices_total counter
netcode_fleet_chooser_choices_total 1
# HELP netcode_fleet_chooser_no_servers_total Token requests that found no server, answered 503 (ChooserStats.NoServers).
# TYPE netcode_fleet_chooser_no_servers_total counter
netcode_fleet_chooser_no_servers_total 1
# HELP netcode_fleet_chooser_servers Live servers in the Chooser's regions as last read (ChooserStats.Servers).
# TYPE netcode_fleet_chooser_servers gauge
netcode_fleet_chooser_servers 1
# HELP netcode_fleet_chooser_refused_entries_total Registry entries skipped as malformed or outside the protocol's limits, counted at each read (ChooserStats.Refused).
# TYPE netcode_fleet_chooser_refused_entries_total counter
netcode_fleet_chooser_refused_entries_total 0
# HELP netcode_fleet_chooser_conflicts_total Registry entries claiming another server's id, and ids switching back to an earlier registration (ChooserStats.Conflicts).
# TYPE netcode_fleet_chooser_conflicts_total counter
netcode_fleet_chooser_conflicts_total 0
# HELP netcode_fleet_heartbeat_conflicts_total Heartbeats that found the server's entry written by another registration of its id (Server.Conflicts): two writers claim the id.
# TYPE netcode_fleet_heartbeat_conflicts_total counter
netcode_fleet_heartbeat_conflicts_total{server="a"} 0
`), "netcode_fleet_draining", "netcode_fleet_chooser_choices_total", "netcode_fleet_chooser_no_servers_total", "netcode_fleet_chooser_servers",
		"netcode_fleet_chooser_refused_entries_total", "netcode_fleet_chooser_conflicts_total", "netcode_fleet_heartbeat_conflicts_total"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 13, n, "every metric")
	written, _ := gs.reg.Heartbeats()
	assert.Positive(t, written)
}
