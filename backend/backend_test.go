package backend_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const protocolID = 0x7465737462636b31

var testKey = crypto.Key{1, 2, 3, 4, 5, 6, 7, 8, 9}

// bearer is a test Authenticate hook: "Bearer <id>" is user id; "Bearer
// banned" is forbidden; "Bearer broken" fails with a secret in the error.
func bearer(r *http.Request) (backend.Identity, error) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok:
		return backend.Identity{}, backend.ErrUnauthorized
	case v == "banned":
		return backend.Identity{}, backend.ErrForbidden
	case v == "broken":
		return backend.Identity{}, errors.New("database password hunter2 rejected")
	case v == "zero":
		return backend.Identity{ClientID: 0}, nil
	case v == "fat":
		return backend.Identity{ClientID: 9, UserData: make([]byte, 257)}, nil
	}
	id := uint64(0)
	for _, c := range v {
		id = id*31 + uint64(c)
	}
	return backend.Identity{ClientID: id, UserData: []byte("user " + v)}, nil
}

var servers = []backend.Server{
	{Addr: netip.MustParseAddrPort("127.0.0.1:40000")},
	{Addr: netip.MustParseAddrPort("[::1]:40001")},
}

func newHandler(t *testing.T, mod func(*backend.Config)) *backend.Handler {
	t.Helper()
	cfg := backend.Config{
		ProtocolID:     protocolID,
		PrivateKey:     testKey,
		Authenticate:   bearer,
		Servers:        servers,
		ExpireSeconds:  60,
		TimeoutSeconds: 7,
		Burst:          3,
		Challenge:      `Bearer realm="test"`,
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := backend.NewHandler(&cfg)
	require.NoError(t, err)
	return h
}

func do(h http.Handler, method, auth, accept string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "https://backend.test/token", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestStatusCodes checks every answer of the handler.
func TestStatusCodes(t *testing.T) {
	tests := []struct {
		name, method, auth, accept string
		code                       int
		ctype                      string
		header, value              string
	}{
		{"token", "POST", "Bearer alice", "", 200, "application/octet-stream", "Cache-Control", "no-store"},
		{"token binary asked", "POST", "Bearer alice", "application/octet-stream", 200, "application/octet-stream", "", ""},
		{"token text", "POST", "Bearer alice", "text/plain", 200, "text/plain; charset=utf-8", "", ""},
		{"token text or binary", "POST", "Bearer alice", "text/plain, application/octet-stream", 200, "application/octet-stream", "", ""},
		{"token text refused", "POST", "Bearer alice", "text/plain;q=0", 200, "application/octet-stream", "", ""},
		{"get", "GET", "Bearer alice", "", 405, "text/plain; charset=utf-8", "Allow", "POST"},
		{"no credentials", "POST", "", "", 401, "text/plain; charset=utf-8", "WWW-Authenticate", `Bearer realm="test"`},
		{"forbidden", "POST", "Bearer banned", "", 403, "text/plain; charset=utf-8", "", ""},
		{"hook fails", "POST", "Bearer broken", "", 500, "text/plain; charset=utf-8", "", ""},
		{"client id 0", "POST", "Bearer zero", "", 500, "text/plain; charset=utf-8", "", ""},
		{"user data too big", "POST", "Bearer fat", "", 500, "text/plain; charset=utf-8", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := do(newHandler(t, nil), tc.method, tc.auth, tc.accept)
			assert.Equal(t, tc.code, w.Code)
			assert.Equal(t, tc.ctype, w.Header().Get("Content-Type"))
			if tc.header != "" {
				assert.Equal(t, tc.value, w.Header().Get(tc.header))
			}
			body := w.Body.Bytes()
			if tc.code != 200 {
				assert.Equal(t, http.StatusText(tc.code)+"\n", string(body), "only the status text, no details")
				return
			}
			if strings.HasPrefix(tc.ctype, "text/plain") {
				var err error
				body, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(body)))
				require.NoError(t, err)
			}
			require.Len(t, body, token.ConnectTokenBytes)
			ct, err := token.Parse(body)
			require.NoError(t, err)
			assert.Equal(t, uint64(protocolID), ct.ProtocolID)
			assert.Equal(t, []netip.AddrPort{servers[0].Addr, servers[1].Addr}, ct.ServerAddrs)
			assert.Equal(t, int32(7), ct.TimeoutSeconds)
			assert.Equal(t, uint64(60), ct.ExpireTimestamp-ct.CreateTimestamp)
			// The private part is sealed with the key and names the user.
			priv := openPrivate(t, ct, testKey)
			assert.Equal(t, "user alice", string(priv.UserData[:10]))
			assert.Equal(t, []netip.AddrPort{servers[0].Addr, servers[1].Addr}, priv.ServerAddrs)
		})
	}
}

