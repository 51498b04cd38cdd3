package bridge_test

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/stretchr/testify/require"
)

// TestRelayConnsOnWheel checks that a relay's sessions run their netcode
// Conns' timers and their watchdogs on the Handler's one wheel, and that
// they work there:
// idle for 3 s, past the token's 2 s timeout, every session stays connected
// (the keep-alives went out on time) and echoes; once they end, nothing
// is left armed.
func TestRelayConnsOnWheel(t *testing.T) {
	srv := newServer(t, 8, true)
	cfg := allowOnly(srv)
	h, url := newBridge(t, cfg)
	const n = 3
	var wss []*websocket.Conn
	for range n {
		ws, _ := open(t, url, srv.token(t, 2))
		wss = append(wss, ws)
	}
	require.Equal(t, 2*n, bridge.WheelArmed(h), "each session's Conn and watchdog have their timers on the wheel")
	time.Sleep(3 * time.Second) // past the timeout: only keep-alives keep them up
	ctx := bridgetest.Ctx(t, 5*time.Second)
	for _, ws := range wss {
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("still here")))
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, "still here", string(b))
		require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
	}
	require.Eventually(t, func() bool { return h.Sessions() == 0 && bridge.WheelArmed(h) == 0 }, 5*time.Second, time.Millisecond,
		"an ended session left its timer armed")
}
