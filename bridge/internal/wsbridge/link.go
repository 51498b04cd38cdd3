package wsbridge

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/token"
)

// Link is a session's connection to its peer, as the relay's sessions and
// the Mux's see it: a WebSocket (WSLink) or a WebTransport session
// (package bridge/webtransport). One message is one datagram: a netcode
// payload for the relay, a netcode packet for the Mux.
type Link interface {
	// Read reads one message into buf. n == len(buf) means it was
	// longer than len(buf)-1 bytes (the rest is not read). A message of
	// the wrong kind (a WebSocket text message) is ErrText.
	Read(buf []byte) (n int, err error)
	// Write sends one message. It may block: the session's watchdog
	// bounds it with the write timeout.
	Write(p []byte) error
	// Hold and Flush gather the writes between them into one write to
	// the connection where the link can (a WebSocket's); elsewhere they
	// do nothing.
	Hold()
	Flush() error
	// ReadEnd is the close code and reason a session ends with when Read
	// failed with err.
	ReadEnd(err error) (websocket.StatusCode, string)
	// CloseBy bounds what is still to come, the close included: every
	// read and write in progress or later fails once t has passed.
	CloseBy(t time.Time)
	// Close ends the link, telling the peer code and reason; it returns
	// once the close is done or CloseBy's bound has passed.
	Close(code websocket.StatusCode, reason string)
	// Cut ends the link at once, whatever it is doing, without blocking.
	Cut()
	// Release frees what a batch held; no write may be in progress.
	Release()
	// CheckWrite returns a *TooBigError if an n-byte message is larger
	// than Write can send now (a WebTransport datagram), nil otherwise.
	CheckWrite(n int) error
}

// DirectLink is a Link that can write a message without blocking, from
// any goroutine, where its connection allows (a WebSocket over plain TCP):
// a Mux's send path writes through it while its session's writer is idle,
// rather than waking the writer for every datagram.
type DirectLink interface {
	Link
	// TryWrite writes p as one message without blocking: ok reports
	// whether it did (false: nothing was written, queue it), left whether
	// part of it waits for a Flush, which must come before any other
	// write. It must not run at the same time as another write on the
	// link.
	TryWrite(p []byte) (ok, left bool, err error)
}

var _ DirectLink = WSLink{}

// RelayLink is a Link of the relay, whose connect token and "connected"
// message travel apart from the payloads on some links (a WebTransport
// session's stream; a WebSocket carries all of them as messages).
type RelayLink interface {
	Link
	// ReadToken reads the connect token into buf, which has room for
	// one byte more than a token (n == len(buf) means a longer message);
	// a message of the wrong kind is ErrText. It then readies Read for
	// payloads of up to netcode.MaxPayloadBytes.
	ReadToken(buf []byte) (n int, err error)
	// WriteText sends the "connected" message (JSON).
	WriteText(p []byte) error
}

// bg is the context of a link's writes: none bounds them (the watchdog
// does), which costs nothing per write.
var bg = context.Background()

// ErrText is Read's and ReadToken's error for a message of the wrong kind:
// a WebSocket text message.
var ErrText = errors.New("netcode/bridge: text message")

// WSLink is the Link of a WebSocket over its BatchConn.
type WSLink struct {
	WS *websocket.Conn
	BC *BatchConn
}

var _ RelayLink = WSLink{}

// Read implements Link.
func (l WSLink) Read(buf []byte) (int, error) {
	typ, n, err := ReadMessage(l.WS, buf)
	if err == nil && typ != websocket.MessageBinary {
		return 0, ErrText
	}
	return n, err
}

// ReadToken implements RelayLink.
func (l WSLink) ReadToken(buf []byte) (int, error) {
	l.WS.SetReadLimit(token.ConnectTokenBytes)
	n, err := l.Read(buf)
	l.WS.SetReadLimit(netcode.MaxPayloadBytes + 1)
	return n, err
}

// Write implements Link: one binary message.
func (l WSLink) Write(p []byte) error { return l.WS.Write(bg, websocket.MessageBinary, p) }

// TryWrite writes p as one binary message without blocking, where the
// connection allows it (see BatchConn.StartNonblocking): ok reports
// whether it did, left whether bytes wait for Flush; err is the write's.
// Implements DirectLink.
func (l WSLink) TryWrite(p []byte) (ok, left bool, err error) {
	if !l.BC.StartNonblocking() {
		return false, false, nil
	}
	err = l.WS.Write(bg, websocket.MessageBinary, p)
	return true, l.BC.EndNonblocking(), err
}

// WriteText implements RelayLink: one text message.
func (l WSLink) WriteText(p []byte) error { return l.WS.Write(bg, websocket.MessageText, p) }

// Hold implements Link.
func (l WSLink) Hold() { l.BC.Hold() }

// Flush implements Link.
func (l WSLink) Flush() error { return l.BC.Flush() }

// ReadEnd implements Link.
func (l WSLink) ReadEnd(err error) (websocket.StatusCode, string) { return ReadEnd(err) }

// CloseBy implements Link.
func (l WSLink) CloseBy(t time.Time) { l.BC.CloseBy(t) }

// Close implements Link: the close handshake.
func (l WSLink) Close(code websocket.StatusCode, reason string) { l.WS.Close(code, reason) }

// Cut implements Link.
func (l WSLink) Cut() { l.BC.Cut() }

// Release implements Link.
func (l WSLink) Release() { l.BC.Release() }

// CheckWrite implements Link: a WebSocket message has no limit of its
// own.
func (l WSLink) CheckWrite(int) error { return nil }

// CloseLink closes l with code and reason within CloseTimeout. A batch in
// progress (see Hold) is sent first, by the same deadline, so that the
// close is not held behind it while l waits for the peer's.
func CloseLink(l Link, code websocket.StatusCode, reason string) {
	l.CloseBy(time.Now().Add(CloseTimeout))
	_ = l.Flush()
	l.Close(code, reason)
}
