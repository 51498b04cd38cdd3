package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/token"
)

const clientSynopsis = `[flags] TOKEN

Connects to a netcode server with a connect token. TOKEN is a file holding
the token (its 2048 raw bytes or base64), - for standard input, or the
http:// or https:// URL of a token backend, which is sent a POST (see
-method) with "Authorization: Bearer" and -auth, and answers with the raw
token (application/octet-stream) or its base64 text.

Without -echo it is a line client: each line of standard input is sent as
one payload, and each payload received is written to standard output as a
line. With "netcode serve -chat" and two terminals, that is a chat. It ends
at the end of its input, when the server disconnects, or on Ctrl-C.

With -echo N it is a scripted echo client for "netcode serve": it sends N
payloads of -size bytes (-rate per second, or each after the echo of the
one before) and checks that every one comes back unchanged.

Connection state changes and errors, named by the library's sentinel
errors (ErrConnectionDenied, ...), go to standard error.`

// errEchoFailed reports a scripted run in which payloads were lost or
// changed.
var errEchoFailed = errors.New("echo check failed")

func runClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("client", clientSynopsis, stdout, stderr)
	auth := fs.String("auth", "", "bearer token for the token backend (default: $NETCODE_AUTH)")
	ca := fs.String("ca", "", "PEM file of the CA that signed the token backend's certificate (default: the system's roots)")
	method := fs.String("method", "POST", "HTTP method for the token backend")
	echo := fs.Int("echo", 0, "scripted: send this many payloads and check that each comes back")
	size := fs.Int("size", 64, "scripted: payload bytes (16..1200)")
	rate := fs.Float64("rate", 0, "scripted: payloads per second; 0 sends each after the echo of the one before")
	wait := fs.Duration("wait", 2*time.Second, "scripted: how long to wait for the echo of the last payload")
	timeout := fs.Duration("timeout", 0, "give up connecting after this long; 0 waits as long as the token allows (its timeout for each server, and its expiry), so that the error says what the protocol saw")
	verbose := fs.Bool("v", false, "also log the library's protocol events (every state the client passes through)")
	if err := fs.parse(args, 1); err != nil {
		return err
	}
	if *echo < 0 || (*echo > 0 && (*size < echoHeader || *size > netcode.MaxPayloadBytes)) {
		return fmt.Errorf("-echo %d -size %d: need -echo >= 0 and -size from %d to %d", *echo, *size, echoHeader, netcode.MaxPayloadBytes)
	}
	src := fs.Arg(0)
	if src == "-" && *echo == 0 {
		return errors.New("the token is read from standard input, which leaves none for lines: give a token file or URL, or use -echo")
	}
	if *auth == "" {
		*auth = os.Getenv("NETCODE_AUTH")
	}

	var tok []byte
	var err error
	if isURL(src) {
		if *auth != "" && strings.HasPrefix(src, "http://") {
			fmt.Fprintln(stderr, "netcode client: warning: the bearer token goes over plain http, readable by anyone on the path; use https")
		}
		fmt.Fprintf(stderr, "netcode client: asking %s for a token\n", src)
		tok, err = tokenBackend{method: *method, auth: *auth, caFile: *ca}.fetch(ctx, src)
	} else {
		tok, err = readToken(ctx, src)
	}
	if err != nil {
		return err
	}
	pub, err := token.Parse(tok)
	if err != nil {
		return describe(fmt.Errorf("%w: %v", netcode.ErrInvalidConnectToken, err))
	}
	fmt.Fprintf(stderr, "netcode client: connecting to %s\n", joinValues(pub.ServerAddrs))

	d := netcode.Dialer{}
	if *verbose {
		d.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if *timeout > 0 {
		dctx, cancel = context.WithTimeout(ctx, *timeout)
	}
	c, err := d.DialContext(dctx, tok)
	cancel()
	if err != nil {
		return describe(err)
	}
	fmt.Fprintf(stderr, "netcode client: connected to %s in slot %d of %d\n", c.RemoteAddr(), c.ClientIndex(), c.MaxClients())
	if *echo > 0 {
		err = echoClient(ctx, c, stdout, *echo, *size, *rate, *wait)
	} else {
		err = lineClient(ctx, c, stdout, stderr)
	}
	c.Close()
	if err != nil {
		return describe(err)
	}
	fmt.Fprintln(stderr, "netcode client: disconnected")
	return nil
}

