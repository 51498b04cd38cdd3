package bridge_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/token"
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
		`SUBPROTOCOL = "([^"]+)"`:             bridge.Subprotocol,
		`CONNECT_TOKEN_BYTES = (\d+)`:         strconv.Itoa(token.ConnectTokenBytes),
		`MAX_PAYLOAD_BYTES = (\d+)`:           strconv.Itoa(netcode.MaxPayloadBytes),
		`DEFAULT_MAX_BUFFERED_AMOUNT = (\d+)`: strconv.Itoa(1 << 20),
		`BACKPRESSURE = "([^"]+)"`:            "backpressure",
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

// backpressureScript drives the module (./netcode.mjs) in Node with a fake
// WebSocket whose bufferedAmount only grows until drained, and prints what
// happened as JSON.
const backpressureScript = `
import { connect, NetcodeError, BACKPRESSURE, DEFAULT_MAX_BUFFERED_AMOUNT } from "./netcode.mjs";

let last = null;
globalThis.WebSocket = class {
  static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
  constructor(url, protocol) {
    this.readyState = 0;
    this.bufferedAmount = 0;
    this.token = false;
    last = this;
    queueMicrotask(() => { this.readyState = 1; this.onopen(); });
  }
  send(b) {
    if (!this.token) { // the connect token: answered at once, not counted
      this.token = true;
      queueMicrotask(() => this.onmessage({ data: '{"type":"connected","clientIndex":1,"maxClients":4}' }));
      return;
    }
    this.bufferedAmount += b.byteLength;
  }
  close(code) { this.readyState = 3; this.onclose({ code, reason: "" }); }
};

// fill sends 1200-byte payloads until send throws; it returns how many went
// and what was thrown.
function fill(s, max) {
  let sent = 0;
  for (; sent < max; sent++) {
    try { s.send(new Uint8Array(1200)); } catch (e) {
      return { sent, name: e.name, code: e.code, netcode: e instanceof NetcodeError, buffered: s.bufferedAmount, open: s.open };
    }
  }
  return { sent, buffered: s.bufferedAmount, open: s.open };
}

const token = new Uint8Array(2048);
const out = {};
let s = await connect("ws://bridge.test/relay", token);
out.defaultLimit = s.maxBufferedAmount === DEFAULT_MAX_BUFFERED_AMOUNT;
out.first = fill(s, 100000);
last.bufferedAmount = 0; // drained
out.afterDrain = fill(s, 1);
s.close();

s = await connect("ws://bridge.test/relay", token, { maxBufferedAmount: 4096 });
out.small = fill(s, 100000);
s.close();
s = await connect("ws://bridge.test/relay", token, { maxBufferedAmount: Infinity });
out.unbounded = fill(s, 10000);
s.close();
for (const bad of [0, 1199, -1, NaN, "1000000"]) {
  try { await connect("ws://bridge.test/relay", token, { maxBufferedAmount: bad }); out["bad " + bad] = "connected"; }
  catch (e) { out["bad " + bad] = e.name; }
}
out.backpressure = BACKPRESSURE;
console.log(JSON.stringify(out));
`

// TestJSBackpressure runs the module in Node, if it is installed, to check
// that send refuses payloads past options.maxBufferedAmount.
func TestJSBackpressure(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "netcode.mjs"), bridge.JS(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.mjs"), []byte(backpressureScript), 0o644))
	cmd := exec.Command(node, "test.mjs")
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "%s", stderr)

	type fill struct {
		Sent     int
		Name     string
		Code     string
		Netcode  bool
		Buffered int
		Open     bool
	}
	var res struct {
		DefaultLimit bool
		First        fill
		AfterDrain   fill
		Small        fill
		Unbounded    fill
		Backpressure string
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	var all map[string]any
	require.NoError(t, json.Unmarshal(out, &all))

	assert.True(t, res.DefaultLimit)
	refused := func(sent int) fill {
		return fill{Sent: sent, Name: "Backpressure", Code: "backpressure", Netcode: true, Buffered: sent * 1200, Open: true}
	}
	assert.Equal(t, refused((1<<20)/1200), res.First, "default limit: 1 MiB")
	assert.Equal(t, fill{Sent: 1, Buffered: 1200, Open: true}, res.AfterDrain, "sends again once drained")
	assert.Equal(t, refused(4096/1200), res.Small, "maxBufferedAmount 4096")
	assert.Equal(t, fill{Sent: 10000, Buffered: 10000 * 1200, Open: true}, res.Unbounded, "maxBufferedAmount Infinity")
	for _, bad := range []string{"0", "1199", "-1", "NaN", "1000000"} {
		assert.Equal(t, "RangeError", all["bad "+bad], "maxBufferedAmount %s", bad)
	}
	assert.Equal(t, "backpressure", res.Backpressure)
}
