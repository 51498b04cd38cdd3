package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/bridge"
)

// FuzzFirstMessage sends hostile first messages (the connect token slot) to
// a live bridge: the bridge must never panic, must close every such session
// with one of its codes, and must not leak sessions.
func FuzzFirstMessage(f *testing.F) {
	srv := newServer(f, 8, true)
	cfg := allowOnly(srv)
	cfg.HandshakeTimeout = time.Second
	cfg.DialTimeout = 50 * time.Millisecond
	h, url := newBridge(f, cfg)

	good := srv.token(f, 1)
	f.Add(false, good)
	f.Add(false, good[:1024])
	f.Add(false, make([]byte, 2048))
	f.Add(true, []byte(`{"type":"token"}`))
	f.Add(false, []byte{})
	bad := append([]byte(nil), good...)
	bad[1100] ^= 1 // private data: the server ignores the request
	f.Add(false, bad)

	allowed := map[websocket.StatusCode]bool{
		bridge.CodeInvalidConnectToken:       true,
		bridge.CodeServerNotAllowed:          true,
		bridge.CodeHandshakeTimeout:          true,
		bridge.CodeConnectionRequestTimedOut: true,
		bridge.CodeConnectTokenExpired:       true,
		bridge.CodeConnectionDenied:          true,
		websocket.StatusMessageTooBig:        true,
	}
	f.Fuzz(func(t *testing.T, text bool, msg []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		_ = ws.Write(ctx, typ, msg)
		typ, b, err := ws.Read(ctx)
		if err == nil {
			if typ != websocket.MessageText || !strings.HasPrefix(string(b), `{"type":"connected",`) {
				t.Fatalf("unexpected %v message %q", typ, b)
			}
			ws.Close(websocket.StatusNormalClosure, "")
		} else {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("no close frame: %v", err)
			}
			if !allowed[ce.Code] {
				t.Fatalf("close code %d (%q) for a bad first message", ce.Code, ce.Reason)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for h.Sessions() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions left", h.Sessions())
			}
			time.Sleep(time.Millisecond)
		}
	})
}
