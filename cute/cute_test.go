package cute

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testParams(t *testing.T) (TokenParams, PublicKey) {
	t.Helper()
	pk, sk := GenerateKeyPair()
	return TokenParams{
		ApplicationID: 0x1122334455667788,
		ClientID:      42,
		SecretKey:     sk,
		ServerAddrs:   []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("[::1]:40001")},
		UserData:      [UserDataBytes]byte{1, 2, 3, 255: 9},
		Now:           time.Unix(1_700_000_000, 0),
	}, pk
}

// TestGenerateToken mints a token and reads it as a client and as a
// server would.
func TestGenerateToken(t *testing.T) {
	p, pk := testParams(t)
	tok, err := GenerateToken(&p)
	require.NoError(t, err)
	require.Len(t, tok, ConnectTokenBytes)

	ct, err := ParseToken(tok)
	require.NoError(t, err)
	assert.Equal(t, p.ApplicationID, ct.ApplicationID)
	assert.Equal(t, p.Now, ct.Created)
	assert.Equal(t, p.Now.Add(DefaultExpireSeconds*time.Second), ct.Expires)
	assert.Equal(t, DefaultHandshakeTimeoutSeconds*time.Second, ct.HandshakeTimeout)
	assert.Equal(t, p.ServerAddrs, ct.ServerAddrs)

	var st wire.ServerToken
	sk := [SecretKeyBytes]byte(p.SecretKey)
	require.NoError(t, wire.ReadServerToken(tok[wire.RESTBytes:], (*[32]byte)(&pk), &sk, p.ApplicationID, uint64(p.Now.Unix()), &st))
	assert.Equal(t, p.ClientID, st.ClientID)
	assert.Equal(t, p.UserData, st.UserData)
	assert.Equal(t, [32]byte(tok[26:58]), st.ClientToServer)
	assert.Equal(t, [32]byte(tok[58:90]), st.ServerToClient)

	// Random keys, IV and signature: a second token differs everywhere
	// secret.
	tok2, err := GenerateToken(&p)
	require.NoError(t, err)
	assert.NotEqual(t, tok[26:90], tok2[26:90])
	assert.NotEqual(t, tok[wire.RESTBytes+wire.PublicBytes:], tok2[wire.RESTBytes+wire.PublicBytes:])
}

// TestGenerateTokenRefuses covers every refusal.
func TestGenerateTokenRefuses(t *testing.T) {
	p, _ := testParams(t)
	mismatch := p.SecretKey
	mismatch[40] ^= 1
	many := make([]netip.AddrPort, 29)
	for i := range many {
		many[i] = netip.MustParseAddrPort("[2001:db8::1]:1")
	}
	tests := []struct {
		name string
		edit func(*TokenParams)
		want error
	}{
		{"zero key", func(p *TokenParams) { p.SecretKey = SecretKey{} }, ErrZeroKey},
		{"public half mismatch", func(p *TokenParams) { p.SecretKey = mismatch }, ErrKeyMismatch},
		{"negative expiry", func(p *TokenParams) { p.ExpireSeconds = -1 }, errExpire},
		{"negative timeout", func(p *TokenParams) { p.HandshakeTimeoutSeconds = -1 }, errTimeout},
		{"no servers", func(p *TokenParams) { p.ServerAddrs = nil }, errServers},
		{"29 IPv6 servers", func(p *TokenParams) { p.ServerAddrs = many }, wire.ErrTooManyEndpoints},
		{"invalid address", func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{{}} }, wire.ErrBadEndpoint},
		{"before 1970", func(p *TokenParams) { p.Now = time.Unix(-5, 0) }, errNow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			tc.edit(&q)
			tok, err := GenerateToken(&q)
			assert.Nil(t, tok)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// TestParseTokenRefuses: a damaged token is an ErrInvalidConnectToken.
func TestParseTokenRefuses(t *testing.T) {
	p, _ := testParams(t)
	tok, err := GenerateToken(&p)
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"short":           tok[:100],
		"version":         append([]byte("CUTE 1.01\x00"), tok[10:]...),
		"public app id":   func() []byte { b := append([]byte{}, tok...); b[wire.RESTBytes+11]++; return b }(),
		"endpoint type 3": func() []byte { b := append([]byte{}, tok...); b[wire.RESTBytes+35] = 3; return b }(),
	} {
		_, err := ParseToken(b)
		assert.True(t, errors.Is(err, ErrInvalidConnectToken), "%s: %v", name, err)
	}
}

// TestSecretKeyNotPrinted: formatting a secret key never shows it.
func TestSecretKeyNotPrinted(t *testing.T) {
	_, sk := GenerateKeyPair()
	assert.Equal(t, "cute.SecretKey{…}", sk.String())
	assert.Equal(t, "cute.SecretKey{…}", sk.GoString())
	pk := sk.Public()
	assert.Len(t, pk.String(), 64)
}
