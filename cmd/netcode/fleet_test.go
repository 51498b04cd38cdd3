package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/internal/testing/redistest"
)

// registryRow is the row of server id in what "netcode fleet" lists of
// the registry at url (with args), or "", and the whole listing.
func registryRow(t *testing.T, url, id string, args ...string) (string, string) {
	t.Helper()
	code, out, errs := cli(t, append([]string{"fleet", "-registry", url}, args...)...)
	require.Equal(t, 0, code, errs)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == id {
			return line, out
		}
	}
	return "", out
}

// TestServeRegistryAndFleet: `serve -registry` registers the server with
// its region and tags, `fleet` lists it, a signal marks it draining while
// a client stays, and it leaves the registry when it stops.
func TestServeRegistryAndFleet(t *testing.T) {
	redisSrv := redistest.Start(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	code, _, errs := cli(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, code, errs)

	ready, opsAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	serveReady = func(a net.Addr) { ready <- a }
	opsReady = func(a net.Addr) { opsAddr <- a }
	defer func() { serveReady, opsReady = nil, nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-key", keyFile, "-max-clients", "8",
			"-registry", redisSrv.URL(), "-region", "eu", "-tags", "ranked,map=dust", "-id", "s1", "-drain", "30s",
			"-metrics", "127.0.0.1:0"}, &bytes.Buffer{}, &serr)
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case c := <-done:
		t.Fatalf("serve exited with %d: %s", c, serr.String())
	}
	fleetRow := func(args ...string) (string, string) {
		t.Helper()
		return registryRow(t, redisSrv.URL(), "s1", args...)
	}
	row, out := fleetRow()
	require.NotEmpty(t, row, "registered before serve is ready:\n%s", out)
	assert.True(t, strings.HasPrefix(out, "REGION"), out)
	for _, want := range []string{"eu", addr.String(), "0x6e6574636f646531", "0/8", "ready", netcode.Version, "ranked,map=dust"} {
		assert.Contains(t, row, want)
	}
	assert.Contains(t, out, "\n1 server in 1 region, 0 of 8 slots taken, 0 draining\n")
	row, _ = fleetRow("-region", "us")
	assert.Empty(t, row, "another region")
	resp, err := http.Get("http://" + (<-opsAddr).String() + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), "netcode_fleet_heartbeats_total", "the registration's metrics beside the server's")
	assert.Contains(t, string(body), "netcode_fleet_draining 0")

	code, tok, errs := cli(t, "token", "-key", keyFile, "-server", addr.String(), "-client-id", "7")
	require.Equal(t, 0, code, errs)
	c, err := netcode.Dial([]byte(tok))
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { row, _ := fleetRow("-region", "eu"); return strings.Contains(row, "1/8") },
		10*time.Second, 20*time.Millisecond, "the heartbeat carries the client")

	cancel() // as SIGTERM: drain, with the client still connected
	require.Eventually(t, func() bool { row, _ := fleetRow(); return strings.Contains(row, "draining") },
		10*time.Second, 20*time.Millisecond, "marked draining")
	require.NoError(t, c.Close())
	select {
	case code := <-done:
		assert.Equal(t, 0, code, serr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop once its client left")
	}
	row, out = fleetRow()
	assert.Empty(t, row, "removed when serve stopped:\n%s", out)
	assert.Contains(t, serr.String(), "registered in the fleet")

	code, _, errs = cli(t, "fleet")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "netcode fleet: -registry is required")
	code, _, errs = cli(t, "serve", "-key", keyFile, "-addr", "127.0.0.1:0", "-registry", redisSrv.URL(), "-tags", "a b")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "tag")
}

// TestServeRegistryUnreachable: with Redis down, serve says so once (WARN)
// and never that it registered, serves, and a clean stop after the drain
// exits 0: the entry it could not remove expires by itself, which a
// warning says.
func TestServeRegistryUnreachable(t *testing.T) {
	redisSrv := redistest.Start(t)
	redisSrv.Stop() // its port now refuses
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServe(t, ctx, loopback.Family{Network: "udp4", Addr: "127.0.0.1:0"}, "-registry", redisSrv.URL(), "-id", "s3")
	c, err := s.dial(t, "7")
	require.NoError(t, err, "serving without the registry")
	require.NoError(t, c.Close())
	cancel() // as SIGTERM
	assert.Equal(t, 0, s.wait(t), s.logs.String())
	logs := s.logs.String()
	assert.Contains(t, logs, "level=WARN msg=\"registry unreachable")
	assert.NotContains(t, logs, "registered in the fleet")
	assert.Contains(t, logs, "its entry expires within the TTL")
	assert.NotContains(t, logs, "level=ERROR")
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":            "redis://127.0.0.1:6379",
		"redis://:hunter2@127.0.0.1:6379/0": "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://me:hunter2@host:6380":     "rediss://me:xxxxx@host:6380",
		"redis://me@host:6380":              "redis://me@host:6380",
	} {
		assert.Equal(t, want, redactURL(in))
	}
}

// TestFleetBench runs `netcode fleet bench` small, against one node and
// the 3-master Cluster: every request answered, the figures printed, and
// its servers gone afterwards.
func TestFleetBench(t *testing.T) {
	for name, url := range map[string]func() string{
		"one node":             func() string { return redistest.Start(t).URL() },
		"3 masters 3 replicas": func() string { return redistest.StartReplicatedCluster(t).URL() },
	} {
		t.Run(name, func(t *testing.T) {
			u := url()
			code, out, errs := cli(t, "fleet", "bench", "-registry", u, "-servers", "50", "-shards", "4", "-rate", "200", "-duration", "500ms")
			require.Equal(t, 0, code, errs)
			t.Log(out)
			assert.Contains(t, out, "registered 50 servers in 4 shards")
			assert.Regexp(t, `\n100 token requests in .* 0 failed\n`, out)
			for _, want := range []string{"choice:  p50 ", "request: p50 ", "commands per token", "heartbeats/s"} {
				assert.Contains(t, out, want)
			}
			code, out, errs = cli(t, "fleet", "-registry", u, "-prefix", "netcode:fleetbench")
			require.Equal(t, 0, code, errs)
			assert.Contains(t, out, "0 servers in 1 region", "the bench's servers removed")
		})
	}
	code, _, errs := cli(t, "fleet", "bench")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "-registry is required")
}
