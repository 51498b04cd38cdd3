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
// Over a plain TCP connection it can also write without blocking (see
// TryWrite): what the socket does not take at once is kept (left), and the
// next write that may block, or Flush, sends it first, so that the bytes
// go out in order.
//
// Lock order: mu is a leaf; the WebSocket's own write lock is taken
// outside it (its writes come here).
type BatchConn struct {
	net.Conn
	nb *nonblockingWriter // the TCP socket's writes that must not block; nil if none

	mu       sync.Mutex // serializes the connection's writes
	holding  bool
	nonblock bool    // writes must not block: set around a TryWrite
	pending  *[]byte // from batchBufs while holding something
	left     *[]byte // from batchBufs: what a write that must not block left
}

// newBatchConn returns c as a BatchConn, which writes without blocking
// when asked to (see TryWrite) if c is a plain TCP connection.
func newBatchConn(c net.Conn) *BatchConn {
	bc := &BatchConn{Conn: c}
	if tc, ok := c.(*net.TCPConn); ok && nonblockingWrites {
		if raw, err := tc.SyscallConn(); err == nil {
			bc.nb = newNonblockingWriter(raw)
		}
	}
	return bc
}

// Write sends p, or holds it while batching.
func (c *BatchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nonblock {
		return c.writeNow(p)
	}
	if err := c.sendLeft(); err != nil {
		return 0, err
	}
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
	if err := c.sendLeft(); err != nil {
		return err
	}
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

// Release returns the buffers still held (the session ended mid-batch, or
// with bytes a write that must not block left).
func (c *BatchConn) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	putBatchBuf(&c.pending)
	putBatchBuf(&c.left)
}

// putBatchBuf returns *p to the pool, if set, and clears it.
func putBatchBuf(p **[]byte) {
	if *p != nil {
		**p = (**p)[:0]
		batchBufs.Put(*p)
		*p = nil
	}
}

// StartNonblocking makes c's writes until EndNonblocking not block (one
// WebSocket message's): what the socket does not take at once is kept,
// to go out first with the next write that may block or with Flush. It
// reports false, and changes nothing, where c cannot: not a plain TCP
// connection, batching, bytes an earlier such write left still to go, or
// a write in progress (which may be blocked: the WebSocket's reader
// answering a ping, say). Any write that starts before EndNonblocking,
// the reader's included, does not block either, so the caller's message
// waits at most for one that does not block.
func (c *BatchConn) StartNonblocking() bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	if c.nb == nil || c.holding || c.left != nil {
		return false
	}
	c.nonblock = true
	return true
}

// EndNonblocking ends what StartNonblocking began; it reports whether
// bytes were left for Flush.
func (c *BatchConn) EndNonblocking() (left bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nonblock = false
	return c.left != nil
}

// writeNow writes p without blocking, keeping what the socket does not
// take in c.left (all of p, after what an earlier one left). mu is held.
func (c *BatchConn) writeNow(p []byte) (int, error) {
	if c.left != nil {
		*c.left = append(*c.left, p...)
		return len(p), nil
	}
	n, err := c.nb.write(p)
	if err != nil {
		return n, err
	}
	if n < len(p) {
		c.left = batchBufs.Get().(*[]byte)
		*c.left = append(*c.left, p[n:]...)
	}
	return len(p), nil
}

// sendLeft sends what a write that must not block left, if anything. mu
// is held.
func (c *BatchConn) sendLeft() error {
	if c.left == nil {
		return nil
	}
	_, err := c.Conn.Write(*c.left)
	putBatchBuf(&c.left)
	return err
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
	u.conn = newBatchConn(c)
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
