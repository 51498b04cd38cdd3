package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
)

// TestJSCloseCodes checks that the browser module names every close code
// the bridge sends, with the names of the Go constants.
func TestJSCloseCodes(t *testing.T) {
	src := string(bridge.JS())
	block := regexp.MustCompile(`(?s)CLOSE_CODES = Object\.freeze\(\{(.*?)\}\)`).FindStringSubmatch(src)
	require.NotNil(t, block, "CLOSE_CODES not found in netcode.js")
	names := map[websocket.StatusCode]string{}
	for _, m := range regexp.MustCompile(`(\d+):\s*"(\w+)"`).FindAllStringSubmatch(block[1], -1) {
		code, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		names[websocket.StatusCode(code)] = m[2]
	}
	want := map[websocket.StatusCode]string{
		bridge.CodeDisconnected:               "Disconnected",
		bridge.CodeConnectionDenied:           "ConnectionDenied",
		bridge.CodeConnectTokenExpired:        "ConnectTokenExpired",
		bridge.CodeInvalidConnectToken:        "InvalidConnectToken",
		bridge.CodeConnectionRequestTimedOut:  "ConnectionRequestTimedOut",
		bridge.CodeConnectionResponseTimedOut: "ConnectionResponseTimedOut",
		bridge.CodeConnectionTimedOut:         "ConnectionTimedOut",
		bridge.CodeServerNotAllowed:           "ServerNotAllowed",
		bridge.CodeHandshakeTimeout:           "HandshakeTimeout",
		bridge.CodeIdleTimeout:                "IdleTimeout",
		websocket.StatusNormalClosure:         "Closed",
		websocket.StatusGoingAway:             "GoingAway",
		websocket.StatusUnsupportedData:       "UnsupportedData",
		websocket.StatusAbnormalClosure:       "ConnectionLost",
		websocket.StatusPolicyViolation:       "PolicyViolation",
		websocket.StatusMessageTooBig:         "MessageTooBig",
		websocket.StatusInternalError:         "InternalError",
		websocket.StatusTryAgainLater:         "TryAgainLater",
	}
	assert.Equal(t, want, names)

	for pattern, value := range map[string]string{
		`SUBPROTOCOL = "([^"]+)"`:     bridge.Subprotocol,
		`CONNECT_TOKEN_BYTES = (\d+)`: strconv.Itoa(netcode.ConnectTokenBytes),
		`MAX_PAYLOAD_BYTES = (\d+)`:   strconv.Itoa(netcode.MaxPayloadBytes),
	} {
		m := regexp.MustCompile(pattern).FindStringSubmatch(src)
		require.NotNil(t, m, pattern)
		assert.Equal(t, value, m[1], pattern)
	}
}

func TestJSHandler(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		bridge.JSHandler().ServeHTTP(rec, httptest.NewRequest(method, "/netcode.js", nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "text/javascript; charset=utf-8", rec.Header().Get("Content-Type"))
		assert.Equal(t, strconv.Itoa(len(bridge.JS())), rec.Header().Get("Content-Length"))
		if method == http.MethodGet {
			assert.Equal(t, bridge.JS(), rec.Body.Bytes())
		} else {
			assert.Zero(t, rec.Body.Len())
		}
	}
	// JS returns a copy.
	b := bridge.JS()
	b[0] ^= 0xff
	assert.NotEqual(t, b[0], bridge.JS()[0])
}
