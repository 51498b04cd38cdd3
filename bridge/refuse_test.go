package bridge_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
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
		s := newMuxServer(t, 4, transport.MuxConfig{MaxSessions: 1})
		s.dialWS(t)
		return s.url, func() error {
			d := netcode.Dialer{ListenPacket: transport.ListenPacket(s.url, nil)}
			c, err := d.DialContext(ctxT(t, 30*time.Second), s.token(t))
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

			ws, resp, err := websocket.Dial(ctxT(t, 5*time.Second), url, &websocket.DialOptions{
				Subprotocols: tt.offer,
			})
			require.NoError(t, err, "refused after the upgrade, so that browsers see the code")
			defer ws.CloseNow()
			assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			assert.Equal(t, "full", resp.Header.Get(bridge.RefusedHeader))
			assert.Equal(t, tt.agreed, ws.Subprotocol())
			ce := closed(t, ws, 5*time.Second)
			assert.Equal(t, bridge.CodeBridgeFull, ce.Code)
			assert.Equal(t, websocket.StatusTryAgainLater, ce.Code)
			assert.Equal(t, bridge.ErrBridgeFull.Error(), ce.Reason)

			if dialNetcode != nil {
				_, err := transport.Dial(ctxT(t, 5*time.Second), url, nil)
				require.ErrorIs(t, err, bridge.ErrBridgeFull)
				assert.ErrorIs(t, dialNetcode(), bridge.ErrBridgeFull, "named at once, not a handshake timeout")
			}
		})
	}
}

// TestTransportConnRefusedLater checks the refusal a browser's client sees:
// no header (a browser hides them), only the close with 1013. Reads then
// fail with an error wrapping both net.ErrClosed and ErrBridgeFull.
func TestTransportConnRefusedLater(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{transport.Subprotocol}})
		if err != nil {
			return
		}
		ws.Close(bridge.CodeBridgeFull, bridge.ErrBridgeFull.Error())
	}))
	defer hs.Close()
	c, err := transport.Dial(ctxT(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = c.ReadFrom(make([]byte, 64))
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.ErrorIs(t, err, bridge.ErrBridgeFull)
}

// TestDialTransportRefused503: past the refusals a bridge makes with a
// WebSocket, it answers HTTP 503 with RefusedHeader; DialTransport names
// that ErrBridgeFull too, and any other failed upgrade not.
func TestDialTransportRefused503(t *testing.T) {
	tests := []struct {
		name    string
		header  bool
		refused bool
	}{
		{"refused", true, true},
		{"other 503", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header {
					w.Header().Set(bridge.RefusedHeader, "full")
				}
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}))
			defer hs.Close()
			_, err := transport.Dial(ctxT(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
			require.Error(t, err)
			assert.Equal(t, tt.refused, errors.Is(err, bridge.ErrBridgeFull), "%v", err)
		})
	}
}

// TestDialTransportSubprotocols: what a browser's Go client has to go by
// (no headers) is the subprotocol the server agreed to: ".full" is a
// refusal for the cap, ErrBridgeFull; none is a server that does not speak
// the transport.
func TestDialTransportSubprotocols(t *testing.T) {
	tests := []struct {
		name    string
		agree   []string
		refused bool
	}{
		{"full", []string{transport.Subprotocol + ".full"}, true},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: tt.agree}) // no header
				if err != nil {
					return
				}
				ws.Close(bridge.CodeBridgeFull, bridge.ErrBridgeFull.Error())
			}))
			defer hs.Close()
			_, err := transport.Dial(ctxT(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
			require.Error(t, err)
			assert.Equal(t, tt.refused, errors.Is(err, bridge.ErrBridgeFull), "%v", err)
			if !tt.refused {
				assert.ErrorContains(t, err, "did not agree to subprotocol")
			}
		})
	}
}
