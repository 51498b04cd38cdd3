package bench

// The simulated browser of the relay modes: a WebSocket that carries one
// payload per message each way, after the token.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coder/websocket"
	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
)

// relayEndpoint is a browser of the relay: one WebSocket message per
// payload each way.
type relayEndpoint struct {
	ws *websocket.Conn
}

// dialWebSocket connects a browser to the plain echo server of websocket
// mode: the same WebSocket as the relay's, with nothing to say first.
func dialWebSocket(ctx context.Context, url string) (*relayEndpoint, error) {
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(netcode.MaxPayloadBytes)
	return &relayEndpoint{ws: ws}, nil
}

// dialRelay connects a browser to the relay at url as the JS client does:
// the token as the first binary message, then the "connected" text
// message.
func dialRelay(ctx context.Context, url string, tok []byte) (*relayEndpoint, error) {
	e, err := dialWebSocket(ctx, url)
	if err != nil {
		return nil, err
	}
	ws := e.ws
	if err := ws.Write(ctx, websocket.MessageBinary, tok); err != nil {
		ws.CloseNow()
		return nil, err
	}
	typ, msg, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	if typ != websocket.MessageText || !json.Valid(msg) || !strings.Contains(string(msg), `"connected"`) {
		ws.CloseNow()
		return nil, fmt.Errorf("bench: the relay's first message is %q, not connected", msg)
	}
	return e, nil
}

// Read reads one message into b. A text message (the relay sends none
// after "connected") reads as 0 bytes.
func (e *relayEndpoint) Read(b []byte) (int, error) {
	typ, rd, err := e.ws.Reader(context.Background())
	if err != nil {
		return 0, err
	}
	n, err := io.ReadFull(rd, b)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// The message was shorter than b: all of it is read.
	case err != nil:
		return 0, err
	default: // b is full: the message must end here
		var one [1]byte
		if m, err := rd.Read(one[:]); m > 0 || !errors.Is(err, io.EOF) {
			return 0, errors.New("bench: message larger than the read buffer")
		}
	}
	if typ != websocket.MessageBinary {
		return 0, nil
	}
	return n, nil
}

// Write sends b as one binary message.
func (e *relayEndpoint) Write(b []byte) (int, error) {
	if err := e.ws.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close drops the connection without a close handshake, as a closed tab
// does.
func (e *relayEndpoint) Close() error { return e.ws.CloseNow() }
