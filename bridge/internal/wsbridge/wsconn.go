package wsbridge

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The connection under a session's WebSocket, on the bridge's side (the
// relay's and the Mux's): writes that can be held back and sent together.

var batchBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, BatchBytes)
	return &b
}}

// BatchConn is a session's connection. While batching (between hold and
// Flush), what the WebSocket writes is appended to a pooled buffer instead
// of going out, and flush sends it in one write: several messages, one
// system call.
//
// Lock order: mu is a leaf; the WebSocket's own write lock is taken
// outside it (its writes come here).
type BatchConn struct {
	net.Conn

	mu      sync.Mutex // serializes the connection's writes
	holding bool
	pending *[]byte // from batchBufs while holding something
}

// Write sends p, or holds it while batching.
func (c *BatchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		if c.pending == nil {
			c.pending = batchBufs.Get().(*[]byte)
		}
		if len(*c.pending)+len(p) > cap(*c.pending) {
			if err := c.flushLocked(); err != nil {
				return 0, err
			}
			c.pending = batchBufs.Get().(*[]byte)
		}
		if len(p) <= cap(*c.pending) {
			*c.pending = append(*c.pending, p...)
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// Hold starts a batch: writes are held until flush.
func (c *BatchConn) Hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

// Flush ends a batch, sending what it held in one write.
func (c *BatchConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	return c.flushLocked()
}

// flushLocked sends what is held and returns the buffer to the pool.
func (c *BatchConn) flushLocked() error {
	p := c.pending
	if p == nil {
		return nil
	}
	c.pending = nil
	var err error
	if len(*p) > 0 {
		_, err = c.Conn.Write(*p)
	}
	*p = (*p)[:0]
	batchBufs.Put(p)
	return err
}

// Release returns a buffer still held (the session ended mid-batch).
func (c *BatchConn) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	if c.pending != nil {
		*c.pending = (*c.pending)[:0]
		batchBufs.Put(c.pending)
		c.pending = nil
	}
}

// CloseWS closes ws, over c, with code and reason, and returns within
// CloseTimeout: the connection's deadline bounds the close handshake, and
// every read or write on it still in progress, after which they fail and
// ws closes the connection. (A timer calling CloseNow would not do: it
// does nothing while a Close is in progress.)
//
// A batch in progress (see Hold) is sent first, by the same deadline, so
// that the close frame is not held behind it while ws waits for the peer's.
func CloseWS(ws *websocket.Conn, c *BatchConn, code websocket.StatusCode, reason string) {
	c.CloseBy(time.Now().Add(CloseTimeout))
	_ = c.Flush()
	ws.Close(code, reason)
}

// CloseBy sets the connection's deadline for the close: every read and
// write, and those in progress, fail once t has passed.
func (c *BatchConn) CloseBy(t time.Time) { _ = c.Conn.SetDeadline(t) }

// Cut closes the TCP connection at once, whatever its WebSocket is doing:
// a read or write in progress fails, and so does the close handshake,
// after which the WebSocket is closed. It never blocks, unlike CloseNow,
// which waits for a Close in progress.
func (c *BatchConn) Cut() { _ = c.Conn.Close() }

// Buffer sizes of a session's WebSocket. A frame of the bridge (a message
// of up to 1300 bytes and its header, a close frame) fits in the write
// buffer, so that a message is one write to the BatchConn. Reads of a
// message larger than the read buffer go around it.
const (
	wsReadBuffer  = 1024
	wsWriteBuffer = 2048
)

// upgrader is the http.ResponseWriter handed to websocket.Accept: its
// Hijack gives the WebSocket a BatchConn to write to, and buffers of
// its own, smaller than net/http's 4 KiB ones, which go with net/http's
// connection once the handler returns (the session runs on without it).
type upgrader struct {
	http.ResponseWriter
	conn *BatchConn // set by Hijack
}

// Hijack implements http.Hijacker over the ResponseWriter's own.
func (u *upgrader) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(u.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		c.Close()
		return nil, nil, err
	}
	u.conn = &BatchConn{Conn: c}
	br := brw.Reader
	if br.Buffered() == 0 {
		// Nothing read past the request (a client waits for the 101).
		br = bufio.NewReaderSize(u.conn, wsReadBuffer)
	}
	return u.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(u.conn, wsWriteBuffer)), nil
}

// Accept upgrades the request to a WebSocket over a BatchConn.
func Accept(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*websocket.Conn, *BatchConn, error) {
	u := &upgrader{ResponseWriter: w}
	ws, err := websocket.Accept(u, r, opts)
	if err != nil {
		return nil, nil, err
	}
	return ws, u.conn, nil
}
