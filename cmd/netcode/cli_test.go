package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// mintToken makes a token for the server at addr with key.
func mintToken(key crypto.Key, addr net.Addr) ([]byte, error) {
	return token.Generate(&token.Params{
		ProtocolID:     defaultProtocolID,
		ClientID:       1,
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{netip.MustParseAddrPort(addr.String())},
		ExpireSeconds:  30,
		TimeoutSeconds: 10,
	})
}

// TestHelp checks that every command's -h goes to stdout with every flag
// described, and that a command-line error puts the usage on stderr.
func TestHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := cli(t, c.name, "-h")
			assert.Equal(t, 0, code)
			assert.Empty(t, errs)
			assert.True(t, strings.HasPrefix(out, "usage: netcode "+c.name), out)
			for _, line := range strings.Split(out, "\n") {
				assert.NotEqual(t, "    \t", line, "a flag without a description:\n%s", out)
			}
			code, out, errs = cli(t, c.name, "-no-such-flag")
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, errs, "flag provided but not defined: -no-such-flag")
			assert.Contains(t, errs, "usage: netcode "+c.name)
		})
	}
}

func TestResolveAddr(t *testing.T) {
	var badAddr *net.AddrError
	tests := []struct {
		in    string
		want  string // "": refused
		errAs any    // with want "": nil for token.ErrUnspecifiedAddr, else the error type
	}{
		{"127.0.0.1:40000", "127.0.0.1:40000", nil},
		{"[::1]:40000", "[::1]:40000", nil},
		{"[::ffff:127.0.0.1]:40000", "127.0.0.1:40000", nil},
		{"localhost:40000", "127.0.0.1:40000", nil},
		{"0.0.0.0:40000", "", nil},
		{"[::]:40000", "", nil},
		{"[::ffff:0.0.0.0]:40000", "", nil},
		{"127.0.0.1:0", "", nil},
		{"localhost:0", "", nil},
		{":40000", "", nil},
		{"nonsense", "", &badAddr},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := resolveAddr(tc.in)
			if tc.want == "" {
				if tc.errAs != nil {
					assert.ErrorAs(t, err, tc.errAs)
				} else {
					assert.ErrorIs(t, err, token.ErrUnspecifiedAddr)
				}
				return
			}
			require.NoError(t, err)
			if tc.in == "localhost:40000" && got.Addr().Is6() {
				tc.want = "[::1]:40000" // a machine resolving localhost to IPv6 first
			}
			assert.Equal(t, tc.want, got.String())
		})
	}
}

func TestBridgeAllowHostNames(t *testing.T) {
	var l addrList
	require.NoError(t, l.Set("localhost:40000"))
	require.NoError(t, l.Set("192.0.2.1:5"))
	require.NotEmpty(t, l)
	for _, a := range l[:len(l)-1] {
		assert.True(t, a.Addr().IsLoopback(), a)
		assert.EqualValues(t, 40000, a.Port())
	}
	assert.Equal(t, netip.MustParseAddrPort("192.0.2.1:5"), l[len(l)-1])
	for _, bad := range []string{"0.0.0.0:1", "localhost:0", "[::]:40000", ":40000"} {
		assert.ErrorIs(t, l.Set(bad), token.ErrUnspecifiedAddr, bad)
	}
	var badAddr *net.AddrError
	assert.ErrorAs(t, l.Set("no-port"), &badAddr)
}

func TestInspectInput(t *testing.T) {
	dir := t.TempDir()
	var key crypto.Key
	key[0] = 1
	tok, err := mintToken(key, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000})
	require.NoError(t, err)
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, maxTokenText+1), 0o600))

	code, _, errs := cli(t, "inspect", big)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "more than 4096 bytes: not a connect token")
	code, _, errs = cli(t, "inspect", filepath.Join(dir, "missing"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "no such file")
	if _, err := os.Stat("/dev/zero"); err == nil {
		code, _, errs := cli(t, "inspect", "/dev/zero")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "more than 4096 bytes")
	}

	var out, errb strings.Builder
	code = runWithStdin(context.Background(), strings.NewReader(base64.StdEncoding.EncodeToString(tok)+"\n"), []string{"inspect", "-"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	assert.Contains(t, out.String(), "server 1:    127.0.0.1:40000")

	// A signal (the context) ends a read that would wait forever.
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = readToken(withStdin(ctx, r), "-")
	assert.ErrorIs(t, err, context.Canceled)
	var interrupted strings.Builder
	code = runWithStdin(ctx, r, []string{"inspect", "-"}, io.Discard, &interrupted)
	assert.Equal(t, 1, code)
	assert.Equal(t, "netcode inspect: interrupted\n", interrupted.String())
}

// TestTokenToPipe checks that a token written to a pipe is its raw bytes.
func TestTokenToPipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	assert.False(t, isTerminal(w))
	var errb strings.Builder
	code := run(context.Background(), []string{"token", "-key", strings.Repeat("ab", 32), "-server", "127.0.0.1:40000"}, w, &errb)
	require.NoError(t, w.Close())
	require.Equal(t, 0, code, errb.String())
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Len(t, b, token.ConnectTokenBytes)
	_, err = token.Parse(b)
	require.NoError(t, err)
}

