package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/internal/testing/redistest"
)

// startCuteServe runs "netcode cute serve -metrics" with args, as
// startServe runs serve.
func startCuteServe(t *testing.T, ctx context.Context, f loopback.Family, args ...string) *served {
	t.Helper()
	return startServed(t, ctx, []string{"cute"}, append([]string{"serve", "-net", f.Network, "-addr", f.Addr}, args...)...)
}

// cuteDial mints a token for the served Cute server and dials it.
func (s *served) cuteDial(t *testing.T, clientID string) (*cute.Conn, error) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "tok")
	code, _, errs := cli(t, "cute", "token", "-key", s.keyFile, "-app", "7", "-server", s.udp.String(), "-client-id", clientID, "-o", tf)
	require.Equal(t, 0, code, errs)
	tok, err := readTokenSize(context.Background(), tf, cute.ConnectTokenBytes)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cute.DialContext(ctx, tok)
}

// TestCuteServeRegistry: `cute serve -registry` registers the Cute server
// by its application id (fleet.CuteSource), the heartbeat carries its
// player, a signal marks it draining while the player stays, and it leaves
// the registry when it stops (real Redis, real UDP).
func TestCuteServeRegistry(t *testing.T) {
	redisSrv := redistest.Start(t)
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	f := loopback.Families[0]
	s := startCuteServe(t, ctx, f, "-max-clients", "8", "-registry", redisSrv.URL(), "-region", "eu", "-id", "c1", "-drain", "30s")
	fleetRow := func() (string, string) {
		t.Helper()
		return registryRow(t, redisSrv.URL(), "c1")
	}
	row, out := fleetRow()
	require.NotEmpty(t, row, "registered before cute serve is ready:\n%s", out)
	for _, want := range []string{"eu", s.udp.String(), "0x7", "0/8", "ready"} {
		assert.Contains(t, row, want)
	}
	_, body := s.get(t, "/metrics")
	assert.Contains(t, body, "netcode_fleet_heartbeats_total", "the registration's metrics beside the server's")

	c, err := s.cuteDial(t, "1")
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { row, _ := fleetRow(); return strings.Contains(row, "1/8") },
		10*time.Second, 20*time.Millisecond, "the heartbeat carries the player")

	signal() // as SIGTERM: drain, with the player still connected
	require.Eventually(t, func() bool { row, _ := fleetRow(); return strings.Contains(row, "draining") },
		10*time.Second, 20*time.Millisecond, "marked draining")
	_, err = s.cuteDial(t, "2")
	require.ErrorIs(t, err, cute.ErrConnectionDenied)
	require.NoError(t, c.Close())
	assert.Equal(t, 0, s.wait(t), s.logs.String())
	row, out = fleetRow()
	assert.Empty(t, row, "removed when cute serve stopped:\n%s", out)
	assert.Contains(t, s.logs.String(), "registered in the fleet")
}
