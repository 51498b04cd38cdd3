package wsbridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// WebSocket helpers shared by the relay (Handler), the transport's server
// side (Mux) and its client side (TransportConn).

// Offers reports whether the request Offers the WebSocket subprotocol p.
func Offers(r *http.Request, p string) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for q := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(q) == p {
				return true
			}
		}
	}
	return false
}

// ReadMessage reads one message from ws into buf. n == len(buf) means the
// message did not fit (the rest is not read): give buf one byte more than
// the largest message allowed. A text message is returned unread, with
// n = 0.
func ReadMessage(ws *websocket.Conn, buf []byte) (typ websocket.MessageType, n int, err error) {
	// No deadline on the context: a cancellable one would cost a timer
	// per message. The Watchdog and the session's end (closing the
	// WebSocket) unblock it.
	typ, r, err := ws.Reader(context.Background())
	if err != nil || typ != websocket.MessageBinary {
		return typ, 0, err
	}
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return typ, n, nil
		}
		if err != nil {
			return typ, n, err
		}
	}
	return typ, n, nil
}

// ReadEnd is the close code and reason a session ends with when reading
// from its peer failed with err.
func ReadEnd(err error) (websocket.StatusCode, string) {
	switch {
	case websocket.CloseStatus(err) != -1:
		// The peer closed the WebSocket (the reply is sent already).
		return websocket.CloseStatus(err), ""
	case errors.Is(err, websocket.ErrMessageTooBig):
		return websocket.StatusMessageTooBig, "netcode/bridge: message too big"
	}
	return websocket.StatusGoingAway, "netcode/bridge: connection lost"
}