// openPrivate opens a token's private part as a server does.
func openPrivate(t *testing.T, ct *token.ConnectToken, key crypto.Key) *tokenwire.Private {
	t.Helper()
	var priv tokenwire.Private
	require.NoError(t, tokenwire.OpenPrivate(ct.PrivateData[:], crypto.NewPrivateTokenAEAD(&key), &ct.Nonce, ct.ProtocolID, ct.ExpireTimestamp, &priv))
	return &priv
}

// TestRateLimit: a user gets Burst tokens at once, then 429 with a
// Retry-After; another user is not affected.
func TestRateLimit(t *testing.T) {
	h := newHandler(t, func(c *backend.Config) { c.Rate = 0.5 })
	for i := range 3 {
		assert.Equal(t, 200, do(h, "POST", "Bearer bob", "").Code, "request %d", i)
	}
	w := do(h, "POST", "Bearer bob", "")
	assert.Equal(t, 429, w.Code)
	assert.Equal(t, "2", w.Header().Get("Retry-After"))
	assert.Equal(t, "Too Many Requests\n", w.Body.String())
	assert.Equal(t, 200, do(h, "POST", "Bearer carol", "").Code)
	assert.Equal(t, 2, h.Users())
	// Refused requests are not rate-limited per user (there is no user):
	// they never enter the table.
	assert.Equal(t, 401, do(h, "POST", "", "").Code)
	assert.Equal(t, 2, h.Users())
}

// TestChooseServers: the chooser's servers go in the token, internal
// addresses in its private part; ErrNoServers answers 503 and a bad choice
// 500.
func TestChooseServers(t *testing.T) {
	pub := netip.MustParseAddrPort("203.0.113.7:40000")
	internal := netip.MustParseAddrPort("10.0.0.7:40000")
	var choice []backend.Server
	var chooseErr error
	h := newHandler(t, func(c *backend.Config) {
		c.Servers = nil
		c.ChooseServers = func(r *http.Request, id backend.Identity) ([]backend.Server, error) {
			return choice, chooseErr
		}
	})
	tests := []struct {
		name   string
		choice []backend.Server
		err    error
		code   int
	}{
		{"nat", []backend.Server{{Addr: pub, InternalAddr: internal}}, nil, 200},
		{"full", nil, fmt.Errorf("region eu: %w", backend.ErrNoServers), 503},
		{"none", nil, nil, 500},
		{"wildcard", []backend.Server{{Addr: netip.MustParseAddrPort("0.0.0.0:40000")}}, nil, 500},
		{"no port", []backend.Server{{Addr: netip.MustParseAddrPort("127.0.0.1:0")}}, nil, 500},
		{"33 servers", make([]backend.Server, 33), nil, 500},
		{"failed", nil, errors.New("fleet api down"), 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			choice, chooseErr = tc.choice, tc.err
			w := do(h, "POST", "Bearer "+tc.name, "")
			require.Equal(t, tc.code, w.Code)
			if tc.code == 503 {
				assert.Equal(t, "1", w.Header().Get("Retry-After"))
			}
			if tc.code != 200 {
				return
			}
			ct, err := token.Parse(w.Body.Bytes())
			require.NoError(t, err)
			assert.Equal(t, []netip.AddrPort{pub}, ct.ServerAddrs)
			assert.Equal(t, []netip.AddrPort{internal}, openPrivate(t, ct, testKey).ServerAddrs)
		})
	}
}

