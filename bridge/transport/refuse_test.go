package transport_test

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

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/bridge/transport"
)

// TestTransportConnRefusedLater checks the refusal a browser's client sees:
// no header (a browser hides them), only the close with 1013. Reads then
// fail with an error wrapping both net.ErrClosed and ErrBridgeFull.
func TestTransportConnRefusedLater(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{transport.Subprotocol}})
		if err != nil {
			return
		}
		ws.Close(wsbridge.CodeFull, bridge.ErrBridgeFull.Error())
	}))
	defer hs.Close()
	c, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
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
					w.Header().Set(wsbridge.RefusedHeader, "full")
				}
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}))
			defer hs.Close()
			_, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
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
				ws.Close(wsbridge.CodeFull, bridge.ErrBridgeFull.Error())
			}))
			defer hs.Close()
			_, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
			require.Error(t, err)
			assert.Equal(t, tt.refused, errors.Is(err, bridge.ErrBridgeFull), "%v", err)
			if !tt.refused {
				assert.ErrorContains(t, err, "did not agree to subprotocol")
			}
		})
	}
}
