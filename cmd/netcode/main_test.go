package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cmd/netcode/internal/bench"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cli runs a command line and returns its exit status and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		{nil, 2, "usage: netcode <command>"},
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"keygen", "-h"}, 0, "usage: netcode keygen"},
		{[]string{"token", "-h"}, 0, "-client-id"},
		{[]string{"serve", "-h"}, 0, "-max-clients"},
		{[]string{"bench", "-h"}, 0, "-baseline"},
		{[]string{"inspect", "-h"}, 0, "usage: netcode inspect"},
		{[]string{"client", "-h"}, 0, "-echo"},
		{[]string{"client"}, 2, "missing argument"},
		{[]string{"client", "a", "b"}, 2, `unexpected argument "b"`},
		{[]string{"client", "-", "-echo", "0"}, 2, `unexpected argument "-echo"`},
		{[]string{"client", "-"}, 1, "leaves none for lines"},
		{[]string{"client", "-echo", "3", "-size", "8", "x"}, 1, "-size from 16 to 1200"},
		{[]string{"version", "-h"}, 0, "usage: netcode version"},
		{[]string{"keygen", "-nope"}, 2, "flag provided but not defined"},
		{[]string{"keygen", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"token", "-server", "127.0.0.1:1"}, 1, "no key"},
		{[]string{"token", "-key", strings.Repeat("ab", 32)}, 1, "no server"},
		{[]string{"token", "-key", "xyz", "-server", "127.0.0.1:1"}, 1, "-key: not a 32-byte key in hex or base64, and no file of that name exists"},
		{[]string{"token", "-key", "xyz.key", "-server", "127.0.0.1:1"}, 1, "key file xyz.key: file does not exist"},
		{[]string{"token", "-server", "0.0.0.0:40000"}, 2, "a concrete address and port are needed"},
		{[]string{"token", "-server", "[::]:40000"}, 2, "a concrete address and port are needed"},
		{[]string{"token", "-server", "127.0.0.1:0"}, 2, "a concrete address and port are needed"},
		{[]string{"token", "-server", "nonsense"}, 2, "invalid value"},
		{[]string{"token", "-protocol", "-1"}, 2, "invalid value"},
		{[]string{"serve"}, 1, "no key"},
		{[]string{"bench", "-size", "8", "-duration", "0", "-q"}, 1, "payload size 8 out of range"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := cli(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout %q stderr %q", out, errs)
			assert.Contains(t, out+errs, tc.want)
		})
	}
}

func TestKeygen(t *testing.T) {
	code, out, _ := cli(t, "keygen")
	require.Equal(t, 0, code)
	b, err := hex.DecodeString(strings.TrimSpace(out))
	require.NoError(t, err)
	assert.Len(t, b, 32)
	k, err := parseKey(strings.TrimSpace(out), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, b, k[:])

	code, out2, _ := cli(t, "keygen", "-base64")
	require.Equal(t, 0, code)
	b2, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out2))
	require.NoError(t, err)
	assert.Len(t, b2, 32)
	assert.NotEqual(t, b, b2, "keys are random")

	dir := t.TempDir()
	f := filepath.Join(dir, "key")
	code, out, _ = cli(t, "keygen", "-o", f)
	require.Equal(t, 0, code)
	assert.Empty(t, out)
	st, err := os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = parseKey(f, io.Discard)
	require.NoError(t, err)
	// An existing key file is never overwritten.
	code, _, errs := cli(t, "keygen", "-o", f)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "exists")
}

