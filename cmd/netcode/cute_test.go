package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute"
)

// TestCuteCommands runs the Cute dialect's commands end to end over real
// UDP (IPv4 and IPv6): keygen writes a key file, token mints with it,
// inspect reads the token back, serve echoes and client checks the echoes.
func TestCuteCommands(t *testing.T) {
	for _, f := range []struct{ name, network, addr string }{
		{"ipv4", "udp4", "127.0.0.1:0"},
		{"ipv6", "udp6", "[::1]:0"},
	} {
		t.Run(f.name, func(t *testing.T) {
			if f.network == "udp6" {
				if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
					t.Skip("no IPv6 on this machine")
				}
			}
			dir := t.TempDir()
			keyFile := filepath.Join(dir, "cute.key")
			code, _, errs := cli(t, "cute", "keygen", "-o", keyFile)
			require.Equal(t, 0, code, errs)
			code, _, errs = cli(t, "cute", "keygen", "-o", keyFile)
			require.Equal(t, 1, code, "never overwrites")
			assert.Contains(t, errs, "exists")
			code, out, _ := cli(t, "cute", "keygen")
			require.Equal(t, 0, code)
			require.Len(t, strings.TrimSpace(out), 2*cute.SecretKeyBytes)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"cute", "serve", "-key", keyFile, "-app", "7", "-net", f.network, "-addr", f.addr}, pw, io.Discard)
				pw.Close()
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			require.NoError(t, err)
			addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
			require.True(t, ok, line)
			go io.Copy(io.Discard, pr)

			tokFile := filepath.Join(dir, "tok")
			code, _, errs = cli(t, "cute", "token", "-key", keyFile, "-app", "7", "-client-id", "99", "-handshake-timeout", "1", "-server", addr, "-o", tokFile)
			require.Equal(t, 0, code, errs)
			code, out, errs = cli(t, "cute", "inspect", tokFile)
			require.Equal(t, 0, code, errs)
			assert.Contains(t, out, "application id:    0x7")
			assert.Contains(t, out, "server 1:          "+addr)

			code, out, errs = cli(t, "cute", "client", "-echo", "20", "-size", "300", tokFile)
			require.Equal(t, 0, code, errs)
			assert.Contains(t, out, "as client 99")
			assert.Contains(t, out, "20 echoes of 300 bytes")

			// The token is spent: a second client is refused, and told why
			// that may be.
			code, _, errs = cli(t, "cute", "client", tokFile)
			require.Equal(t, 1, code)
			assert.Contains(t, errs, "timed out")
			assert.Contains(t, errs, "likely causes")

			// Messages under 8 bytes, down to one byte, echo too.
			for i, size := range []string{"3", "1"} {
				code, _, errs = cli(t, "cute", "token", "-key", keyFile, "-app", "7", "-client-id", fmt.Sprint(100+i), "-server", addr, "-o", tokFile)
				require.Equal(t, 0, code, errs)
				code, out, errs = cli(t, "cute", "client", "-echo", "5", "-size", size, tokFile)
				require.Equal(t, 0, code, errs)
				assert.Contains(t, out, "5 echoes of "+size+" bytes")
			}

			// Messages of several fragments, and fire-and-forget ones, each
			// echoed as it came (fresh tokens: each is spent once).
			for i, args := range [][]string{{"-echo", "5", "-size", "5000"}, {"-echo", "5", "-size", "300", "-unreliable"}} {
				tf := filepath.Join(dir, fmt.Sprintf("tok%d", i))
				code, _, errs = cli(t, "cute", "token", "-key", keyFile, "-app", "7", "-client-id", fmt.Sprint(200+i), "-server", addr, "-o", tf)
				require.Equal(t, 0, code, errs)
				code, out, errs = cli(t, append(append([]string{"cute", "client"}, args...), tf)...)
				require.Equal(t, 0, code, errs)
				assert.Contains(t, out, "5 echoes of "+args[3]+" bytes")
			}

			cancel()
			require.Equal(t, 0, <-done)
		})
	}
}

func TestCuteCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cute"}, 2, "usage: netcode cute"},
		{[]string{"cute", "frob"}, 2, `unknown cute command "frob"`},
		{[]string{"cute", "token", "-server", "127.0.0.1:1"}, 1, "no key"},
		{[]string{"cute", "token", "-key", "00", "-server", "127.0.0.1:1"}, 1, "not a 64-byte Cute secret key"},
		{[]string{"cute", "token", "-key", strings.Repeat("00", 64), "-server", "127.0.0.1:1"}, 1, "all zeros"},
		{[]string{"cute", "token", "-key", strings.Repeat("11", 64)}, 1, "no server"},
		{[]string{"cute", "inspect", "/no/such/file"}, 1, "no such file"},
		{[]string{"cute", "client", "-size", "-1", "x"}, 1, "-size -1"},
		{[]string{"cute", "client", "-size", "0", "x"}, 1, "-size 0: want 1..262144"},
		{[]string{"cute", "client", "-size", "262145", "x"}, 1, "-size 262145"},
		{[]string{"cute", "client", "-size", "1206", "-unreliable", "x"}, 1, "-size 1206: want 1..1205"},
		{[]string{"cute", "client", "-size", "1206", "-bare", "x"}, 1, "-size 1206: want 0..1205"},
	}
	for _, tt := range tests {
		code, out, errs := cli(t, tt.args...)
		assert.Equal(t, tt.code, code, "%v", tt.args)
		assert.Contains(t, out+errs, tt.want, "%v", tt.args)
	}
}
