package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
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
