package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/protocol"
)

// FuzzMuxMessage sends hostile messages over the WebSocket transport into
// a Mux with a netcode server behind it: nothing may panic, a binary
// message of at most protocol.MaxPacketBytes bytes never ends the session, any
// other message ends it with the documented code, and the server keeps
// serving real clients. Every input costs a WebSocket round trip, so run it
// with a bounded minimization, for example
//
//	go test -run='^$' -fuzz=FuzzMuxMessage -fuzztime=30s -fuzzminimizetime=50x ./bridge/
func FuzzMuxMessage(f *testing.F) {
	s := bridgetest.NewMuxServer(f, 8, transport.MuxConfig{})
	tok := s.Token(f)
	f.Add(false, []byte{})
	f.Add(false, []byte{0})
	f.Add(false, tok[:1078])
	f.Add(false, make([]byte, protocol.MaxPacketBytes))
	f.Add(false, make([]byte, protocol.MaxPacketBytes+1))
	f.Add(true, []byte("hello"))
	for _, p := range []byte{1, 2, 3, 4, 5, 6, 7} {
		f.Add(false, append([]byte{p}, make([]byte, 40)...))
	}

	f.Fuzz(func(t *testing.T, text bool, msg []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, s.URL, &websocket.DialOptions{Subprotocols: []string{transport.Subprotocol}})
		require.NoError(t, err)
		defer ws.CloseNow()
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		require.NoError(t, ws.Write(ctx, typ, msg))
		if !text && len(msg) <= protocol.MaxPacketBytes {
			// The session lives on: it still takes a message, and closes
			// cleanly when asked.
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte{0}))
			require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
			return
		}
		want := websocket.StatusMessageTooBig
		if text {
			want = websocket.StatusUnsupportedData
		}
		for {
			_, _, err := ws.Read(ctx)
			if err == nil {
				continue
			}
			require.Equal(t, want, websocket.CloseStatus(err), "%v", err)
			break
		}
	})
}
