package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/reliable"
	"github.com/quic-go/quic-go"
)

// streamTransports are the byte streams streams compares.
var streamTransports = []string{"reliable", "quic-stream", "tcp"}

// streamChunk is the size of the sender's Writes.
const streamChunk = 1 << 20

// stResult is what one transfer measured.
type stResult struct {
	Transport string
	Upload    bool // this process (the dialing client) sent
	Bytes     int64
	// MBps is bytes per second of the receiver's time from its first
	// byte to the end, in millions.
	MBps float64
	// SendCPU and RecvCPU are each side's process CPU over the transfer.
	SendCPU, RecvCPU time.Duration
}

// streamConn is one end of a stream: it reads and writes, and can end its
// write direction while it still reads.
type streamConn interface {
	io.ReadWriter
	CloseWrite() error
	Close() error
}

// quicStream is a quic-go stream with its connection.
type quicStream struct {
	c *quic.Conn
	*quic.Stream
	// linger makes Close wait for the peer to close the connection, so
	// that what this end wrote last reaches it (the receiver's ack).
	linger bool
}

func (q quicStream) CloseWrite() error { return q.Stream.Close() }

func (q quicStream) Close() error {
	q.Stream.Close()
	if q.linger {
		select {
		case <-q.c.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	return q.c.CloseWithError(0, "")
}

// reliableStream is a reliable.Stream with the listener it came from, if
// any, closed with it.
type reliableStream struct {
	*reliable.Stream
	l *netcode.Listener
}

func (s reliableStream) Close() error {
	err := s.Stream.Close()
	if s.l != nil {
		s.l.Close()
	}
	return err
}

// listenStream listens for one stream of transport t on 127.0.0.1 and
// returns its address and a function that accepts it.
func listenStream(t string, key []byte) (string, func() (streamConn, error), func(), error) {
	ctx := context.Background()
	switch t {
	case "reliable":
		cfg, err := serverConfig(key, 1)
		if err != nil {
			return "", nil, nil, err
		}
		l, err := netcode.Listen("udp4", "127.0.0.1:0", cfg)
		if err != nil {
			return "", nil, nil, err
		}
		accept := func() (streamConn, error) {
			nc, err := l.AcceptConn(ctx)
			if err != nil {
				return nil, err
			}
			s, err := reliable.NewStream(nc, nil)
			return reliableStream{s, l}, err
		}
		return l.Addr().String(), accept, func() { l.Close() }, nil
	case "quic-stream":
		tc, err := serverTLS()
		if err != nil {
			return "", nil, nil, err
		}
		l, err := quic.ListenAddr("127.0.0.1:0", tc, &quic.Config{})
		if err != nil {
			return "", nil, nil, err
		}
		accept := func() (streamConn, error) {
			c, err := l.Accept(ctx)
			if err != nil {
				return nil, err
			}
			s, err := c.AcceptStream(ctx)
			if err != nil {
				return nil, err
			}
			return quicStream{c: c, Stream: s}, nil
		}
		return l.Addr().String(), accept, func() { l.Close() }, nil
	case "tcp":
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return "", nil, nil, err
		}
		accept := func() (streamConn, error) {
			c, err := l.Accept()
			if err != nil {
				return nil, err
			}
			return c.(*net.TCPConn), nil
		}
		return l.Addr().String(), accept, func() { l.Close() }, nil
	}
	return "", nil, nil, fmt.Errorf("no stream transport %q", t)
}

// dialStream opens a stream of transport t to addr and writes its first
// byte, which a quic-go stream needs before the peer can accept it (and
// the others get too).
func dialStream(ctx context.Context, t, addr string, key []byte) (streamConn, error) {
	var sc streamConn
	switch t {
	case "reliable":
		tok, err := mint(key, addr, 1)
		if err != nil {
			return nil, err
		}
		nc, err := netcode.DialContext(ctx, tok)
		if err != nil {
			return nil, err
		}
		s, err := reliable.NewStream(nc, nil)
		if err != nil {
			return nil, err
		}
		sc = reliableStream{Stream: s}
	case "quic-stream":
		c, err := quic.DialAddr(ctx, addr, clientTLS(), &quic.Config{})
		if err != nil {
			return nil, err
		}
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			return nil, err
		}
		sc = quicStream{c: c, Stream: s}
	case "tcp":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			return nil, err
		}
		sc = c.(*net.TCPConn)
	default:
		return nil, fmt.Errorf("no stream transport %q", t)
	}
	if _, err := sc.Write([]byte{0}); err != nil {
		sc.Close()
		return nil, err
	}
	return sc, nil
}