// describe prefixes err with the name of the exported error it wraps, so
// that a user (or a script) can look it up.
func describe(err error) error {
	if name := errorName(err); name != "" {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}

// errorNames are the errors a client can end with, by their Go names.
var errorNames = []struct {
	err  error
	name string
}{
	{netcode.ErrConnectionDenied, "ErrConnectionDenied"},
	{netcode.ErrConnectTokenExpired, "ErrConnectTokenExpired"},
	{netcode.ErrInvalidConnectToken, "ErrInvalidConnectToken"},
	{netcode.ErrConnectionRequestTimedOut, "ErrConnectionRequestTimedOut"},
	{netcode.ErrConnectionResponseTimedOut, "ErrConnectionResponseTimedOut"},
	{netcode.ErrConnectionTimedOut, "ErrConnectionTimedOut"},
	{netcode.ErrPayloadTooLarge, "ErrPayloadTooLarge"},
	{netcode.ErrEmptyPayload, "ErrEmptyPayload"},
	{os.ErrDeadlineExceeded, "os.ErrDeadlineExceeded"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
	{context.Canceled, "context.Canceled"},
	{net.ErrClosed, "net.ErrClosed"},
	{io.EOF, "io.EOF"},
}

// errorName returns the name of the first of errorNames that err wraps.
func errorName(err error) string {
	for _, e := range errorNames {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return ""
}

// lineClient sends the lines of stdin and prints the payloads received. It
// returns nil at the end of the input, on a signal (ctx), or when the server
// disconnects cleanly.
func lineClient(ctx context.Context, c *netcode.Conn, stdout, stderr io.Writer) error {
	stdin := stdinOf(ctx)
	if isTerminal(stdin) {
		fmt.Fprintln(stderr, "netcode client: type a line to send it; Ctrl-D or Ctrl-C to quit")
	}
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, netcode.MaxPayloadBytes)
		for {
			n, err := c.Read(buf)
			if err != nil {
				readErr <- err
				return
			}
			line := append(bytes.TrimRight(buf[:n], "\r\n"), '\n')
			if _, err := stdout.Write(line); err != nil {
				readErr <- err
				return
			}
		}
	}()
	// The scanner's goroutine may stay blocked on a terminal after the
	// connection ends; the process exits then.
	lines := make(chan []byte)
	inputDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 4096), 64*1024)
		for sc.Scan() {
			select {
			case lines <- slices.Clone(sc.Bytes()):
			case <-c.Done():
				return
			}
		}
		inputDone <- sc.Err()
	}()
	for {
		select {
		case line := <-lines:
			line = bytes.TrimRight(line, "\r")
			if len(line) == 0 {
				continue
			}
			if _, err := c.Write(line); err != nil {
				if errors.Is(err, netcode.ErrPayloadTooLarge) {
					fmt.Fprintf(stderr, "netcode client: line not sent: %d bytes, at most %d (ErrPayloadTooLarge)\n", len(line), netcode.MaxPayloadBytes)
					continue
				}
				return err
			}
		case err := <-inputDone:
			c.Close()
			<-readErr
			return err
		case <-ctx.Done():
			c.Close()
			<-readErr
			return nil
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "netcode client: the server closed the connection (io.EOF)")
				return nil
			}
			return err
		}
	}
}

// echoHeader is the sequence number and send time at the start of each
// scripted payload.
const echoHeader = 16

// echoClient sends n payloads of size bytes and checks their echoes.
func echoClient(ctx context.Context, c *netcode.Conn, stdout io.Writer, n, size int, rate float64, wait time.Duration) error {
	type result struct {
		got, changed int
		rtts         []time.Duration
		err          error
	}
	fill := func(p []byte, seq uint64) {
		for i := echoHeader; i < len(p); i++ {
			p[i] = byte(seq) + byte(i)
		}
	}
	echoed := make(chan uint64, n)
	done := make(chan result, 1)
	go func() {
		var r result
		seen := make([]bool, n)
		buf := make([]byte, netcode.MaxPayloadBytes)
		want := make([]byte, size)
		for r.got < n {
			m, err := c.Read(buf)
			if err != nil {
				r.err = err
				break
			}
			p := buf[:m]
			seq := binary.LittleEndian.Uint64(p)
			if m != size || seq >= uint64(n) || seen[seq] {
				r.changed++
				continue
			}
			copy(want, p[:echoHeader])
			fill(want, seq)
			if !bytes.Equal(p, want) {
				r.changed++
				continue
			}
			seen[seq] = true
			r.got++
			sent := time.Unix(0, int64(binary.LittleEndian.Uint64(p[8:])))
			r.rtts = append(r.rtts, time.Since(sent))
			echoed <- seq
		}
		done <- r
	}()

	var every *time.Ticker
	if rate > 0 {
		every = time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer every.Stop()
	}
	p := make([]byte, size)
	start := time.Now()
	var res *result
	count := 0 // payloads sent
send:
	for sent := 0; sent < n; sent++ {
		binary.LittleEndian.PutUint64(p, uint64(sent))
		binary.LittleEndian.PutUint64(p[8:], uint64(time.Now().UnixNano()))
		fill(p, uint64(sent))
		if _, err := c.Write(p); err != nil {
			return err
		}
		count++
		var next <-chan time.Time
		if every != nil {
			next = every.C
		}
		for {
			select {
			case <-next:
				continue send
			case seq := <-echoed:
				if every == nil && seq == uint64(sent) {
					continue send
				}
			case r := <-done:
				res = &r
				break send
			case <-time.After(wait):
				if every == nil {
					break send // lost: the check below reports it
				}
			case <-ctx.Done():
				break send
			}
		}
	}
	if res == nil {
		// Wait for the last echoes, then end the reader.
		timer := time.NewTimer(wait)
		select {
		case r := <-done:
			res = &r
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if res == nil {
			c.Close()
			r := <-done
			res = &r
		}
	}
	elapsed := time.Since(start)
	slices.Sort(res.rtts)
	fmt.Fprintf(stdout, "sent %d payloads of %d bytes in %v, %d echoed, %d lost, %d changed",
		count, size, elapsed.Round(time.Millisecond), res.got, count-res.got, res.changed)
	if len(res.rtts) > 0 {
		fmt.Fprintf(stdout, "; round trip p50 %v, max %v",
			res.rtts[len(res.rtts)/2].Round(time.Microsecond), res.rtts[len(res.rtts)-1].Round(time.Microsecond))
	}
	fmt.Fprintln(stdout)
	switch {
	case ctx.Err() != nil:
		return nil
	case res.err != nil && !errors.Is(res.err, net.ErrClosed):
		return res.err
	case res.got != n || res.changed != 0:
		return fmt.Errorf("%w: %d of %d payloads came back unchanged", errEchoFailed, res.got, n)
	}
	return nil
}
