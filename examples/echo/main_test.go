package main

import (
	"context"
	"errors"
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

// TestRun runs the demo as the README's first command does, smaller.
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
			if err := run(tc.addr, 3, 2); err != nil {
				t.Fatal(err)
			}
		})
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
			err := runClients(key, server, 2, 2)
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
