package reliable

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/deadline"
)

// Stream is an ordered, reliable, flow-controlled byte stream over a
// MessageConn: a net.Conn for code written for TCP (net/http, bufio,
// io.Copy), at any size.
//
// Write queues up to a send buffer and blocks while it is full, which
// happens when the peer reads slower than the writer writes. Close sends
// an end of stream, waits (up to Config.Linger) until the peer has
// acknowledged everything written, then closes the message connection;
// the peer reads what was written and then io.EOF. If the message
// connection ends first, Read fails with an error wrapping
// io.ErrUnexpectedEOF and Write with io.ErrClosedPipe. Deadlines behave as in package net.
type Stream struct {
	cn *conn
	// readMu and writeMu serialise Reads and Writes; each is taken before
	// conn.mu.
	readMu  sync.Mutex
	writeMu sync.Mutex
	rd, wd  deadline.Deadline
}

// NewStream starts a stream over mc, which it owns from now on. Both ends
// of mc must run a Stream.
func NewStream(mc MessageConn, cfg *Config) (*Stream, error) {
	r, err := cfg.resolve(true)
	if err != nil {
		return nil, err
	}
	return newStream(mc, r)
}

func newStream(mc MessageConn, r *resolved) (*Stream, error) {
	cn, err := start(mc, r)
	if err != nil {
		return nil, err
	}
	return &Stream{cn: cn}, nil
}

// Read reads up to len(b) bytes of the stream.
func (s *Stream) Read(b []byte) (int, error) {
	cn := s.cn
	cs := &cn.c.chans[0]
	s.readMu.Lock()
	defer s.readMu.Unlock()
	for {
		if cn.closing.Load() {
			return 0, cn.opErr("read", net.ErrClosed)
		}
		if s.rd.Expired() {
			return 0, cn.opErr("read", os.ErrDeadlineExceeded)
		}
		if len(b) == 0 {
			return 0, nil
		}
		cn.mu.Lock()
		r := &cs.rcv
		if r.ready > 0 {
			n := r.read(b, true)
			if r.advertise || r.tuneDue() {
				cn.c.readDone(time.Now(), r)
			}
			cn.unlock()
			return n, nil
		}
		if r.atEOF() {
			cn.unlock()
			return 0, io.EOF
		}
		err := cn.ended()
		cn.unlock()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errUnexpectedEOF
			}
			return 0, cn.endErr("read", err)
		}
		if err := cn.wait(cs.readable, &s.rd); err != nil {
			return 0, cn.opErr("read", err)
		}
	}
}

// Write writes b to the stream, blocking while the send buffer is full.
// On a deadline it returns how much was queued with an error wrapping
// os.ErrDeadlineExceeded.
func (s *Stream) Write(b []byte) (int, error) {
	cn := s.cn
	cs := &cn.c.chans[0]
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	n := 0
	for {
		if cn.closing.Load() {
			return n, cn.opErr("write", net.ErrClosed)
		}
		if s.wd.Expired() {
			return n, cn.opErr("write", os.ErrDeadlineExceeded)
		}
		cn.mu.Lock()
		if err := cn.ended(); err != nil {
			cn.unlock()
			if errors.Is(err, io.EOF) {
				err = io.ErrClosedPipe
			}
			return n, cn.endErr("write", err)
		}
		if cs.snd.finWanted {
			cn.unlock()
			return n, cn.opErr("write", ErrWriteClosed)
		}
		if k := min(cs.snd.room(), len(b)-n); k > 0 {
			cs.snd.write(b[n : n+k])
			n += k
			cn.c.setTime(time.Now())
			cn.c.flush()
		}
		if n < len(b) {
			cs.snd.waitRoom(len(b)-n, true)
		}
		cn.unlock()
		if n == len(b) {
			return n, nil
		}
		if err := cn.wait(cs.writable, &s.wd); err != nil {
			return n, cn.opErr("write", err)
		}
	}
}

// CloseWrite ends the stream in the write direction: the peer reads
// io.EOF after the data written so far; this end can still read.
func (s *Stream) CloseWrite() error {
	cn := s.cn
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cn.mu.Lock()
	defer cn.unlock()
	if err := cn.ended(); err != nil || cn.closing.Load() {
		return cn.endErr("close", err)
	}
	cn.c.chans[0].snd.finWanted = true
	cn.c.setTime(time.Now())
	cn.c.flush()
	return nil
}

// Close ends the stream as described on Stream. Blocked and later calls
// fail with net.ErrClosed.
func (s *Stream) Close() error {
	s.rd.Stop()
	s.wd.Stop()
	return s.cn.close(true)
}

// LocalAddr returns the message connection's local address.
func (s *Stream) LocalAddr() net.Addr { return s.cn.mc.LocalAddr() }

// RemoteAddr returns the message connection's remote address.
func (s *Stream) RemoteAddr() net.Addr { return s.cn.mc.RemoteAddr() }

// SetDeadline sets both deadlines.
func (s *Stream) SetDeadline(t time.Time) error {
	s.rd.Set(t)
	s.wd.Set(t)
	return nil
}

// SetReadDeadline sets the read deadline; zero means none.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.rd.Set(t)
	return nil
}

// SetWriteDeadline sets the write deadline; zero means none.
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.wd.Set(t)
	return nil
}

// Stats returns the connection's figures.
func (s *Stream) Stats() SessionStats {
	s.cn.mu.Lock()
	defer s.cn.unlock()
	return s.cn.c.sessionStats()
}

var _ net.Conn = (*Stream)(nil)

// Listener wraps a listener of message connections, such as a
// *netcode.Listener, so that Accept returns Streams: http.Serve,
// for one, then works over netcode.
type Listener struct {
	l   net.Listener
	cfg *resolved
}

// NewListener wraps l; every connection it accepts becomes a Stream with
// cfg.
func NewListener(l net.Listener, cfg *Config) (*Listener, error) {
	r, err := cfg.resolve(true)
	if err != nil {
		return nil, err
	}
	return &Listener{l: l, cfg: r}, nil
}

// Accept waits for the next connection and returns it as a *Stream.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	s, err := newStream(c, l.cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the wrapped listener.
func (l *Listener) Close() error { return l.l.Close() }

// Addr returns the wrapped listener's address.
func (l *Listener) Addr() net.Addr { return l.l.Addr() }

// Dialer opens Streams over netcode. It has net.Dialer's shape: its
// DialContext fits http.Transport's DialContext, and each dial asks Token
// for the connect token of the address (a token already in hand: a Token
// that returns it).
type Dialer struct {
	// Netcode dials the netcode connection.
	Netcode netcode.Dialer
	// Config configures the streams; nil is the defaults.
	Config *Config
	// Token returns a connect token for the address being dialled
	// (typically from the game's backend).
	Token func(ctx context.Context, network, address string) ([]byte, error)
}

// Dial connects to address with a token from d.Token and returns a
// *Stream; see DialContext.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address with a token from d.Token and returns
// a *Stream. The context bounds the token's fetch and the handshake.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if d.Token == nil {
		return nil, &net.OpError{Op: "dial", Net: "reliable", Err: errNoToken}
	}
	r, err := d.Config.resolve(true)
	if err != nil {
		return nil, err
	}
	tok, err := d.Token(ctx, network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "reliable", Err: err}
	}
	c, err := d.Netcode.DialContext(ctx, tok)
	if err != nil {
		return nil, err
	}
	s, err := newStream(c, r)
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

var errNoToken = errors.New("netcode/reliable: Dialer has no Token function")