// TestMessages checks that the CLI's errors have one style: "netcode
// COMMAND: " and then what is wrong, with no package path of the library
// and no prefix said twice, and that key errors name where the key came
// from ("key file NAME" or "-key") and never quote a key.
func TestMessages(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	zeroHex := strings.Repeat("0", 64)
	zeroFile := file("zero.key", zeroHex+"\n")
	badFile := file("bad.key", "hello\n")
	existing := file("server.key", "keep me\n")
	badText := strings.Repeat("ab", 31) + "zz"
	const zeroSays = "the key is all zeros: anyone could mint tokens with it, and servers refuse it (netcode keygen makes a random one)"
	busy, err := net.ListenPacket("udp", "127.0.0.1:0") // a port in use
	require.NoError(t, err)
	defer busy.Close()
	inUse := busy.LocalAddr().String()
	goodKey := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		args []string
		want string // the whole of stderr
	}{
		{"keygen onto a file", []string{"keygen", "-o", existing},
			"netcode keygen: " + existing + " exists: keygen never overwrites a file (a key in use would be lost); remove it first or choose another -o"},
		{"key file missing", []string{"token", "-key", filepath.Join(dir, "missing.key"), "-server", "127.0.0.1:1"},
			"netcode token: key file " + filepath.Join(dir, "missing.key") + ": file does not exist (nor is it a key in hex or base64)"},
		{"short key text", []string{"token", "-key", "zz12", "-server", "127.0.0.1:1"},
			"netcode token: -key: not a 32-byte key in hex or base64, and no file of that name exists"},
		{"key one digit short", []string{"token", "-key", strings.Repeat("a", 63), "-server", "127.0.0.1:1"},
			"netcode token: -key: not a 32-byte key in hex or base64, and no file of that name exists"},
		{"user data not hex", []string{"token", "-key", strings.Repeat("ab", 32), "-server", "127.0.0.1:1", "-user-data", "xyz"},
			"netcode token: -user-data: not hex (two hex digits a byte, up to 256 bytes)"},
		{"cute token with a netcode key", []string{"cute", "token", "-key", strings.Repeat("ab", 32), "-server", "127.0.0.1:1"},
			"netcode cute: -key: a netcode key (32 bytes), not a 64-byte Cute secret key: netcode cute keygen makes one"},
		{"serve refuses a registry URL before it binds", []string{"serve", "-key", goodKey, "-addr", "127.0.0.1:0", "-registry", "http://127.0.0.1:1"},
			`netcode serve: registry URL "http://127.0.0.1:1": want redis://, rediss://, unix:// or redis+sentinel://`},
		{"serve on a port in use", []string{"serve", "-key", goodKey, "-addr", inUse},
			"netcode serve: -addr: listen udp " + inUse + ": bind: address already in use"},
		{"bridge -webtransport on a port in use", []string{"bridge", "-allow", "127.0.0.1:1", "-addr", "127.0.0.1:0", "-webtransport", inUse},
			"netcode bridge: -webtransport: listen udp " + inUse + ": bind: address already in use"},
		{"serve refuses a -metrics address before it binds", []string{"serve", "-key", goodKey, "-addr", "127.0.0.1:0", "-metrics", "bogus"},
			"netcode serve: -metrics bogus: want host:port (address bogus: missing port in address)"},
		// The server's limits are checked before the socket is bound: on a
		// port in use, the flag is what is refused.
		{"serve -max-clients over the most", []string{"serve", "-key", goodKey, "-addr", inUse, "-max-clients", "70000"},
			"netcode serve: -max-clients 70000: want 1..65536"},
		{"serve -max-clients 0", []string{"serve", "-key", goodKey, "-addr", inUse, "-max-clients", "0"},
			"netcode serve: -max-clients 0: want 1..65536"},
		{"serve -token-rate negative", []string{"serve", "-key", goodKey, "-addr", inUse, "-token-rate", "-1"},
			"netcode serve: -token-rate -1: want a rate of new connections a second, or 0 for 2 per slot"},
		{"serve -token-expiry negative", []string{"serve", "-key", goodKey, "-addr", inUse, "-token-expiry", "-1s"},
			"netcode serve: -token-expiry -1s: want the tokens' lifetime, or 0 for 30s"},
		{"serve token history over the most", []string{"serve", "-key", goodKey, "-addr", inUse, "-token-rate", "1000000", "-token-expiry", "1m"},
			"netcode serve: -token-rate 1000000 × -token-expiry 1m0s is 60000000 tokens to remember, over the 16777216 a token history holds: lower either"},
		{"serve default token rate over the most", []string{"serve", "-key", goodKey, "-addr", inUse, "-max-clients", "65536", "-token-expiry", "2h"},
			"netcode serve: the default -token-rate × -token-expiry 2h0m0s is 117964800 tokens to remember, over the 16777216 a token history holds: lower either"},
		{"bridge refuses an -addr before it binds -webtransport", []string{"bridge", "-allow", "127.0.0.1:1", "-addr", "bogus", "-webtransport", inUse},
			"netcode bridge: -addr bogus: want host:port (address bogus: missing port in address)"},
		{"fleet without flags", []string{"fleet"},
			"netcode fleet: -registry is required: the Redis URL of the fleet registry (redis://host:6379/0), as netcode serve -registry was given"},
		{"zero key text", []string{"token", "-key", zeroHex, "-server", "127.0.0.1:1"},
			"netcode token: -key: " + zeroSays},
		{"zero key file", []string{"token", "-key", zeroFile, "-server", "127.0.0.1:1"},
			"netcode token: key file " + zeroFile + ": " + zeroSays},
		{"zero key, serve", []string{"serve", "-key", zeroFile},
			"netcode serve: key file " + zeroFile + ": " + zeroSays},
		{"not a key file", []string{"token", "-key", badFile, "-server", "127.0.0.1:1"},
			"netcode token: key file " + badFile + ": not a 32-byte key in hex or base64"},
		{"not a key text", []string{"token", "-key", badText, "-server", "127.0.0.1:1"},
			"netcode token: -key: not a 32-byte key in hex or base64, and no file of that name exists"},
		{"bridge without -allow", []string{"bridge"},
			"netcode bridge: name the servers it may dial with -allow or -allow-net (it refuses all others)"},
		{"inspect zeros", []string{"inspect", file("zeros.token", string(make([]byte, token.ConnectTokenBytes)))},
			`netcode inspect: invalid token: version info is not "NETCODE 1.02"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := cli(t, tt.args...)
			assert.Equal(t, 1, code)
			assert.Equal(t, tt.want+"\n", errs)
			assert.NotContains(t, errs, "netcode/")
			assert.NotContains(t, errs, badText, "a key is never quoted")
		})
	}
	b, err := os.ReadFile(existing)
	require.NoError(t, err)
	assert.Equal(t, "keep me\n", string(b), "keygen left the file alone")
}

// TestInspectExpiry checks that inspect says how long a token has left,
// and marks one whose expiry has passed.
func TestInspectExpiry(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		expire uint64
		want   string
	}{
		{uint64(now.Unix()) + 30, "2026-11-25T12:00:30Z (in 30s)"},
		{uint64(now.Unix()) + 3600, "2026-11-25T13:00:00Z (in 1h0m0s)"},
		{uint64(now.Unix()), "2026-11-25T12:00:00Z (EXPIRED 0s ago: mint a new token)"},
		{uint64(now.Unix()) - 90, "2026-11-25T11:58:30Z (EXPIRED 1m30s ago: mint a new token)"},
		{token.NeverExpireTimestamp, "never"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, expiry(tt.expire, now))
	}

	// Through the command: a token minted now, seen a minute later.
	key := strings.Repeat("ab", 32)
	tokFile := filepath.Join(t.TempDir(), "t.token")
	code, _, errs := cli(t, "token", "-key", key, "-server", "127.0.0.1:40000", "-expire", "30", "-o", tokFile)
	require.Equal(t, 0, code, errs)
	inspectNow = func() time.Time { return time.Now().Add(time.Minute) }
	defer func() { inspectNow = time.Now }()
	code, out, errs := cli(t, "inspect", tokFile)
	require.Equal(t, 0, code, errs)
	assert.Regexp(t, `expires: +\S+ \(EXPIRED 3\ds ago: mint a new token\)`, out)
}