// send writes n bytes to s in streamChunk Writes, ends its write side and
// waits for the receiver's one-byte answer; it returns its CPU time.
func send(s streamConn, n int64) (time.Duration, error) {
	buf := make([]byte, streamChunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	cpu0 := cpuTime()
	for left := n; left > 0; left -= streamChunk {
		if _, err := s.Write(buf[:min(left, streamChunk)]); err != nil {
			return 0, err
		}
	}
	if err := s.CloseWrite(); err != nil {
		return 0, err
	}
	ack, err := io.ReadAll(s)
	if err != nil {
		return 0, err
	}
	if len(ack) != 1 {
		return 0, fmt.Errorf("the receiver answered %d bytes, want 1", len(ack))
	}
	return cpuTime() - cpu0, nil
}

// receive reads s to its end, answers one byte and closes s; it returns
// the bytes read, and its CPU and wall time from the first byte to the
// end.
func receive(s streamConn) (int64, time.Duration, time.Duration, error) {
	buf := make([]byte, 64<<10)
	n, err := s.Read(buf) // the transfer starts
	if err != nil {
		return 0, 0, 0, err
	}
	start, cpu0 := time.Now(), cpuTime()
	m, err := io.CopyBuffer(io.Discard, s, buf)
	if err != nil {
		return 0, 0, 0, err
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	if _, err := s.Write([]byte{1}); err != nil {
		return 0, 0, 0, err
	}
	return int64(n) + m, cpu, wall, s.Close()
}

// serveStream is a stream server process: args are "stream", the
// transport, recv or send, and the bytes to send. It prints
// "done BYTES CPU_NS WALL_NS" when the transfer ended, or "error TEXT".
func serveStream(args []string, key []byte, out *childOut) (string, func(), error) {
	if len(args) != 4 || args[0] != "stream" || (args[2] != "recv" && args[2] != "send") {
		return "", nil, fmt.Errorf("child: stream TRANSPORT recv|send BYTES, not %q", args)
	}
	n, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return "", nil, err
	}
	addr, accept, stop, err := listenStream(args[1], key)
	if err != nil {
		return "", nil, err
	}
	go func() {
		err := func() error {
			s, err := accept()
			if err != nil {
				return err
			}
			var hello [1]byte
			if _, err := io.ReadFull(s, hello[:]); err != nil {
				return err
			}
			if args[2] == "send" {
				cpu, err := send(s, n)
				if err == nil {
					out.say("done %d %d 0", n, cpu.Nanoseconds())
				}
				s.Close()
				return err
			}
			if q, ok := s.(quicStream); ok {
				q.linger = true
				s = q
			}
			got, cpu, wall, err := receive(s)
			if err == nil {
				out.say("done %d %d %d", got, cpu.Nanoseconds(), wall.Nanoseconds())
			}
			return err
		}()
		if err != nil {
			out.say("error %v", err)
		}
	}()
	return addr, stop, nil
}

// runStream runs one transfer of n bytes of transport t: upload (this
// process sends to the server process) or download.
func runStream(ctx context.Context, t string, upload bool, n int64) (res stResult, err error) {
	key, err := netcodeKey()
	if err != nil {
		return res, err
	}
	role := "send"
	if upload {
		role = "recv"
	}
	srv, err := startChild("", key, "stream", t, role, strconv.FormatInt(n, 10))
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := srv.stop(); err == nil {
			err = serr
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := dialStream(dctx, t, srv.addr, key)
	if err != nil {
		return res, err
	}
	res = stResult{Transport: t, Upload: upload, Bytes: n}
	var (
		got  int64
		wall time.Duration
	)
	if upload {
		res.SendCPU, err = send(s, n)
		s.Close()
	} else {
		if q, ok := s.(quicStream); ok {
			q.linger = true
			s = q
		}
		got, res.RecvCPU, wall, err = receive(s)
	}
	if err != nil {
		return res, err
	}
	f, err := srv.expect("done", transferTimeout)
	if err != nil {
		return res, err
	}
	if len(f) != 4 {
		return res, fmt.Errorf("the server process said %q", f)
	}
	var peer [3]int64
	for i := range peer {
		if peer[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return res, fmt.Errorf("the server process said %q", f)
		}
	}
	if upload {
		got, res.RecvCPU, wall = peer[0], time.Duration(peer[1]), time.Duration(peer[2])
	} else {
		res.SendCPU = time.Duration(peer[1])
	}
	if got != n {
		return res, fmt.Errorf("%d bytes received, want %d", got, n)
	}
	if wall <= 0 {
		return res, errors.New("the transfer took no time")
	}
	res.MBps = float64(n) / wall.Seconds() / 1e6
	return res, nil
}

func runStreams(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("streams", stderr)
	transports := fs.String("transports", "reliable,quic-stream,tcp", "transports to compare, comma-separated: reliable (reliable.Stream over netcode, defaults), quic-stream (quic-go, defaults), tcp")
	mib := fs.Int64("mib", 256, "MiB per transfer")
	rounds := fs.Int("rounds", 3, "rounds; the table gives medians")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ts, err := nameList(*transports, streamTransports...)
	if err != nil {
		return err
	}
	if *mib < 1 || *rounds < 1 {
		return errors.New("-mib and -rounds at least 1")
	}
	fmt.Fprintf(stdout, "streams: %d MiB per transfer in %d MiB writes, %d rounds\nuptime before: %s\n", *mib, streamChunk>>20, *rounds, uptime())
	var all []stResult
	for round := range *rounds {
		for _, t := range rotated(ts, round) {
			for _, upload := range []bool{true, false} {
				res, err := runStream(ctx, t, upload, *mib<<20)
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", round+1, t, direction(upload), err)
				}
				fmt.Fprintf(stderr, "round %d: %s\n", round+1, res)
				all = append(all, res)
			}
		}
	}
	printStreamTable(stdout, all, ts)
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}