func TestParseKey(t *testing.T) {
	var key crypto.Key
	for i := range key {
		key[i] = byte(i * 7)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	tests := []struct {
		name    string
		in      string
		wantIs  error  // the error wraps it, if set
		wantMsg string // the error says it, if set; neither: the key parses
	}{
		{"hex", hex.EncodeToString(key[:]), nil, ""},
		{"hex upper", strings.ToUpper(hex.EncodeToString(key[:])), nil, ""},
		{"base64", base64.StdEncoding.EncodeToString(key[:]), nil, ""},
		{"base64 raw url", base64.RawURLEncoding.EncodeToString(key[:]), nil, ""},
		{"hex file", write("hex", []byte(hex.EncodeToString(key[:])+"\n")), nil, ""},
		{"base64 file", write("b64", []byte(base64.StdEncoding.EncodeToString(key[:])+"\r\n")), nil, ""},
		{"raw file", write("raw", key[:]), nil, ""},
		{"empty", "", nil, "no key"},
		{"short hex", hex.EncodeToString(key[:31]), crypto.ErrNotAKey, ""},
		{"missing file", filepath.Join(dir, "missing.key"), fs.ErrNotExist, "missing.key"},
		{"directory", dir, nil, "not a regular file"},
		{"bad file", write("bad", []byte("hello")), crypto.ErrNotAKey, ""},
		{"big file", write("big", make([]byte, 5000)), nil, "larger than 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKey(tc.in, io.Discard)
			if tc.wantIs != nil || tc.wantMsg != "" {
				if tc.wantIs != nil {
					assert.ErrorIs(t, err, tc.wantIs)
				}
				assert.ErrorContains(t, err, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, key, got)
		})
	}
}

// TestKeyFileMessages checks that a missing key file is reported as missing
// and that a key file others may read is used with a warning.
func TestKeyFileMessages(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "server.key")
	_, err := parseKey(missing, io.Discard)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
	code, _, errs := cli(t, "token", "-key", missing, "-server", "127.0.0.1:40000")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "server.key: file does not exist")

	f := filepath.Join(dir, "open.key")
	code, _, errs = cli(t, "keygen", "-o", f)
	require.Equal(t, 0, code, errs)
	var warn bytes.Buffer
	_, err = parseKey(f, &warn)
	require.NoError(t, err)
	assert.Empty(t, warn.String(), "keygen's file is private")
	if runtime.GOOS == "windows" {
		return
	}
	require.NoError(t, os.Chmod(f, 0o644))
	_, err = parseKey(f, &warn)
	require.NoError(t, err)
	assert.Contains(t, warn.String(), "readable by other users")
}

func TestKeygenTokenParse(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	tokFile := filepath.Join(dir, "token")
	code, _, errs := cli(t, "keygen", "-base64", "-o", keyFile)
	require.Equal(t, 0, code, errs)

	code, _, errs = cli(t, "token", "-key", keyFile, "-protocol", "0x1234",
		"-client-id", "42", "-server", "127.0.0.1:40000", "-server", "[::1]:40001",
		"-expire", "60", "-timeout", "7", "-user-data", "deadbeef", "-o", tokFile)
	require.Equal(t, 0, code, errs)
	b, err := os.ReadFile(tokFile)
	require.NoError(t, err)
	require.Len(t, b, token.ConnectTokenBytes)
	tok, err := token.Parse(b)
	require.NoError(t, err)
	assert.EqualValues(t, 0x1234, tok.ProtocolID)
	assert.EqualValues(t, 7, tok.TimeoutSeconds)
	assert.EqualValues(t, 60, tok.ExpireTimestamp-tok.CreateTimestamp)
	assert.Equal(t, []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:40000"),
		netip.MustParseAddrPort("[::1]:40001"),
	}, tok.ServerAddrs)
	b2, err := readToken(context.Background(), tokFile)
	require.NoError(t, err)
	assert.Equal(t, b, b2)

	// Base64 to stdout.
	code, out, errs := cli(t, "token", "-key", keyFile, "-server", "127.0.0.1:40000", "-base64")
	require.Equal(t, 0, code, errs)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	require.NoError(t, err)
	tok, err = token.Parse(raw)
	require.NoError(t, err)
	assert.EqualValues(t, defaultProtocolID, tok.ProtocolID)
	b64File := filepath.Join(dir, "token.b64")
	require.NoError(t, os.WriteFile(b64File, []byte(out), 0o600))
	b3, err := readToken(context.Background(), b64File)
	require.NoError(t, err)
	assert.Equal(t, raw, b3)

	// Bad inputs.
	for _, args := range [][]string{
		{"-user-data", "zz"},
		{"-user-data", strings.Repeat("00", 257)},
		{"-timeout", "99999999999"},
	} {
		code, _, _ := cli(t, append([]string{"token", "-key", keyFile, "-server", "127.0.0.1:1"}, args...)...)
		assert.Equal(t, 1, code, args)
	}
	_, err = readToken(context.Background(), keyFile)
	assert.ErrorContains(t, err, "neither a 2048-byte connect token nor one in base64")

	code, out, errs = cli(t, "inspect", tokFile)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "protocol id: 0x1234")
	assert.Contains(t, out, "timeout:     7 s")
	assert.Contains(t, out, "server 2:    [::1]:40001")
	code, _, _ = cli(t, "inspect", keyFile)
	assert.Equal(t, 1, code)
	code, _, _ = cli(t, "inspect")
	assert.Equal(t, 2, code)
}

