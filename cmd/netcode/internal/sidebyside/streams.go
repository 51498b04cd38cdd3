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

// transfer runs one end of a transfer on s: role "send" sends n bytes,
// "recv" receives them. It returns the end's done line,
// "done BYTES CPU_NS WALL_NS" (a sender's wall time is 0).
func transfer(s streamConn, role string, n int64) (string, error) {
	if role == "send" {
		cpu, err := send(s, n)
		s.Close()
		return fmt.Sprintf("done %d %d 0", n, cpu.Nanoseconds()), err
	}
	if q, ok := s.(quicStream); ok {
		q.linger = true // the ack is this end's to deliver
		s = q
	}
	got, cpu, wall, err := receive(s)
	return fmt.Sprintf("done %d %d %d", got, cpu.Nanoseconds(), wall.Nanoseconds()), err
}

// streamArgs parses a stream process's arguments: the transport, its
// role (send or recv), the bytes, and for the dialing end the address.
func streamArgs(args []string, dial bool) (t, role string, n int64, addr string, err error) {
	want := 4
	if dial {
		want = 5
	}
	if len(args) != want || (args[2] != "recv" && args[2] != "send") {
		return "", "", 0, "", fmt.Errorf("child: %s TRANSPORT recv|send BYTES [ADDR], not %q", args[0], args)
	}
	if n, err = strconv.ParseInt(args[3], 10, 64); err != nil {
		return "", "", 0, "", err
	}
	if dial {
		addr = args[4]
	}
	return args[1], args[2], n, addr, nil
}

// serveStream is the process of a stream's listening end: args are
// "stream", the transport, recv or send, and the bytes. It prints its
// done line when the transfer ended, or "error TEXT".
func serveStream(args []string, key []byte, out *childOut) (string, func(), error) {
	t, role, n, _, err := streamArgs(args, false)
	if err != nil {
		return "", nil, err
	}
	addr, accept, stop, err := listenStream(t, key)
	if err != nil {
		return "", nil, err
	}
	go func() {
		line, err := func() (string, error) {
			s, err := accept()
			if err != nil {
				return "", err
			}
			var hello [1]byte
			if _, err := io.ReadFull(s, hello[:]); err != nil {
				return "", err
			}
			return transfer(s, role, n)
		}()
		if err != nil {
			line = "error " + err.Error()
		}
		out.say("%s", line)
	}()
	return addr, stop, nil
}

// dialStreamEnd is the process of a stream's dialing end: args are
// "dial", the transport, recv or send, the bytes and the listening end's
// address. It prints its done line when the transfer ended, or
// "error TEXT".
func dialStreamEnd(args []string, key []byte, out *childOut) (string, func(), error) {
	t, role, n, addr, err := streamArgs(args, true)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := dialStream(ctx, t, addr, key)
	if err != nil {
		return "", nil, err
	}
	go func() {
		line, err := transfer(s, role, n)
		if err != nil {
			line = "error " + err.Error()
		}
		out.say("%s", line)
	}()
	return addr, func() {}, nil
}

// runStream runs one transfer of n bytes of transport t, each end in a
// process of its own (exe, or this executable if ""): upload (the dialing
// end sends) or download (the listening end sends).
func runStream(ctx context.Context, exe, t string, upload bool, n int64) (res stResult, err error) {
	key, err := netcodeKey()
	if err != nil {
		return res, err
	}
	srvRole, cliRole := "send", "recv"
	if upload {
		srvRole, cliRole = cliRole, srvRole
	}
	size := strconv.FormatInt(n, 10)
	srv, err := startChild(exe, key, "stream", t, srvRole, size)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := srv.stop(); err == nil {
			err = serr
		}
	}()
	cli, err := startChild(exe, key, "dial", t, cliRole, size, srv.addr)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := cli.stop(); err == nil {
			err = cerr
		}
	}()
	var ends [2][3]int64 // sender, receiver: bytes, CPU ns, wall ns
	for _, end := range []struct {
		c    *child
		role string
	}{{srv, srvRole}, {cli, cliRole}} {
		f, err := end.c.expect("done", transferTimeout)
		if err != nil {
			return res, err
		}
		i := 0
		if end.role == "recv" {
			i = 1
		}
		if len(f) != 4 {
			return res, fmt.Errorf("a stream process said %q", f)
		}
		for k := range ends[i] {
			if ends[i][k], err = strconv.ParseInt(f[k+1], 10, 64); err != nil {
				return res, fmt.Errorf("a stream process said %q", f)
			}
		}
	}
	res = stResult{Transport: t, Upload: upload, Bytes: n, SendCPU: time.Duration(ends[0][1]), RecvCPU: time.Duration(ends[1][1])}
	if got := ends[1][0]; got != n {
		return res, fmt.Errorf("%d bytes received, want %d", got, n)
	}
	wall := time.Duration(ends[1][2])
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
	base := fs.String("base", "", "a worktree of this repository (e.g. main at the commit a change started from): also run reliable.Stream with both ends built against it, as transport reliable-base, beside this worktree's")
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
	baseExe, cleanup, err := buildBaseFlag(ctx, *base)
	if err != nil {
		return err
	}
	defer cleanup()
	if baseExe != "" {
		ts = insertAfter(ts, "reliable", baseStreamTransport)
		fmt.Fprintf(stdout, "reliable-base: reliable.Stream of %s\n", *base)
	}
	fmt.Fprintf(stdout, "streams: %d MiB per transfer in %d MiB writes, %d rounds\nuptime before: %s\n", *mib, streamChunk>>20, *rounds, uptime())
	var all []stResult
	for round := range *rounds {
		for _, t := range rotated(ts, round) {
			for _, upload := range []bool{true, false} {
				exe, tr := "", t
				if t == baseStreamTransport {
					exe, tr = baseExe, "reliable"
				}
				res, err := runStream(ctx, exe, tr, upload, *mib<<20)
				res.Transport = t
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
