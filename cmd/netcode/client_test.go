package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/token"
)

// server runs "netcode serve" with args until the test ends and returns its
// address and the key file its tokens need.
func server(t *testing.T, args ...string) (addr net.Addr, keyFile string) {
	addr, keyFile, _ = stoppableServer(t, args...)
	return addr, keyFile
}

// stoppableServer is server with a function that stops it before the test
// ends (once; the test's end then does nothing more).
func stoppableServer(t *testing.T, args ...string) (addr net.Addr, keyFile string, stop func()) {
	t.Helper()
	keyFile = filepath.Join(t.TempDir(), "server.key")
	code, _, errs := cli(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, code, errs)
	ready := make(chan net.Addr, 1)
	serveReady = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var serr lockedBuffer
	go func() {
		done <- run(ctx, append([]string{"serve", "-addr", "127.0.0.1:0", "-key", keyFile}, args...), io.Discard, &serr)
	}()
	select {
	case addr = <-ready:
	case c := <-done:
		t.Fatalf("serve exited with %d: %s", c, serr.String())
	}
	serveReady = nil
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.Equal(t, 0, <-done, serr.String())
		})
	}
	t.Cleanup(stop)
	return addr, keyFile, stop
}

// mint runs "netcode token" into a file and returns its name.
func mint(t *testing.T, keyFile string, addr net.Addr, args ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "client.token")
	code, _, errs := cli(t, append([]string{"token", "-key", keyFile, "-server", addr.String(), "-o", f}, args...)...)
	require.Equal(t, 0, code, errs)
	return f
}

// lineSession is a "netcode client" in line mode fed through a pipe.
type lineSession struct {
	in        *io.PipeWriter
	out, errs lockedBuffer
	done      chan int
}

func startLineClient(t *testing.T, ctx context.Context, tokenFile string) *lineSession {
	t.Helper()
	s := &lineSession{done: make(chan int, 1)}
	r, w := io.Pipe()
	s.in = w
	go func() { s.done <- runWithStdin(ctx, r, []string{"client", tokenFile}, &s.out, &s.errs) }()
	require.Eventually(t, func() bool { return strings.Contains(s.errs.String(), "connected to") },
		10*time.Second, 5*time.Millisecond, "client did not connect: %s", s.errs.String())
	return s
}

// runWithStdin is run with r as standard input.
func runWithStdin(ctx context.Context, r io.Reader, args []string, stdout, stderr io.Writer) int {
	return run(withStdin(ctx, r), args, stdout, stderr)
}

func TestClientChat(t *testing.T) {
	addr, key := server(t, "-chat")
	ctx := context.Background()
	a := startLineClient(t, ctx, mint(t, key, addr))
	b := startLineClient(t, ctx, mint(t, key, addr))

	// The server may accept b a moment after b sees itself connected, so a
	// says hello until b hears it.
	require.Eventually(t, func() bool {
		_, err := io.WriteString(a.in, "hello from a\n")
		require.NoError(t, err)
		return strings.Contains(b.out.String(), "hello from a\n")
	}, 10*time.Second, 20*time.Millisecond)
	_, err := io.WriteString(b.in, "\n"+strings.Repeat("x", netcode.MaxPayloadBytes+1)+"\nhi a\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(a.out.String(), "hi a\n") },
		10*time.Second, 5*time.Millisecond)
	assert.NotContains(t, a.out.String(), "hello from a", "chat sends to the others only")
	assert.Contains(t, b.errs.String(), "line not sent: 1201 bytes, at most 1200 (ErrPayloadTooLarge)")

	// The end of input ends a client cleanly; the other one stays.
	require.NoError(t, a.in.Close())
	assert.Equal(t, 0, <-a.done, a.errs.String())
	assert.Contains(t, a.errs.String(), "netcode client: disconnected")
	require.NoError(t, b.in.Close())
	assert.Equal(t, 0, <-b.done, b.errs.String())
}

// TestClientServerLeaves checks that a line client whose server shuts down
// says so, by the error's name, and exits cleanly.
func TestClientServerLeaves(t *testing.T) {
	addr, key, stop := stoppableServer(t, "-drain", "0s") // close at once, without a drain
	c := startLineClient(t, context.Background(), mint(t, key, addr))
	defer c.in.Close()
	stop()
	assert.Equal(t, 0, <-c.done, c.errs.String())
	assert.Contains(t, c.errs.String(), "netcode client: the server closed the connection (io.EOF)")
}

func TestClientEcho(t *testing.T) {
	addr, key := server(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-echo", "20"}, "sent 20 payloads of 64 bytes"},
		{[]string{"-echo", "50", "-size", "1200", "-rate", "500"}, "sent 50 payloads of 1200 bytes"},
		{[]string{"-echo", "5", "-size", "16"}, "5 echoed, 0 lost, 0 changed"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := cli(t, append(append([]string{"client"}, tc.args...), mint(t, key, addr))...)
			require.Equal(t, 0, code, errs)
			assert.Contains(t, out, tc.want)
			assert.Contains(t, out, " 0 lost, 0 changed")
			assert.Contains(t, errs, "netcode client: connected to "+addr.String())
		})
	}
}