func TestServeDial(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	code, _, errs := cli(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, code, errs)

	ready := make(chan net.Addr, 1)
	serveReady = func(a net.Addr) { ready <- a }
	defer func() { serveReady = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-key", keyFile, "-max-clients", "4", "-v",
			"-token-rate", "100", "-token-expiry", "10s"}, &bytes.Buffer{}, &serr)
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case c := <-done:
		t.Fatalf("serve exited with %d: %s", c, serr.String())
	}

	code, tok, errs := cli(t, "token", "-key", keyFile, "-server", addr.String(), "-client-id", "7")
	require.Equal(t, 0, code, errs)
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	c, err := netcode.DialContext(dctx, []byte(tok))
	require.NoError(t, err)
	buf := make([]byte, netcode.MaxPayloadBytes)
	for i, msg := range []string{"hello", strings.Repeat("x", netcode.MaxPayloadBytes)} {
		_, err := c.Write([]byte(msg))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
		n, err := c.Read(buf)
		require.NoError(t, err, "message %d", i)
		assert.Equal(t, msg, string(buf[:n]))
	}
	require.NoError(t, c.Close())

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, serr.String())
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not stop")
	}
	logs := serr.String()
	assert.Contains(t, logs, "netcode echo server listening")
	assert.Contains(t, logs, "token_history=1000", "-token-rate 100 × -token-expiry 10s")
	assert.Equal(t, 1, strings.Count(logs, "client connected"), "one line per event:\n%s", logs)
	assert.Equal(t, 1, strings.Count(logs, "client disconnected"), "one line per event:\n%s", logs)
	assert.Contains(t, logs, "id=7")
	assert.Contains(t, logs, "netcode echo server stopped")
}

func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	mem := filepath.Join(dir, "mem.pprof")
	code, out, errs := cli(t, "bench", "-clients", "4", "-duration", "1s", "-warmup", "200ms",
		"-baseline", "-json", "-cpuprofile", prof, "-memprofile", mem)
	require.Equal(t, 0, code, errs)
	var res bench.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, 4, res.Netcode.Connected)
	assert.Greater(t, res.Netcode.RoundTripsPerSec, 0.0)
	require.NotNil(t, res.Raw)
	assert.Greater(t, res.Ratio, 0.0)
	assert.Contains(t, errs, "[netcode] measure")
	for _, f := range []string{prof, mem} {
		st, err := os.Stat(f)
		require.NoError(t, err)
		assert.NotZero(t, st.Size(), f)
	}

	code, out, errs = cli(t, "bench", "-clients", "2", "-rate", "20", "-duration", "500ms", "-warmup", "-1s", "-q")
	require.Equal(t, 0, code, errs)
	assert.Empty(t, errs)
	assert.Contains(t, out, "== netcode")
	assert.Contains(t, out, "p99")
}
