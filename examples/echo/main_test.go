package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"go.uber.org/goleak"
)

// lockedBuffer collects the output of the demo's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// TestRun runs the demo as the README's first command does, smaller, and
// checks that it ends cleanly: every client's disconnect read by the server
// as io.EOF before the server closes.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		addr, network string
	}{
		{"127.0.0.1:0", "udp4"},
		{"[::1]:0", "udp6"},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			pc, err := net.ListenPacket(tc.network, tc.addr)
			if err != nil {
				t.Skipf("no %s loopback here: %v", tc.network, err)
			}
			pc.Close()
			var out lockedBuffer
			if err := run(&out, tc.addr, 3, 3, 2); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if n := strings.Count(got, "left: EOF"); n != 3 {
				t.Errorf("%d clients left with EOF, want 3:\n%s", n, got)
			}
			for _, want := range []string{"3 connections opened", "3 clients disconnected (io.EOF), 0 timed out, 0 other"} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "closed network connection") {
				t.Errorf("the server closed before reading a disconnect:\n%s", got)
			}
		})
	}
}

// TestRunLimits checks the -clients and -max-clients bounds, and that the
// demo runs with more than 64 clients when allowed.
func TestRunLimits(t *testing.T) {
	defer goleak.VerifyNone(t)
	err := run(io.Discard, "127.0.0.1:0", 65, 64, 1)
	if !errors.Is(err, errTooManyClients) {
		t.Fatalf("run with 65 clients and 64 slots: %v, want %v", err, errTooManyClients)
	}
	if err := run(io.Discard, "127.0.0.1:0", 0, 64, 1); err == nil || !strings.Contains(err.Error(), "at least one client") {
		t.Fatalf("run with no client: %v", err)
	}
	if testing.Short() {
		return
	}
	var out lockedBuffer
	if err := run(&out, "127.0.0.1:0", 100, 100, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "100 clients disconnected (io.EOF)") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestRunClientsFails checks that the clients' failures reach the caller:
// an echo that differs from what was sent, or none at all.
func TestRunClientsFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name  string
		reply func([]byte) []byte // nil result: no reply
		want  error               // nil: success
	}{
		{"echo", func(b []byte) []byte { return b }, nil},
		{"mangled", func(b []byte) []byte { return slices.Concat(b, []byte("!")) }, errMismatch},
		{"silent", func([]byte) []byte { return nil }, os.ErrDeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, server := testServer(t, tc.reply)
			_, err := runClients(io.Discard, key, server, 2, 2)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("runClients: nil error, want %v", tc.want)
			}
			// Both clients' errors are reported.
			for _, id := range []string{"client 1000:", "client 1001:"} {
				if !strings.Contains(err.Error(), id) {
					t.Errorf("error %q does not name %s", err, id)
				}
			}
			if !errorsIs(err, tc.want) {
				t.Errorf("error %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

// errorsIs reports whether err joins errors that all wrap target.
func errorsIs(err, target error) bool {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return false
	}
	for _, e := range j.Unwrap() {
		if !errors.Is(e, target) {
			return false
		}
	}
	return true
}

// testServer starts a netcode server on IPv4 loopback that answers each
// payload with reply(payload), and returns its key and address. It is
// closed, and its goroutines collected, when the test ends.
func testServer(t *testing.T, reply func([]byte) []byte) (crypto.Key, netip.AddrPort) {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: key, MaxClients: 8})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				buf := make([]byte, netcode.MaxPayloadBytes)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if r := reply(buf[:n]); r != nil {
						if _, err := c.Write(r); err != nil {
							return
						}
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return key, netip.MustParseAddrPort(l.Addr().String())
}