func TestClientErrorsByName(t *testing.T) {
	addr, key := server(t, "-max-clients", "1")
	a := startLineClient(t, context.Background(), mint(t, key, addr))
	defer func() {
		a.in.Close()
		<-a.done
	}()
	// Only once the server has given a its slot is b denied.
	require.Eventually(t, func() bool {
		code, _, errs := cli(t, "client", "-echo", "1", mint(t, key, addr))
		return code == 1 && strings.Contains(errs, "netcode client: ErrConnectionDenied: ")
	}, 10*time.Second, 20*time.Millisecond)

	tok := mint(t, key, addr)
	code, _, errs := cli(t, "client", "-echo", "1", "-timeout", "1ns", tok)
	assert.Equal(t, 1, code)
	// The deadline came first: the error names where the handshake stood,
	// and says that the deadline ended it.
	assert.Contains(t, errs, "netcode client: ErrConnectionRequestTimedOut: ")
	assert.Contains(t, errs, "context deadline exceeded after ")

	bad := filepath.Join(t.TempDir(), "bad.token")
	require.NoError(t, os.WriteFile(bad, make([]byte, token.ConnectTokenBytes), 0o600))
	code, _, errs = cli(t, "client", "-echo", "1", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "netcode client: ErrInvalidConnectToken: ")
}

// TestClientBackend fetches tokens from an HTTPS backend with a private CA,
// as raw bytes and as base64, with and without the right bearer token.
func TestClientBackend(t *testing.T) {
	addr, keyFile := server(t)
	key, err := parseKey(keyFile, io.Discard)
	require.NoError(t, err)
	var mu sync.Mutex
	var methods []string
	backendFunc := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		tok, err := mintToken(key, addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Get("format") == "base64" {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, base64.StdEncoding.EncodeToString(tok)+"\n")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tok)
	})
	ts := httptest.NewTLSServer(backendFunc)
	defer ts.Close()
	plain := httptest.NewServer(backendFunc)
	defer plain.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600))

	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"raw", []string{"-auth", "s3cret", "-ca", ca, ts.URL + "/token"}, 0, "3 echoed, 0 lost"},
		{"base64", []string{"-auth", "s3cret", "-ca", ca, ts.URL + "/token?format=base64"}, 0, "3 echoed, 0 lost"},
		{"wrong bearer", []string{"-auth", "guess", "-ca", ca, ts.URL + "/token"}, 1, "401 Unauthorized: who are you?"},
		{"unknown CA", []string{"-auth", "s3cret", ts.URL + "/token"}, 1, "certificate"},
		{"missing CA file", []string{"-ca", ca + ".missing", ts.URL + "/token"}, 1, "no such file"},
		{"plain http", []string{"-auth", "s3cret", plain.URL + "/token"}, 0, "warning: the bearer token goes over plain http"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := cli(t, append([]string{"client", "-echo", "3"}, tc.args...)...)
			assert.Equal(t, tc.code, code, "stdout %q stderr %q", out, errs)
			assert.Contains(t, out+errs, tc.want)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range methods {
		assert.Equal(t, http.MethodPost, m)
	}
}

// TestChatThroughBackend is the whole path of docs/getting-started.md's
// chat with docs/backend.md's token service: a chat server, the
// token backend (package backend) over HTTPS with bearer secrets, and two
// line clients that fetch their tokens from it and talk.
func TestChatThroughBackend(t *testing.T) {
	addr, keyFile := server(t, "-chat")
	key, err := parseKey(keyFile, io.Discard)
	require.NoError(t, err)
	users := map[string]uint64{"alice-secret": 1, "bob-secret": 2}
	h, err := backend.NewHandler(&backend.Config{
		ProtocolID: defaultProtocolID,
		PrivateKey: key,
		Authenticate: func(r *http.Request) (backend.Identity, error) {
			id, ok := users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			if !ok {
				return backend.Identity{}, backend.ErrUnauthorized
			}
			return backend.Identity{ClientID: id}, nil
		},
		Servers: []backend.Server{{Addr: netip.MustParseAddrPort(addr.String())}},
	})
	require.NoError(t, err)
	ts := httptest.NewTLSServer(h)
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600))

	code, _, errs := cli(t, "client", "-echo", "1", "-auth", "mallory", "-ca", ca, ts.URL)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "401 Unauthorized\n", "the backend's body is the status text: said once")
	assert.NotContains(t, errs, "Unauthorized Unauthorized")

	start := func(secret string) *lineSession {
		s := &lineSession{done: make(chan int, 1)}
		r, w := io.Pipe()
		s.in = w
		go func() {
			s.done <- runWithStdin(context.Background(), r, []string{"client", "-auth", secret, "-ca", ca, ts.URL}, &s.out, &s.errs)
		}()
		require.Eventually(t, func() bool { return strings.Contains(s.errs.String(), "connected to") },
			10*time.Second, 5*time.Millisecond, "client did not connect: %s", s.errs.String())
		return s
	}
	alice, bob := start("alice-secret"), start("bob-secret")
	require.Eventually(t, func() bool {
		_, err := io.WriteString(alice.in, "hi bob\n")
		require.NoError(t, err)
		return strings.Contains(bob.out.String(), "hi bob\n")
	}, 10*time.Second, 20*time.Millisecond)
	for _, s := range []*lineSession{alice, bob} {
		require.NoError(t, s.in.Close())
		assert.Equal(t, 0, <-s.done, s.errs.String())
	}
}

// TestClientTokenUsedTwice runs the client twice with one token, the
// likeliest mistake: the first connects and names its slot; the server
// ignores the second, and with the default -timeout (none: the token's
// own 1 s decides, never a context racing it) the error names the
// protocol's state and lists the likely causes, the used token first.
func TestClientTokenUsedTwice(t *testing.T) {
	addr, key := server(t)
	tok := mint(t, key, addr, "-timeout", "1")
	code, _, errs := cli(t, "client", "-echo", "1", tok)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "in slot 0 of 256")
	assert.NotContains(t, errs, "client 0 of")

	code, _, errs = cli(t, "client", "-echo", "1", tok)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "netcode client: ErrConnectionRequestTimedOut: ")
	assert.Contains(t, errs, "the token was already used")
	assert.NotContains(t, errs, "context deadline exceeded")
	t.Log(errs)
}