func TestNewHandlerErrors(t *testing.T) {
	ok := backend.Config{PrivateKey: testKey, Authenticate: bearer, Servers: servers}
	tests := []struct {
		name string
		mod  func(*backend.Config)
		want string
	}{
		{"no hook", func(c *backend.Config) { c.Authenticate = nil }, "Authenticate"},
		{"zero key", func(c *backend.Config) { c.PrivateKey = crypto.Key{} }, "all zeros"},
		{"no servers", func(c *backend.Config) { c.Servers = nil }, "0 servers"},
		{"wildcard server", func(c *backend.Config) { c.Servers = []backend.Server{{Addr: netip.MustParseAddrPort("[::]:1")}} }, "concrete"},
		{"negative expire", func(c *backend.Config) { c.ExpireSeconds = -1 }, "negative"},
		{"negative burst", func(c *backend.Config) { c.Burst = -1 }, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			_, err := backend.NewHandler(&cfg)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err := backend.NewHandler(&ok)
	assert.NoError(t, err)
}

// TestEndToEndTLS fetches a token from the handler over HTTPS (a
// certificate made for the test) and uses it to dial a real netcode server
// on loopback, IPv4 and IPv6, and exchange a payload.
func TestEndToEndTLS(t *testing.T) {
	for _, f := range loopback.Families {
		t.Run(f.Name, func(t *testing.T) {
			f.Require(t)
			l, err := netcode.Listen(f.Network, f.Addr, &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: testKey})
			require.NoError(t, err)
			defer l.Close()
			h := newHandler(t, func(c *backend.Config) {
				c.Servers = []backend.Server{{Addr: netip.MustParseAddrPort(l.Addr().String())}}
			})
			hs := httptest.NewTLSServer(h)
			defer hs.Close()

			req, err := http.NewRequest("POST", hs.URL+"/token", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer dave")
			resp, err := hs.Client().Do(req)
			require.NoError(t, err)
			tok, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, "%s", tok)
			require.NotNil(t, resp.TLS, "served over TLS")

			s := loopback.Connect(t, l, tok)
			ud := s.UserData()
			assert.Equal(t, "user dave", string(ud[:9]))

			// A client that does not trust the certificate gets no token.
			_, err = http.Post(hs.URL+"/token", "", nil)
			assert.ErrorContains(t, err, "certificate")
		})
	}
}

// TestDefaults: zero lifetimes in the Config mean the documented defaults,
// never a token that is born expired.
func TestDefaults(t *testing.T) {
	h := newHandler(t, func(c *backend.Config) { c.ExpireSeconds, c.TimeoutSeconds = 0, 0 })
	w := do(h, "POST", "Bearer erin", "")
	require.Equal(t, 200, w.Code)
	ct, err := token.Parse(w.Body.Bytes())
	require.NoError(t, err)
	assert.Equal(t, uint64(30), ct.ExpireTimestamp-ct.CreateTimestamp)
	assert.Equal(t, int32(10), ct.TimeoutSeconds)
}

// BenchmarkHandler is one token request through the handler: the hook,
// the rate limit, Generate and the response.
func BenchmarkHandler(b *testing.B) {
	h, err := backend.NewHandler(&backend.Config{
		ProtocolID:   protocolID,
		PrivateKey:   testKey,
		Authenticate: func(*http.Request) (backend.Identity, error) { return backend.Identity{ClientID: 1}, nil },
		Servers:      servers,
		Rate:         rate.Inf,
	})
	require.NoError(b, err)
	r := httptest.NewRequest("POST", "https://backend.test/token", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		h.ServeHTTP(w, r)
	}
	require.Equal(b, 200, w.Code)
}

func TestServerString(t *testing.T) {
	a := netip.MustParseAddrPort("203.0.113.7:40000")
	b := netip.MustParseAddrPort("10.0.0.7:40000")
	assert.Equal(t, "203.0.113.7:40000", backend.Server{Addr: a}.String())
	assert.Equal(t, "203.0.113.7:40000", backend.Server{Addr: a, InternalAddr: a}.String())
	assert.Equal(t, "203.0.113.7:40000=10.0.0.7:40000", backend.Server{Addr: a, InternalAddr: b}.String())
}

// TestCuteTokens: with Config.Cute the handler mints Cute Protocol tokens
// that a cute.Listener accepts over real UDP, with the caller's client id
// and user data; a zero Cute key is refused.
func TestCuteTokens(t *testing.T) {
	for _, f := range loopback.Families {
		t.Run(f.Name, func(t *testing.T) {
			f.Require(t)
			pk, sk := cute.GenerateKeyPair()
			l, err := cute.Listen(f.Network, f.Addr, &cute.ServerConfig{ApplicationID: 0xc0de, PublicKey: pk, SecretKey: sk})
			require.NoError(t, err)
			defer l.Close()
			h := newHandler(t, func(c *backend.Config) {
				c.PrivateKey = crypto.Key{}
				c.Cute = &backend.CuteTokens{ApplicationID: 0xc0de, SecretKey: sk}
				c.Servers = []backend.Server{{Addr: netip.MustParseAddrPort(l.Addr().String())}}
			})
			w := do(h, "POST", "Bearer dave", "")
			require.Equal(t, 200, w.Code, w.Body.String())
			require.Len(t, w.Body.Bytes(), cute.ConnectTokenBytes)
			ct, err := cute.ParseToken(w.Body.Bytes())
			require.NoError(t, err)
			assert.Equal(t, uint64(0xc0de), ct.ApplicationID)

			cli, err := cute.Dial(w.Body.Bytes())
			require.NoError(t, err)
			defer cli.Close()
			srv, err := l.AcceptConn(context.Background())
			require.NoError(t, err)
			defer srv.Close()
			ud := srv.UserData()
			assert.Equal(t, "user dave", string(ud[:9]))
		})
	}
	_, err := backend.NewHandler(&backend.Config{Authenticate: bearer, Servers: servers, Cute: &backend.CuteTokens{}})
	require.ErrorContains(t, err, "all zeros")
}
