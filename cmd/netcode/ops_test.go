package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
)

// lockedBuffer collects a command's output while the test reads it (safe
// for a writing and a reading goroutine).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is a running "netcode serve".
type served struct {
	udp, ops net.Addr
	done     chan int
	logs     *lockedBuffer
	keyFile  string
}

func startServe(t *testing.T, ctx context.Context, f loopback.Family, args ...string) *served {
	t.Helper()
	return startServed(t, ctx, nil, append([]string{"serve", "-net", f.Network, "-addr", f.Addr}, args...)...)
}

// startServed runs the serving command of dialect (nil: netcode; or
// {"cute"}, with application id 7) with a fresh key file, -metrics on a
// free port, and args, and waits until both its sockets listen.
func startServed(t *testing.T, ctx context.Context, dialect []string, args ...string) *served {
	t.Helper()
	s := &served{done: make(chan int, 1), logs: &lockedBuffer{}, keyFile: filepath.Join(t.TempDir(), "key")}
	code, _, errs := cli(t, append(slices.Clone(dialect), "keygen", "-o", s.keyFile)...)
	require.Equal(t, 0, code, errs)
	udp := make(chan net.Addr, 1)
	ops := make(chan net.Addr, 1)
	serveReady = func(a net.Addr) { udp <- a }
	opsReady = func(a net.Addr) { ops <- a }
	t.Cleanup(func() { serveReady, opsReady = nil, nil })
	args = append(append(slices.Clone(dialect), args...), "-key", s.keyFile, "-metrics", "127.0.0.1:0")
	if dialect != nil {
		args = append(args, "-app", "7")
	}
	go func() { s.done <- run(ctx, args, io.Discard, s.logs) }()
	select {
	case s.ops = <-ops:
	case c := <-s.done:
		t.Fatalf("%v exited with %d: %s", args, c, s.logs.String())
	}
	s.udp = <-udp
	return s
}

func (s *served) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.ops.String() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (s *served) dial(t *testing.T, clientID string) (*netcode.Conn, error) {
	t.Helper()
	code, tok, errs := cli(t, "token", "-key", s.keyFile, "-server", s.udp.String(), "-client-id", clientID)
	require.Equal(t, 0, code, errs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return netcode.DialContext(ctx, []byte(tok))
}

func (s *served) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop: %s", s.logs.String())
		return -1
	}
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_, err := c.Write([]byte(msg))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := c.Read(buf)
	require.NoError(t, err)
	require.Equal(t, msg, string(buf[:n]))
}

// serveDialect is serve or cute serve, for the tests both pass.
type serveDialect struct {
	name    string
	start   func(t *testing.T, ctx context.Context, f loopback.Family, args ...string) *served
	dial    func(s *served, t *testing.T, clientID string) (net.Conn, error)
	denied  error  // what a dial to a draining server fails with
	prefix  string // of the server's series
	stopped string // the last log line
}

var serveDialects = []serveDialect{
	{"netcode", startServe, func(s *served, t *testing.T, id string) (net.Conn, error) {
		c, err := s.dial(t, id)
		if err != nil {
			return nil, err
		}
		return c, nil
	}, netcode.ErrConnectionDenied, "netcode_server_", "netcode echo server stopped"},
	{"cute", startCuteServe, func(s *served, t *testing.T, id string) (net.Conn, error) {
		c, err := s.cuteDial(t, id)
		if err != nil {
			return nil, err
		}
		return c, nil
	}, cute.ErrConnectionDenied, "netcode_cute_server_", "cute echo server stopped"},
}

// TestServeMetricsAndDrain runs serve and cute serve with -metrics: the
// endpoints answer; on the signal /readyz turns 503, a new client is
// denied, the connected one keeps echoing, and serve stops as soon as it
// leaves.
func TestServeMetricsAndDrain(t *testing.T) {
	for _, d := range serveDialects {
		for _, f := range loopback.Families {
			t.Run(d.name+"/"+f.Name, func(t *testing.T) {
				f.Require(t)
				ctx, signal := context.WithCancel(context.Background())
				defer signal()
				s := d.start(t, ctx, f, "-drain", "60s")

				code, body := s.get(t, "/healthz")
				assert.Equal(t, 200, code)
				assert.Equal(t, "ok\n", body)
				code, _ = s.get(t, "/readyz")
				assert.Equal(t, 200, code)

				c, err := d.dial(s, t, "1")
				require.NoError(t, err)
				defer c.Close()
				echo(t, c, "before")
				code, body = s.get(t, "/metrics")
				assert.Equal(t, 200, code)
				assert.Contains(t, body, d.prefix+"clients 1\n")
				assert.Contains(t, body, d.prefix+"connections_opened_total 1\n")
				assert.Contains(t, body, d.prefix+"draining 0\n")
				assert.Contains(t, body, "netcode_build_info{")
				assert.Contains(t, body, "go_goroutines ")

				signal() // what SIGTERM does
				require.Eventually(t, func() bool {
					code, _ := s.get(t, "/readyz")
					return code == http.StatusServiceUnavailable
				}, 10*time.Second, 10*time.Millisecond)
				code, _ = s.get(t, "/healthz")
				assert.Equal(t, 200, code, "the process is still up")
				_, err = d.dial(s, t, "2")
				require.ErrorIs(t, err, d.denied)
				echo(t, c, "during the drain")
				_, body = s.get(t, "/metrics")
				assert.Contains(t, body, d.prefix+"denied_sent_total 1\n")
				assert.Contains(t, body, d.prefix+"draining 1\n")

				require.NoError(t, c.Close()) // the last client leaves: serve stops
				assert.Equal(t, 0, s.wait(t), s.logs.String())
				logs := s.logs.String()
				assert.Contains(t, logs, "draining: new clients are denied")
				assert.Contains(t, logs, "drained: every client has left")
				_, err = net.Dial("tcp", s.ops.String())
				assert.Error(t, err, "the metrics endpoint is closed")
			})
		}
	}
}

// TestServeDrainTimeout: a client that stays past -drain is disconnected
// cleanly (it reads EOF) and serve (or cute serve) stops.
func TestServeDrainTimeout(t *testing.T) {
	for _, d := range serveDialects {
		t.Run(d.name, func(t *testing.T) {
			f := loopback.Families[0]
			ctx, signal := context.WithCancel(context.Background())
			defer signal()
			s := d.start(t, ctx, f, "-drain", "100ms")
			c, err := d.dial(s, t, "1")
			require.NoError(t, err)
			defer c.Close()
			echo(t, c, "hello")
			signal()
			assert.Equal(t, 0, s.wait(t), s.logs.String())
			assert.Contains(t, s.logs.String(), "drain time is up: closing")
			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err = c.Read(make([]byte, netcode.MaxPayloadBytes))
			assert.ErrorIs(t, err, io.EOF)
			assert.Contains(t, s.logs.String(), d.stopped)
		})
	}
}
