package webtransport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"
	wt "github.com/quic-go/webtransport-go"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/gonetcode/netcode/internal/monoclock"
	"github.com/gonetcode/netcode/internal/packetq"
	dgram "github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// Options configures Dial and DialRelay. The zero value trusts the
// system's roots, as a browser does a production certificate.
type Options struct {
	// TLSConfig is the client's TLS configuration (its RootCAs, for
	// example); nil means the system's roots.
	TLSConfig *tls.Config
	// CertificateHashes pins the server's certificate by its SHA-256
	// hash instead, as a browser's serverCertificateHashes does (a
	// development Server's CertificateHashes or Info): the certificate
	// must have one of them, be valid now, for 14 days at most, with an
	// ECDSA key.
	CertificateHashes [][32]byte
	// ReadQueue is how many received datagrams wait for a read; past it,
	// new ones are dropped. 0 means 256.
	ReadQueue int
}

// client is a WebTransport session of a Go client, with a reader
// goroutine that queues the server's datagrams.
type client struct {
	url      string
	sess     *wt.Session
	q        *packetq.Queue
	max      maxSize
	closed   atomic.Bool
	readDone chan struct{}
}

func (o *Options) tlsConfig() *tls.Config {
	var c *tls.Config
	if o.TLSConfig != nil {
		c = o.TLSConfig.Clone()
	} else {
		c = &tls.Config{}
	}
	if len(o.CertificateHashes) > 0 {
		hashes := o.CertificateHashes
		c.InsecureSkipVerify = true // verified by hash below, as a browser does
		c.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPinned(cs, hashes, time.Now()) }
	}
	return c
}

// verifyPinned checks the server's certificate as a browser checks one
// pinned by serverCertificateHashes.
func verifyPinned(cs tls.ConnectionState, hashes [][32]byte, now time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("netcode/bridge: no server certificate")
	}
	c := cs.PeerCertificates[0]
	h := sha256.Sum256(c.Raw)
	found := false
	for _, p := range hashes {
		found = found || bytes.Equal(h[:], p[:])
	}
	switch {
	case !found:
		return errors.New("netcode/bridge: the server's certificate has none of the pinned hashes")
	case now.Before(c.NotBefore) || now.After(c.NotAfter):
		return errors.New("netcode/bridge: the server's pinned certificate is not valid now")
	case c.NotAfter.Sub(c.NotBefore) > devcert.MaxPinnedValidity:
		return errors.New("netcode/bridge: a pinned certificate may be valid for 14 days at most")
	case c.PublicKeyAlgorithm != x509.ECDSA:
		return errors.New("netcode/bridge: a pinned certificate needs an ECDSA key")
	}
	return nil
}

// dial opens a session to url.
func dial(ctx context.Context, url string, opts *Options) (*client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ReadQueue <= 0 {
		o.ReadQueue = defaultReadQueue
	}
	qc := &quic.Config{
		EnableDatagrams:                  true,
		EnableStreamResetPartialDelivery: true,
		MaxIdleTimeout:                   30 * time.Second,
	}
	if configureQUIC != nil {
		configureQUIC(qc)
	}
	d := &wt.Transport{TLSClientConfig: o.tlsConfig(), QUICConfig: qc}
	rsp, sess, err := d.Dial(ctx, url, nil)
	if rsp != nil && rsp.Header.Get(wsbridge.RefusedHeader) != "" {
		// Over the cap: the session closes with 1013 at once, or the
		// answer was 503. Say so now.
		if sess != nil {
			_ = sess.CloseWithError(0, "")
		}
		err = wsbridge.ErrFull
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "webtransport", Addr: netAddr(url), Err: err}
	}
	c := &client{url: url, sess: sess, q: packetq.New(o.ReadQueue), readDone: make(chan struct{})}
	c.max.init(sess.SendDatagram, monoclock.Now())
	return c, nil
}

// defaultReadQueue is the default of Options.ReadQueue.
const defaultReadQueue = 256

// reader queues the server's datagrams until the session ends, then ends
// the queue with an error wrapping net.ErrClosed and the session's close
// (a websocket.CloseError with the bridge's code and reason; 1013 is
// bridge.ErrBridgeFull).
func (c *client) reader(limit int) {
	defer close(c.readDone)
	var err error
	for {
		var p []byte
		p, err = c.sess.ReceiveDatagram(context.Background())
		if err != nil {
			break
		}
		if len(p) > 0 && len(p) <= limit {
			c.q.Push(netip.AddrPort{}, p) // full: dropped, as by a full socket buffer
		}
	}
	if c.closed.Load() {
		c.q.End(net.ErrClosed)
		return
	}
	err = sessionEnd(c.sess)
	code, reason := endOf(err)
	if code == wsbridge.CodeFull {
		err = wsbridge.ErrFull
	} else if _, ok := errors.AsType[*wt.SessionError](err); ok {
		err = websocket.CloseError{Code: code, Reason: reason}
	}
	c.q.End(fmt.Errorf("%w: %w", net.ErrClosed, err))
}

func (c *client) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "webtransport", Addr: netAddr(c.url), Err: err}
}

