package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/internal/testing/redistest"
	"github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBackend runs the example over HTTPS with a certificate made in the
// test, against a real netcode server on loopback (IPv4 and IPv6): a player
// with the right secret gets a token and connects with it; a wrong secret
// gets 401, and asking too often gets 429.
func TestBackend(t *testing.T) {
	for _, f := range loopback.Families {
		t.Run(f.Name, func(t *testing.T) {
			f.Require(t)
			dir := t.TempDir()
			key, err := crypto.GenerateKey()
			require.NoError(t, err)
			keyFile := filepath.Join(dir, "server.key")
			require.NoError(t, os.WriteFile(keyFile, []byte(hex.EncodeToString(key[:])+"\n"), 0o600))
			users := filepath.Join(dir, "users.txt")
			require.NoError(t, os.WriteFile(users, []byte("# players\n42 0123456789abcdef-alice\n43 0123456789abcdef-bob\n"), 0o600))
			cert, err := devcert.New("127.0.0.1", "::1")
			require.NoError(t, err)
			certFile, certKey := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			require.NoError(t, os.WriteFile(certFile, cert.CertPEM, 0o600))
			require.NoError(t, os.WriteFile(certKey, cert.KeyPEM, 0o600))

			l, err := netcode.Listen(f.Network, f.Addr, &netcode.ServerConfig{ProtocolID: 0x6e6574636f646531, PrivateKey: key})
			require.NoError(t, err)
			defer l.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addrc := make(chan net.Addr, 1)
			done := make(chan error, 1)
			var logs bytes.Buffer // read only after run returns
			go func() {
				done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-key", keyFile, "-server", l.Addr().String(),
					"-users", users, "-tls-cert", certFile, "-tls-key", certKey, "-burst", "2", "-rate", "0.1"},
					io.Discard, &logs, func(a net.Addr) { addrc <- a })
			}()
			var url string
			select {
			case a := <-addrc:
				url = "https://" + a.String() + "/token"
			case err := <-done:
				t.Fatalf("backend ended: %v\n%s", err, logs.String())
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: cert.ClientConfig()}}
			defer client.CloseIdleConnections()
			post := func(auth string) (*http.Response, []byte) {
				req, err := http.NewRequest("POST", url, nil)
				require.NoError(t, err)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := client.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, b
			}

			resp, _ := post("Bearer 0123456789abcdef-mallory")
			assert.Equal(t, 401, resp.StatusCode)
			assert.Equal(t, `Bearer realm="netcode"`, resp.Header.Get("WWW-Authenticate"))
			resp, _ = post("")
			assert.Equal(t, 401, resp.StatusCode)

			resp, tok := post("Bearer 0123456789abcdef-alice")
			require.Equal(t, 200, resp.StatusCode, "%s", tok)
			assert.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
			s := loopback.Connect(t, l, tok)
			assert.Equal(t, uint64(42), s.ClientID())

			resp, _ = post("bearer 0123456789abcdef-alice") // the scheme is case-insensitive
			assert.Equal(t, 200, resp.StatusCode)
			resp, _ = post("Bearer 0123456789abcdef-alice")
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, "10", resp.Header.Get("Retry-After"))
			resp, _ = post("Bearer 0123456789abcdef-bob")
			assert.Equal(t, 200, resp.StatusCode)

			cancel()
			require.NoError(t, <-done)
			assert.Contains(t, logs.String(), "netcode token backend serving")
		})
	}
}

func TestBearerAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "users")
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		return p
	}
	for _, tc := range []struct{ file, want string }{
		{"", "no users"},
		{"1\n", "want CLIENT-ID SECRET"},
		{"0 0123456789abcdef\n", "above 0"},
		{"x 0123456789abcdef\n", "above 0"},
		{"1 short\n", "shorter than 16"},
		{"1 0123456789abcdef\n2 0123456789abcdef\n", "users:2: the same secret as client id 1"},
	} {
		_, err := loadUsers(write(tc.file), io.Discard)
		assert.ErrorContains(t, err, tc.want, "%q", tc.file)
	}
	var out bytes.Buffer
	a, err := loadUsers("", &out)
	require.NoError(t, err)
	secret := strings.Fields(out.String())[len(strings.Fields(out.String()))-1]
	r, _ := http.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	id, err := a.authenticate(r)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), id.ClientID)
	r.Header.Set("Authorization", "Basic "+secret)
	_, err = a.authenticate(r)
	assert.ErrorIs(t, err, backend.ErrUnauthorized)
	r.Header.Set("Authorization", "Bearer "+secret+"x")
	_, err = a.authenticate(r)
	assert.ErrorIs(t, err, backend.ErrUnauthorized)
}

func TestServerFlag(t *testing.T) {
	var l serverList
	require.NoError(t, l.Set("127.0.0.1:40000"))
	require.NoError(t, l.Set("203.0.113.7:40000=10.0.0.7:40000"))
	assert.Equal(t, "127.0.0.1:40000,203.0.113.7:40000=10.0.0.7:40000", l.String())
	assert.Error(t, l.Set("localhost:40000"))
	assert.Error(t, l.Set("203.0.113.7:40000=nat"))
}

// TestBackendRegistry runs the example with -registry against a real
// redis-server: a token names the registered server of the region with
// the tag, and the rate limit is kept in Redis.
func TestBackendRegistry(t *testing.T) {
	redisSrv := redistest.Start(t)
	rdb, err := fleet.NewClient(redisSrv.URL())
	require.NoError(t, err)
	defer rdb.Close()
	dir := t.TempDir()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "server.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(hex.EncodeToString(key[:])+"\n"), 0o600))
	users := filepath.Join(dir, "users.txt")
	require.NoError(t, os.WriteFile(users, []byte("42 0123456789abcdef-alice\n"), 0o600))

	const proto = 0x6e6574636f646531
	var ls []*netcode.Listener
	for _, tags := range [][]string{nil, {"ranked"}} {
		l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: proto, PrivateKey: key})
		require.NoError(t, err)
		defer l.Close()
		reg, err := fleet.Register(context.Background(), l, fleet.ServerConfig{Client: rdb, ProtocolID: proto, Region: "eu", Tags: tags})
		require.NoError(t, err)
		defer reg.Close()
		ls = append(ls, l)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer // read only after run returns
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-key", keyFile, "-registry", redisSrv.URL(), "-region", "eu", "-tags", "ranked",
			"-users", users, "-burst", "2", "-rate", "0.1", "-metrics"}, io.Discard, &logs, func(a net.Addr) { addrc <- a })
	}()
	var url string
	select {
	case a := <-addrc:
		url = "https://" + a.String() + "/token"
	case err := <-done:
		t.Fatalf("backend ended: %v\n%s", err, logs.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the example's own self-signed certificate
	defer client.CloseIdleConnections()
	post := func() (*http.Response, []byte) {
		req, err := http.NewRequest("POST", url, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer 0123456789abcdef-alice")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, tok := post()
	require.Equal(t, 200, resp.StatusCode, "%s", tok)
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	assert.Equal(t, []string{ls[1].Addr().String()}, []string{ct.ServerAddrs[0].String()}, "the one server with the tag")
	assert.Len(t, ct.ServerAddrs, 1)
	s := loopback.Connect(t, ls[1], tok)
	assert.Equal(t, uint64(42), s.ClientID())
	resp, _ = post()
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = post()
	assert.Equal(t, 429, resp.StatusCode)
	keys, err := rdb.Keys(context.Background(), "*netcode:fleet:rate:42").Result()
	require.NoError(t, err)
	assert.Len(t, keys, 1, "the rate is kept in Redis")

	mresp, err := client.Get(strings.TrimSuffix(url, "/token") + "/metrics")
	require.NoError(t, err)
	mbody, err := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(mbody), "netcode_fleet_chooser_choices_total 2", "the Chooser's metrics")
	assert.Contains(t, string(mbody), "netcode_fleet_chooser_servers 2")

	cancel()
	require.NoError(t, <-done)
}
