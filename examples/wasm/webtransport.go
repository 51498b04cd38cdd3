//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/gonetcode/netcode/internal/packetq"
)

// wtConn is the client side of the end-to-end encrypted transport over
// the browser's WebTransport: a net.PacketConn whose every datagram is
// one netcode packet in one WebTransport datagram, to a transport.Mux's
// WebTransport endpoint. Like transport.Conn over a WebSocket, it sends
// whatever the address, and attributes the server's datagrams to the
// address last written to.
//
// A datagram is unreliable and unordered: a lost one holds nothing back.
// It is also bounded: WriteTo refuses a packet over the session's
// maxDatagramSize with an error rather than hand it to the browser, which
// would drop it without a word.
type wtConn struct {
	wt       js.Value // the WebTransport
	writer   js.Value // its datagrams' writer
	url      string
	q        *packetq.Queue // the server's datagrams; ended with the session
	closed   atomic.Bool
	readDone chan struct{}
	server   atomic.Pointer[netip.AddrPort]

	mu        sync.Mutex
	lastWrite js.Value // the promise of the last datagram written; Close waits for it
}

// errTooBig is WriteTo's error for a packet over the datagram limit.
var errTooBig = errors.New("netcode/wasm: packet over the WebTransport session's datagram limit")

// dialWebTransport opens a WebTransport session to url (https://, with
// its port). certHashes, if any, are the SHA-256 hashes of the server's
// self-signed development certificates, pinned with
// serverCertificateHashes. It fails when the browser has no WebTransport,
// or the endpoint does not answer before ctx ends.
func dialWebTransport(ctx context.Context, url string, certHashes [][]byte) (*wtConn, error) {
	ctor := js.Global().Get("WebTransport")
	if ctor.Type() != js.TypeFunction {
		return nil, errors.New("netcode/wasm: this browser has no WebTransport")
	}
	opts := js.Global().Get("Object").New()
	opts.Set("requireUnreliable", true)
	if len(certHashes) > 0 {
		pins := js.Global().Get("Array").New()
		for _, ch := range certHashes {
			h := js.Global().Get("Object").New()
			h.Set("algorithm", "sha-256")
			h.Set("value", bytesToJS(ch))
			pins.Call("push", h)
		}
		opts.Set("serverCertificateHashes", pins)
	}
	var wt js.Value
	if err := catch(func() { wt = ctor.New(url, opts) }); err != nil {
		return nil, fmt.Errorf("netcode/wasm: WebTransport %s: %w", url, err)
	}
	wt.Get("closed").Call("catch", js.FuncOf(func(js.Value, []js.Value) any { return nil })) // observed by the reader
	if _, err := await(ctx, wt.Get("ready")); err != nil {
		catch(func() { wt.Call("close") })
		return nil, fmt.Errorf("netcode/wasm: WebTransport %s: %w", url, err)
	}
	c := &wtConn{
		wt:       wt,
		writer:   wt.Get("datagrams").Get("writable").Call("getWriter"),
		url:      url,
		q:        packetq.New(256),
		readDone: make(chan struct{}),
	}
	go c.reader()
	return c, nil
}

// reader feeds the server's datagrams to the read queue until the session
// ends, then ends the queue with an error wrapping net.ErrClosed.
func (c *wtConn) reader() {
	defer close(c.readDone)
	r := c.wt.Get("datagrams").Get("readable").Call("getReader")
	buf := make([]byte, 65536)
	var err error
	for {
		var v js.Value
		v, err = await(context.Background(), r.Call("read"))
		if err != nil {
			break
		}
		if v.Get("done").Bool() {
			err = errors.New("session closed")
			break
		}
		p := v.Get("value")
		n := js.CopyBytesToGo(buf, p)
		if n > 0 && n == p.Get("byteLength").Int() {
			c.q.Push(netip.AddrPort{}, buf[:n]) // full: dropped, as by a full socket buffer
		}
	}
	c.q.End(fmt.Errorf("%w: WebTransport %s: %w", net.ErrClosed, c.url, err))
}

// MaxDatagramSize is the largest datagram the session carries now.
func (c *wtConn) MaxDatagramSize() int {
	return c.wt.Get("datagrams").Get("maxDatagramSize").Int()
}

func (c *wtConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "webtransport", Addr: wtAddr(c.url), Err: err}
}

// ReadFrom reads one datagram from the server.
func (c *wtConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, _, err := c.q.Read(b)
	if err != nil {
		return 0, nil, c.opError("read", err)
	}
	var addr netip.AddrPort
	if p := c.server.Load(); p != nil {
		addr = *p
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

// WriteTo sends b as one datagram, or fails, naming the limit, if it is
// larger than the session's maxDatagramSize.
func (c *wtConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if limit := c.MaxDatagramSize(); len(b) > limit {
		return 0, c.opError("write", fmt.Errorf("%w: %d bytes, at most %d", errTooBig, len(b), limit))
	}
	if u, ok := addr.(*net.UDPAddr); ok {
		ap := u.AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if p := c.server.Load(); p == nil || *p != ap {
			c.server.Store(&ap)
		}
	}
	var err error
	if e := catch(func() {
		// Not awaited, as a UDP send is not: the promise settles when
		// the browser has sent the datagram or dropped it as too old.
		p := c.writer.Call("write", bytesToJS(b))
		c.mu.Lock()
		c.lastWrite = p
		c.mu.Unlock()
	}); e != nil {
		err = e
	}
	if err != nil {
		return 0, c.opError("write", err)
	}
	return len(b), nil
}

// Close ends the session, once the datagrams written are sent (a
// client's disconnect packets come just before; the browser drops what
// is queued when the session closes) or a second has passed, and waits
// for the reader.
func (c *wtConn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	c.mu.Lock()
	last := c.lastWrite
	c.mu.Unlock()
	if last.Truthy() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		await(ctx, last) // rejected: the session ended anyway
		cancel()
	}
	c.q.Close()
	catch(func() { c.wt.Call("close") })
	<-c.readDone
	return nil
}

// LocalAddr returns the session's URL as a net.Addr of network
// "webtransport".
func (c *wtConn) LocalAddr() net.Addr { return wtAddr(c.url) }

// SetDeadline sets the read deadline; writes do not block.
func (c *wtConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline sets the deadline for ReadFrom.
func (c *wtConn) SetReadDeadline(t time.Time) error {
	c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline does nothing: a write never blocks.
func (c *wtConn) SetWriteDeadline(time.Time) error { return nil }

type wtAddr string

func (a wtAddr) Network() string { return "webtransport" }
func (a wtAddr) String() string  { return string(a) }

func bytesToJS(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}

// await waits for a JavaScript promise, or for ctx.
func await(ctx context.Context, p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	var then, fail js.Func
	settle := func(r result) {
		ch <- r
		then.Release() // the promise settles once: neither is called again
		fail.Release()
	}
	then = js.FuncOf(func(_ js.Value, args []js.Value) any {
		var v js.Value
		if len(args) > 0 {
			v = args[0]
		}
		settle(result{v: v})
		return nil
	})
	fail = js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "rejected"
		if len(args) > 0 {
			msg = args[0].Call("toString").String()
		}
		settle(result{err: errors.New(msg)})
		return nil
	})
	p.Call("then", then, fail)
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return js.Value{}, ctx.Err()
	}
}

// catch runs f, turning a JavaScript exception into an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	f()
	return nil
}
