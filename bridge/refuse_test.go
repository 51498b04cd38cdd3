package bridge_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
)

// TestRefusedWhenFull checks how a session past MaxSessions is refused, in
// both modes, over real sockets: the 101 response carries RefusedHeader,
// the WebSocket is closed at once with 1013 and ErrBridgeFull as the
// reason, and a Go transport client's dial fails with ErrBridgeFull rather
// than a handshake timeout.
func TestRefusedWhenFull(t *testing.T) {
	relay := func(t *testing.T) (string, func() error) {
		srv := newServer(t, 4, true)
		cfg := allowOnly(srv)
		cfg.MaxSessions = 1
		_, url := newBridge(t, cfg)
		open(t, url, srv.token(t, 5))
		return url, nil
	}
	transportMux := func(t *testing.T) (string, func() error) {
		s := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{MaxSessions: 1})
		s.DialWS(t)
		return s.URL, func() error {
			d := netcode.Dialer{ListenPacket: transport.ListenPacket(s.URL, nil)}
			c, err := d.DialContext(bridgetest.Ctx(t, 30*time.Second), s.Token(t))
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	full := transport.Subprotocol + ".full"
	tests := []struct {
		name   string
		offer  []string
		agreed string // the refusal's subprotocol
		// full returns the URL of a bridge with MaxSessions 1 and one
		// session open, and a netcode dial through it (nil for none).
		full func(t *testing.T) (url string, dial func() error)
	}{
		{"relay", []string{bridge.Subprotocol}, bridge.Subprotocol, relay},
		{"transport", []string{transport.Subprotocol}, transport.Subprotocol, transportMux},
		// What DialTransport offers: the refusal agrees to ".full", which
		// tells a client that cannot read the header (a browser's).
		{"transport, offering full", []string{transport.Subprotocol, full}, full, transportMux},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, dialNetcode := tt.full(t)

			ws, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{
				Subprotocols: tt.offer,
			})
			require.NoError(t, err, "refused after the upgrade, so that browsers see the code")
			defer ws.CloseNow()
			assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			assert.Equal(t, "full", resp.Header.Get(bridge.RefusedHeader))
			assert.Equal(t, tt.agreed, ws.Subprotocol())
			ce := bridgetest.Closed(t, ws, 5*time.Second)
			assert.Equal(t, bridge.CodeBridgeFull, ce.Code)
			assert.Equal(t, websocket.StatusTryAgainLater, ce.Code)
			assert.Equal(t, bridge.ErrBridgeFull.Error(), ce.Reason)

			if dialNetcode != nil {
				_, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
				require.ErrorIs(t, err, bridge.ErrBridgeFull)
				assert.ErrorIs(t, dialNetcode(), bridge.ErrBridgeFull, "named at once, not a handshake timeout")
			}
		})
	}
}