// send sends p in one datagram.
func (c *client) send(p []byte) error {
	if c.closed.Load() {
		return c.opError("write", net.ErrClosed)
	}
	if len(p) == 0 {
		return c.opError("write", errors.New("netcode/bridge: empty datagram"))
	}
	if err := c.max.check(len(p), monoclock.Now); err != nil {
		return c.opError("write", err)
	}
	if err := c.sess.SendDatagram(p); err != nil {
		if m, ok := c.max.tooLarge(err); ok {
			err = wsbridge.TooBig(len(p), m)
		}
		return c.opError("write", err)
	}
	return nil
}

// close closes the session (normal closure) and waits for the reader.
func (c *client) close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	c.q.Close()
	_ = c.sess.CloseWithError(0, "")
	<-c.readDone
	return nil
}

// maxDatagram returns the largest datagram the session can send now, as
// QUIC says (it grows once path MTU discovery finds more room; asked again
// at most once a second).
func (c *client) maxDatagram() int { return c.max.current(monoclock.Now()) }

// Conn is the client side of the transport over WebTransport: a
// net.PacketConn over one session to a Server's Mux, each datagram one
// netcode packet. WriteTo sends any datagram whatever the address;
// ReadFrom returns the server's datagrams attributed to the address last
// written to, which is what a netcode client expects of its server. Use
// it as a netcode.Dialer's transport with ListenPacket.
type Conn struct {
	batchHook // the I/O by netip.AddrPort a netcode Dialer finds: connIO

	c      *client
	server atomic.Pointer[netip.AddrPort]
}

// batchHook is the hook a Conn embeds under an unexported name, so that it
// exports neither internal types nor the netip.AddrPort methods only a
// netcode Dialer uses.
type batchHook = dgram.Batched

// connIO is a Conn's allocation-free I/O by netip.AddrPort.
type connIO struct{ c *Conn }

func (io connIO) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return io.c.readFromAddrPort(b)
}

func (io connIO) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return io.c.writeToAddrPort(b, addr)
}

// Dial opens a transport session to url (https://host:port/transport).
// opts may be nil. A Mux that has its MaxSessions open refuses the
// session: the error wraps bridge.ErrBridgeFull, at once.
func Dial(ctx context.Context, url string, opts *Options) (*Conn, error) {
	c, err := dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	go c.reader(protocol.MaxPacketBytes)
	conn := &Conn{c: c}
	conn.batchHook = batchHook{P: connIO{conn}}
	return conn, nil
}

// ListenPacket returns a function for netcode.Dialer.ListenPacket that
// dials url with Dial, so that the netcode client runs over WebTransport.
func ListenPacket(url string, opts *Options) func(ctx context.Context, network, localAddr string) (net.PacketConn, error) {
	return func(ctx context.Context, _, _ string) (net.PacketConn, error) {
		c, err := Dial(ctx, url, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// readFromAddrPort reads one datagram from the server into b (truncated
// if b is short) and returns its length and the address last written to.
// Once the session has ended and the queue is empty, it returns an error
// wrapping net.ErrClosed. A netcode Dialer reaches it through the hook.
func (c *Conn) readFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, _, err := c.c.q.Read(b)
	if err != nil {
		return 0, netip.AddrPort{}, c.c.opError("read", err)
	}
	var a netip.AddrPort
	if p := c.server.Load(); p != nil {
		a = *p
	}
	return n, a, nil
}

// ReadFrom implements net.PacketConn: one datagram from the server, from
// the address last written to (a *net.UDPAddr). Once the session has ended
// and the queue is empty, it returns an error wrapping net.ErrClosed.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := c.readFromAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(a), nil
}

// writeToAddrPort sends b in one datagram and remembers addr as the
// server's address; a netcode Dialer reaches it through the hook.
func (c *Conn) writeToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if p := c.server.Load(); p == nil || *p != addr {
		a := new(netip.AddrPort) // only when the server changes
		*a = addr
		c.server.Store(a)
	}
	if err := c.c.send(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// WriteTo implements net.PacketConn: b in one datagram. A datagram larger
// than the session carries now fails with an error wrapping
// bridge.ErrDatagramTooLarge.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	return c.writeToAddrPort(b, dgram.AddrPortOf(addr))
}

// MaxDatagram returns the largest datagram (netcode packet) the session
// can send now.
func (c *Conn) MaxDatagram() int { return c.c.maxDatagram() }

// LocalAddr returns the session's URL as a net.Addr of network
// "webtransport".
func (c *Conn) LocalAddr() net.Addr { return netAddr(c.c.url) }

// SetDeadline sets the read deadline; writes never block for long (a
// datagram is queued, or dropped by congestion control).
func (c *Conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline sets the deadline for ReadFrom.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline does nothing: see SetDeadline.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

// Close closes the session and waits for its reader goroutine to exit.
// Later calls return an error wrapping net.ErrClosed.
func (c *Conn) Close() error { return c.c.close() }

// RelayConn is a Go client of the relay over WebTransport (as a page's
// netcode.js is): it sends its connect token, then exchanges netcode
// payloads in datagrams.
type RelayConn struct {
	c           *client
	clientIndex int
	maxClients  int
}

// DialRelay opens a relay session to url (https://host:port/relay), sends
// connectToken (2048 bytes) and waits until the bridge has connected to a
// server. opts may be nil.
//
// Its errors are *net.OpError values (Net "webtransport") that wrap:
//
//   - bridge.ErrBridgeFull when the bridge refused the session for its
//     MaxSessions (close code 1013);
//   - when the bridge ended the session before it connected (a token it
//     refused, a server that denied the client, a handshake timeout), the
//     bridge's close code and reason as a websocket.CloseError (package
//     github.com/coder/websocket). The type is WebSocket's although the
//     session is WebTransport's: the relay's close codes (package bridge's
//     documentation, # Close codes) are the same numbers on both transports,
//     carried here as the WebTransport session's error code, so one check,
//     websocket.CloseStatus(err), reads them whichever transport a client
//     used;
//   - otherwise the error of the QUIC or HTTP/3 dial, or of ctx.
func DialRelay(ctx context.Context, url string, connectToken []byte, opts *Options) (*RelayConn, error) {
	if len(connectToken) != token.ConnectTokenBytes {
		return nil, &net.OpError{Op: "dial", Net: "webtransport", Addr: netAddr(url), Err: errors.New("netcode/bridge: a connect token has 2048 bytes")}
	}
	c, err := dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	r := &RelayConn{c: c}
	if err := r.handshake(ctx, connectToken); err != nil {
		end := err
		if c.sess.Context().Err() != nil { // the bridge ended the session
			end = sessionEnd(c.sess)
		}
		_ = c.sess.CloseWithError(0, "")
		code, reason := endOf(end)
		if code != websocket.StatusNormalClosure && code != websocket.StatusGoingAway || reason != "" {
			err = websocket.CloseError{Code: code, Reason: reason}
			if code == wsbridge.CodeFull {
				err = wsbridge.ErrFull
			}
		}
		return nil, c.opError("dial", err)
	}
	go c.reader(maxRelayPayload)
	return r, nil
}

// maxRelayPayload is the largest payload of the relay.
const maxRelayPayload = 1200

// handshake sends the token on a stream and reads the "connected"
// message, the whole of what the bridge writes on it.
func (r *RelayConn) handshake(ctx context.Context, tok []byte) error {
	str, err := r.c.sess.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	if _, err := str.Write(tok); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = str.SetReadDeadline(d)
	}
	msg, err := io.ReadAll(io.LimitReader(str, maxConnected+1))
	if err != nil {
		return err
	}
	r.clientIndex, r.maxClients, err = parseConnected(msg)
	if err != nil {
		return err
	}
	_ = str.Close()
	return nil
}

// maxConnected bounds the relay's "connected" message.
const maxConnected = 256

// parseConnected reads the relay's "connected" message.
func parseConnected(msg []byte) (clientIndex, maxClients int, err error) {
	var m struct {
		Type        string `json:"type"`
		ClientIndex int    `json:"clientIndex"`
		MaxClients  int    `json:"maxClients"`
	}
	if len(msg) > maxConnected || json.Unmarshal(msg, &m) != nil || m.Type != "connected" ||
		m.MaxClients < 1 || m.ClientIndex < 0 || m.ClientIndex >= m.MaxClients {
		return 0, 0, errors.New("netcode/bridge: no connected message from the relay")
	}
	return m.ClientIndex, m.MaxClients, nil
}

// ClientIndex and MaxClients are those the server gave the client.
func (r *RelayConn) ClientIndex() int { return r.clientIndex }

// MaxClients is the server's number of client slots.
func (r *RelayConn) MaxClients() int { return r.maxClients }

// Read reads one payload into b (truncated if b is short). After the
// session has ended it returns an error wrapping net.ErrClosed and the
// bridge's close (a websocket.CloseError, for websocket.CloseStatus).
func (r *RelayConn) Read(b []byte) (int, error) {
	n, _, err := r.c.q.Read(b)
	if err != nil {
		return 0, r.c.opError("read", err)
	}
	return n, nil
}

// Write sends one payload (1 to 1200 bytes) in one datagram. A payload
// larger than the session carries now fails with an error wrapping
// bridge.ErrDatagramTooLarge.
func (r *RelayConn) Write(p []byte) (int, error) {
	if len(p) > maxRelayPayload {
		return 0, r.c.opError("write", errors.New("netcode/bridge: a payload has 1200 bytes at most"))
	}
	if err := r.c.send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// SetReadDeadline sets the deadline for Read.
func (r *RelayConn) SetReadDeadline(t time.Time) error {
	r.c.q.SetReadDeadline(t)
	return nil
}

// MaxDatagram returns the largest payload the session can send now.
func (r *RelayConn) MaxDatagram() int { return r.c.maxDatagram() }

// Close closes the session and waits for its reader goroutine to exit.
func (r *RelayConn) Close() error { return r.c.close() }

// netAddr is the net.Addr of a session's URL.
type netAddr string

func (a netAddr) Network() string { return "webtransport" }
func (a netAddr) String() string  { return string(a) }
