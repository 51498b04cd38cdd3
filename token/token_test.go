package token_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

func TestConstants(t *testing.T) {
	v := loadVectors(t)
	c := v.Constants
	assert.Equal(t, c.ConnectTokenBytes, token.ConnectTokenBytes)
	assert.Equal(t, c.ConnectTokenPrivateBytes, tokenwire.PrivateBytes)
	assert.Equal(t, c.ConnectTokenPrivateBytes-c.MACBytes, tokenwire.PrivatePlainBytes)
	assert.Equal(t, c.ConnectTokenNonceBytes, crypto.TokenNonceBytes)
	assert.Equal(t, c.ChallengeTokenBytes, tokenwire.ChallengeTokenBytes)
	assert.Equal(t, c.ChallengeTokenBytes-c.MACBytes, tokenwire.ChallengePlainBytes)
	assert.Equal(t, c.KeyBytes, crypto.KeyBytes)
	assert.Equal(t, c.UserDataBytes, token.UserDataBytes)
	assert.Equal(t, c.MaxServersPerConnect, token.MaxServers)
	assertBytes(t, []byte(c.VersionInfo), []byte(aead.VersionInfo))
	// A connection request is prefix, version, protocol id, expire, nonce
	// and the sealed private part.
	assert.Equal(t, c.ConnectionRequestPktBytes, 1+len(c.VersionInfo)+8+8+crypto.TokenNonceBytes+tokenwire.PrivateBytes)
}

func TestAddressEncoding(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.AddressEncoding)
	for _, tc := range v.AddressEncoding {
		t.Run(tc.Address, func(t *testing.T) {
			a := tc.addrPort(t)
			require.Equal(t, tc.Port, a.Port())
			enc := tokenwire.AppendAddr(nil, a)
			assertBytes(t, []byte(tc.Encoded), enc)
			assert.Equal(t, byte(tc.Type), enc[0])

			// Appending keeps what is already in dst.
			enc2 := tokenwire.AppendAddr([]byte{0xAA}, a)
			assertBytes(t, append([]byte{0xAA}, tc.Encoded...), enc2)

			got, n, err := tokenwire.ReadAddr(append(bytes.Clone(tc.Encoded), 0xEE, 0xFF))
			require.NoError(t, err)
			assert.Equal(t, len(tc.Encoded), n)
			assert.Equal(t, a, got)

			// Every truncation is refused.
			for i := range len(tc.Encoded) {
				_, _, err := tokenwire.ReadAddr(tc.Encoded[:i])
				assert.ErrorIs(t, err, token.ErrInvalid, "truncated to %d", i)
			}
		})
	}
}

func TestReadAddrBadType(t *testing.T) {
	for _, typ := range []byte{0, 3, 4, 0x7f, 0xff} {
		b := make([]byte, 32)
		b[0] = typ
		_, n, err := tokenwire.ReadAddr(b)
		assert.ErrorIs(t, err, token.ErrInvalid, "type %d", typ)
		assert.Zero(t, n)
	}
}

func TestAppendAddrEdgeCases(t *testing.T) {
	// The zone cannot be carried: it is dropped.
	zoned := netip.AddrPortFrom(netip.MustParseAddr("fe80::1%eth0"), 1)
	assert.Equal(t, tokenwire.AppendAddr(nil, netip.MustParseAddrPort("[fe80::1]:1")), tokenwire.AppendAddr(nil, zoned))
	// An invalid address is written as 0.0.0.0, never panics.
	assertBytes(t, []byte{1, 0, 0, 0, 0, 0x39, 0x30}, tokenwire.AppendAddr(nil, netip.AddrPortFrom(netip.Addr{}, 12345)))
	// A mapped address stays IPv6, as in the reference; unmapping gives IPv4.
	mapped := netip.MustParseAddrPort("[::ffff:10.1.2.3]:7")
	assert.Equal(t, byte(2), tokenwire.AppendAddr(nil, mapped)[0])
	unmapped := netip.AddrPortFrom(mapped.Addr().Unmap(), mapped.Port())
	assertBytes(t, []byte{1, 10, 1, 2, 3, 7, 0}, tokenwire.AppendAddr(nil, unmapped))
}

func TestConnectTokenVectors(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.ConnectTokens, 7)
	for _, tc := range v.ConnectTokens {
		t.Run(tc.Name, func(t *testing.T) {
			in := &tc.Inputs
			requireBytes(t, []byte(aead.VersionInfo), []byte(in.VersionInfo))
			// The vectors' fixed inputs are the common ones.
			assert.Equal(t, v.Common.PrivateKey, in.PrivateKey)
			assert.Equal(t, v.Common.ProtocolID, in.ProtocolID)
			assert.Equal(t, v.Common.CreateTimestamp, in.CreateTimestamp)
			assert.Equal(t, v.Common.Nonce, in.Nonce)
			assert.Equal(t, v.Common.ClientToServerKey, in.ClientToServerKey)
			assert.Equal(t, v.Common.ServerToClientKey, in.ServerToClientKey)
			assert.Equal(t, v.Common.UserData, in.UserData)

			p := in.params(t)
			c2s, s2c := key(t, in.ClientToServerKey), key(t, in.ServerToClientKey)
			n := nonce(t, in.Nonce)

			// Generate reproduces the reference's bytes exactly.
			tok, err := tokentest.GenerateWith(p, in.CreateTimestamp, n, c2s, s2c)
			require.NoError(t, err)
			require.Len(t, tok, token.ConnectTokenBytes)
			requireBytes(t, []byte(tc.ConnectToken), tok)
			assertBytes(t, make([]byte, token.ConnectTokenBytes-tc.PublicUsedBytes), tok[tc.PublicUsedBytes:], "zero padding")

			// Parse reads the public fields.
			ct, err := token.Parse(tc.ConnectToken)
			require.NoError(t, err)
			assert.Equal(t, in.ProtocolID, ct.ProtocolID)
			assert.Equal(t, in.CreateTimestamp, ct.CreateTimestamp)
			assert.Equal(t, in.ExpireTimestamp, ct.ExpireTimestamp)
			assert.Equal(t, n, ct.Nonce)
			assertBytes(t, []byte(tc.PrivateEncrypted), ct.PrivateData[:])
			assert.Equal(t, in.TimeoutSeconds, ct.TimeoutSeconds)
			assert.Equal(t, addrList(t, in.Public), ct.ServerAddrs)
			assert.Equal(t, c2s, ct.ClientToServerKey)
			assert.Equal(t, s2c, ct.ServerToClientKey)

			// And writes them back.
			again, err := ct.AppendBinary(nil)
			require.NoError(t, err)
			assertBytes(t, []byte(tc.ConnectToken), again)

			// The connection request carries the public part's fields.
			req := tc.ConnectionRequestPkt
			require.Len(t, req, v.Constants.ConnectionRequestPktBytes)
			assert.Equal(t, byte(0), req[0])
			assertBytes(t, []byte(aead.VersionInfo), req[1:14])
			assert.Equal(t, ct.ProtocolID, binary.LittleEndian.Uint64(req[14:]))
			assert.Equal(t, ct.ExpireTimestamp, binary.LittleEndian.Uint64(req[22:]))
			assertBytes(t, ct.Nonce[:], req[30:54])
			assertBytes(t, ct.PrivateData[:], req[54:])

			// The private part decrypts and reads back.
			wantPriv := tokenwire.Private{
				ClientID:          in.ClientID,
				TimeoutSeconds:    in.TimeoutSeconds,
				ServerAddrs:       addrList(t, in.Internal),
				ClientToServerKey: c2s,
				ServerToClientKey: s2c,
				UserData:          userData(t, in.UserData),
			}
			aead := crypto.NewPrivateTokenAEAD((*crypto.Key)(&p.PrivateKey))
			sealed := bytes.Clone(ct.PrivateData[:])
			var priv tokenwire.Private
			require.NoError(t, tokenwire.OpenPrivate(sealed, aead, &n, in.ProtocolID, in.ExpireTimestamp, &priv))
			assert.Equal(t, wantPriv, priv)
			assertBytes(t, ct.PrivateData[:], sealed, "OpenPrivate must not modify its input")

			// From the plaintext, as the 1008 sealed bytes or the whole
			// 1024-byte buffer.
			require.Len(t, tc.PrivatePlaintext, tokenwire.PrivateBytes)
			for _, plain := range [][]byte{tc.PrivatePlaintext[:tokenwire.PrivatePlainBytes], tc.PrivatePlaintext} {
				var priv2 tokenwire.Private
				require.NoError(t, tokenwire.ParsePrivate(plain, &priv2))
				assert.Equal(t, wantPriv, priv2)
			}
			assertBytes(t, make([]byte, tokenwire.PrivateBytes-tc.PrivateUsedBytes), []byte(tc.PrivatePlaintext[tc.PrivateUsedBytes:]))

			// SealPrivate makes the same private part.
			got, err := tokenwire.SealPrivate([]byte{1, 2, 3}, &wantPriv, aead, &n, in.ProtocolID, in.ExpireTimestamp)
			require.NoError(t, err)
			assertBytes(t, append([]byte{1, 2, 3}, tc.PrivateEncrypted...), got)
			assertBytes(t, []byte(tc.PrivateMAC), got[len(got)-crypto.MACBytes:])
			ad := vectortest.TokenAD(in.ProtocolID, in.ExpireTimestamp)
			assertBytes(t, []byte(tc.PrivateAD), ad[:])
		})
	}
}

func TestNeverExpiresVector(t *testing.T) {
	v := loadVectors(t)
	tc := findToken(t, v, "no_timeout_never_expires")
	assert.Equal(t, uint64(token.NeverExpireTimestamp), tc.Inputs.ExpireTimestamp)
	assert.Equal(t, int32(-1), tc.Inputs.TimeoutSeconds)
	p := tc.Inputs.params(t)
	require.True(t, p.NeverExpire)
	// NeverExpire wins over any lifetime; a negative lifetime alone is an
	// error, not a token that never expires.
	for _, secs := range []int64{0, 30, math.MaxInt64} {
		p.ExpireSeconds = secs
		tok, err := tokentest.GenerateWith(p, tc.Inputs.CreateTimestamp, nonce(t, tc.Inputs.Nonce), key(t, tc.Inputs.ClientToServerKey), key(t, tc.Inputs.ServerToClientKey))
		require.NoError(t, err)
		assertBytes(t, []byte(tc.ConnectToken), tok, "ExpireSeconds %d", secs)
	}
	p.NeverExpire = false
	for _, secs := range []int64{-1, -30, math.MinInt64} {
		p.ExpireSeconds = secs
		_, err := tokentest.GenerateWith(p, tc.Inputs.CreateTimestamp, nonce(t, tc.Inputs.Nonce), key(t, tc.Inputs.ClientToServerKey), key(t, tc.Inputs.ServerToClientKey))
		require.ErrorIs(t, err, token.ErrInvalid, "ExpireSeconds %d", secs)
	}
}

func TestInvalidConnectTokens(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.InvalidConnectTokens)
	base := findToken(t, v, "ipv4")
	_, err := token.Parse(base.ConnectToken)
	require.NoError(t, err, "the base token is valid")
	for _, tc := range v.InvalidConnectTokens {
		t.Run(tc.Name, func(t *testing.T) {
			require.Equal(t, "connect_tokens[ipv4].connect_token", tc.Base)
			if len(tc.ModifiedBytes) > 0 {
				// The vector is the base with the named bytes changed.
				want := bytes.Clone(base.ConnectToken)
				copy(want[tc.ModifiedOffset:], tc.ModifiedBytes)
				requireBytes(t, want, []byte(tc.ConnectToken))
			}
			ct, err := token.Parse(tc.ConnectToken)
			assert.ErrorIs(t, err, token.ErrInvalid, tc.Reason)
			assert.Nil(t, ct)
		})
	}
}

func TestParseLengths(t *testing.T) {
	v := loadVectors(t)
	good := findToken(t, v, "ipv4").ConnectToken
	for _, n := range []int{0, 1, 13, 1093, 2047, 2049, 4096} {
		b := make([]byte, n)
		copy(b, good)
		_, err := token.Parse(b)
		assert.ErrorIs(t, err, token.ErrInvalid, "length %d", n)
	}
}

func TestParseAddressInLastSlot(t *testing.T) {
	// 32 IPv6 addresses are the most a token can hold: the parse of the
	// largest vector reaches the furthest bytes.
	v := loadVectors(t)
	tc := findToken(t, v, "max_32_ipv6")
	ct, err := token.Parse(tc.ConnectToken)
	require.NoError(t, err)
	assert.Len(t, ct.ServerAddrs, token.MaxServers)
	// A create timestamp equal to the expire timestamp is fine.
	b := bytes.Clone(tc.ConnectToken)
	copy(b[21:29], b[29:37])
	_, err = token.Parse(b)
	assert.NoError(t, err)
}

func TestInvalidPrivateConnectTokens(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.InvalidPrivateTokens)
	base := findToken(t, v, "ipv4")
	aead := crypto.NewPrivateTokenAEAD((*crypto.Key)(base.Inputs.PrivateKey))
	n := nonce(t, base.Inputs.Nonce)
	for _, tc := range v.InvalidPrivateTokens {
		t.Run(tc.Name, func(t *testing.T) {
			require.Equal(t, "connect_tokens[ipv4].private_plaintext", tc.Base)
			want := bytes.Clone(base.PrivatePlaintext)
			copy(want[tc.ModifiedOffset:], tc.ModifiedBytes)
			requireBytes(t, want, []byte(tc.PrivatePlaintext))
			assertBytes(t, []byte(tc.PrivateEncrypted), tc.RequestPacket[54:])

			var p tokenwire.Private
			err := tokenwire.ParsePrivate(tc.PrivatePlaintext[:tokenwire.PrivatePlainBytes], &p)
			assert.ErrorIs(t, err, token.ErrInvalid, tc.Reason)

			// It decrypts, then fails to read: invalid, not a decrypt error.
			err = tokenwire.OpenPrivate(tc.PrivateEncrypted, aead, &n, base.Inputs.ProtocolID, base.Inputs.ExpireTimestamp, &p)
			assert.ErrorIs(t, err, token.ErrInvalid, tc.Reason)
			assert.NotErrorIs(t, err, tokenwire.ErrDecrypt)
		})
	}
}

func TestParsePrivateShort(t *testing.T) {
	v := loadVectors(t)
	plain := findToken(t, v, "ipv4").PrivatePlaintext
	var p tokenwire.Private
	for _, n := range []int{0, 1, 16, 1007} {
		assert.ErrorIs(t, tokenwire.ParsePrivate(plain[:n], &p), token.ErrInvalid, "length %d", n)
	}
	assert.NoError(t, tokenwire.ParsePrivate(plain[:1008], &p))
}

func TestParsePrivateReusesAddrs(t *testing.T) {
	v := loadVectors(t)
	var p tokenwire.Private
	multi := findToken(t, v, "multi").PrivatePlaintext
	single := findToken(t, v, "ipv4").PrivatePlaintext
	require.NoError(t, tokenwire.ParsePrivate(multi, &p))
	require.Len(t, p.ServerAddrs, 5)
	first := &p.ServerAddrs[:1][0]
	require.NoError(t, tokenwire.ParsePrivate(single, &p))
	require.Len(t, p.ServerAddrs, 1)
	assert.Same(t, first, &p.ServerAddrs[0], "the slice is reused")
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.1:40000"), p.ServerAddrs[0])

	allocs := testing.AllocsPerRun(100, func() {
		if err := tokenwire.ParsePrivate(multi, &p); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestOpenPrivateFailures(t *testing.T) {
	v := loadVectors(t)
	tc := findToken(t, v, "multi")
	in := &tc.Inputs
	n := nonce(t, in.Nonce)
	good := crypto.NewPrivateTokenAEAD((*crypto.Key)(in.PrivateKey))
	wrong := crypto.NewPrivateTokenAEAD((*crypto.Key)(v.Common.WrongKey))
	otherNonce := n
	otherNonce[23] ^= 1

	tampered := func(i int) []byte {
		b := bytes.Clone(tc.PrivateEncrypted)
		b[i] ^= 0x80
		return b
	}
	cases := []struct {
		name     string
		sealed   []byte
		aead     *crypto.PrivateTokenAEAD
		nonce    *[crypto.TokenNonceBytes]byte
		protocol uint64
		expire   uint64
		want     error
	}{
		{"ok", tc.PrivateEncrypted, good, &n, in.ProtocolID, in.ExpireTimestamp, nil},
		{"wrong key", tc.PrivateEncrypted, wrong, &n, in.ProtocolID, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"wrong nonce", tc.PrivateEncrypted, good, &otherNonce, in.ProtocolID, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"wrong protocol id", tc.PrivateEncrypted, good, &n, in.ProtocolID + 1, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"wrong expire", tc.PrivateEncrypted, good, &n, in.ProtocolID, in.ExpireTimestamp + 1, tokenwire.ErrDecrypt},
		{"tampered first byte", tampered(0), good, &n, in.ProtocolID, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"tampered padding", tampered(900), good, &n, in.ProtocolID, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"tampered mac", tampered(tokenwire.PrivateBytes - 1), good, &n, in.ProtocolID, in.ExpireTimestamp, tokenwire.ErrDecrypt},
		{"short", tc.PrivateEncrypted[:tokenwire.PrivateBytes-1], good, &n, in.ProtocolID, in.ExpireTimestamp, token.ErrInvalid},
		{"long", append(bytes.Clone(tc.PrivateEncrypted), 0), good, &n, in.ProtocolID, in.ExpireTimestamp, token.ErrInvalid},
		{"empty", nil, good, &n, in.ProtocolID, in.ExpireTimestamp, token.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := bytes.Clone(c.sealed)
			var p tokenwire.Private
			err := tokenwire.OpenPrivate(c.sealed, c.aead, c.nonce, c.protocol, c.expire, &p)
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, in.ClientID, p.ClientID)
			} else {
				assert.ErrorIs(t, err, c.want)
			}
			assertBytes(t, before, c.sealed, "input unchanged")
		})
	}
}

func TestSealPrivateInvalid(t *testing.T) {
	aead := crypto.NewPrivateTokenAEAD(&crypto.Key{})
	var n [crypto.TokenNonceBytes]byte
	ok := netip.MustParseAddrPort("127.0.0.1:1")
	for name, addrs := range map[string][]netip.AddrPort{
		"none":    nil,
		"33":      make33(ok),
		"invalid": {ok, {}},
		"zoned":   {netip.AddrPortFrom(netip.MustParseAddr("fe80::1%lo"), 1)},
	} {
		dst := []byte{9}
		out, err := tokenwire.SealPrivate(dst, &tokenwire.Private{ServerAddrs: addrs}, aead, &n, 1, 2)
		assert.ErrorIs(t, err, token.ErrInvalid, name)
		assertBytes(t, []byte{9}, out, name)
	}
}

func make33(a netip.AddrPort) []netip.AddrPort {
	out := make([]netip.AddrPort, 33)
	for i := range out {
		out[i] = a
	}
	return out
}

func TestSealPrivateZeroAlloc(t *testing.T) {
	aead := crypto.NewPrivateTokenAEAD(&crypto.Key{1})
	var n [crypto.TokenNonceBytes]byte
	p := tokenwire.Private{ClientID: 7, ServerAddrs: []netip.AddrPort{netip.MustParseAddrPort("[::1]:5")}}
	buf := make([]byte, 0, tokenwire.PrivateBytes)
	allocs := testing.AllocsPerRun(100, func() {
		out, err := tokenwire.SealPrivate(buf[:0], &p, aead, &n, 1, 2)
		if err != nil || len(out) != tokenwire.PrivateBytes {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)

	var q tokenwire.Private
	sealed, err := tokenwire.SealPrivate(nil, &p, aead, &n, 1, 2)
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(100, func() {
		if err := tokenwire.OpenPrivate(sealed, aead, &n, 1, 2, &q); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	q.ServerAddrs = slicesClip(q.ServerAddrs)
	assert.Equal(t, p, q)
}

// slicesClip drops the spare capacity so that equality ignores it.
func slicesClip(a []netip.AddrPort) []netip.AddrPort { return a[:len(a):len(a)] }

func TestChallengeTokenVectors(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.ChallengeTokens)
	for _, tc := range v.ChallengeTokens {
		t.Run(tc.Name, func(t *testing.T) {
			assert.Empty(t, tc.AD)
			assert.Equal(t, v.Common.ChallengeKey, tc.Key)
			a := aead.New((*crypto.Key)(tc.Key))
			c := tokenwire.Challenge{ClientID: tc.ClientID, UserData: userData(t, tc.UserData)}

			// The plaintext layout.
			// The vectors show the reference's whole 300-byte buffer: the
			// plaintext then the 16 bytes the MAC is written over.
			require.Len(t, tc.Plaintext, tokenwire.ChallengeTokenBytes)
			assertBytes(t, make([]byte, crypto.MACBytes), tc.Plaintext[tokenwire.ChallengePlainBytes:])
			assert.Equal(t, tc.ClientID, binary.LittleEndian.Uint64(tc.Plaintext))
			assertBytes(t, []byte(tc.UserData), tc.Plaintext[8:8+token.UserDataBytes])
			assertBytes(t, make([]byte, tokenwire.ChallengePlainBytes-8-token.UserDataBytes), tc.Plaintext[8+token.UserDataBytes:tokenwire.ChallengePlainBytes])

			sealed := tokenwire.AppendChallenge(nil, a, tc.Sequence, &c)
			requireBytes(t, []byte(tc.Encrypted), sealed)
			assertBytes(t, []byte(tc.MAC), sealed[tokenwire.ChallengeTokenBytes-crypto.MACBytes:])
			withPrefix := tokenwire.AppendChallenge([]byte("xyz"), a, tc.Sequence, &c)
			assertBytes(t, append([]byte("xyz"), tc.Encrypted...), withPrefix)

			var got tokenwire.Challenge
			before := bytes.Clone(tc.Encrypted)
			require.NoError(t, tokenwire.OpenChallenge(a, tc.Sequence, tc.Encrypted, &got))
			assert.Equal(t, c, got)
			assertBytes(t, before, []byte(tc.Encrypted), "OpenChallenge must not modify its input")
		})
	}
}

func TestOpenChallengeFailures(t *testing.T) {
	v := loadVectors(t)
	tc := v.ChallengeTokens[2]
	a := aead.New((*crypto.Key)(tc.Key))
	wrong := aead.New((*crypto.Key)(v.Common.WrongKey))
	tampered := func(i int) []byte {
		b := bytes.Clone(tc.Encrypted)
		b[i] ^= 1
		return b
	}
	cases := []struct {
		name   string
		a      *aead.AEAD
		seq    uint64
		sealed []byte
		want   error
	}{
		{"ok", a, tc.Sequence, tc.Encrypted, nil},
		{"wrong sequence", a, tc.Sequence + 1, tc.Encrypted, tokenwire.ErrDecrypt},
		{"wrong key", wrong, tc.Sequence, tc.Encrypted, tokenwire.ErrDecrypt},
		{"tampered client id", a, tc.Sequence, tampered(0), tokenwire.ErrDecrypt},
		{"tampered padding", a, tc.Sequence, tampered(280), tokenwire.ErrDecrypt},
		{"tampered mac", a, tc.Sequence, tampered(299), tokenwire.ErrDecrypt},
		{"empty", a, tc.Sequence, nil, token.ErrInvalid},
		{"299", a, tc.Sequence, tc.Encrypted[:299], token.ErrInvalid},
		{"301", a, tc.Sequence, append(bytes.Clone(tc.Encrypted), 0), token.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := bytes.Clone(c.sealed)
			var ch tokenwire.Challenge
			err := tokenwire.OpenChallenge(c.a, c.seq, c.sealed, &ch)
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.ClientID, ch.ClientID)
			} else {
				assert.ErrorIs(t, err, c.want)
			}
			assertBytes(t, before, c.sealed)
		})
	}
}

func TestChallengeZeroAlloc(t *testing.T) {
	a := aead.New(&crypto.Key{3})
	c := tokenwire.Challenge{ClientID: 42}
	c.UserData[255] = 9
	buf := make([]byte, 0, tokenwire.ChallengeTokenBytes)
	var sealed []byte
	allocs := testing.AllocsPerRun(100, func() {
		sealed = tokenwire.AppendChallenge(buf[:0], a, 77, &c)
	})
	assert.Zero(t, allocs)
	var got tokenwire.Challenge
	allocs = testing.AllocsPerRun(100, func() {
		if err := tokenwire.OpenChallenge(a, 77, sealed, &got); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, c, got)
	// A failing open does not allocate either.
	allocs = testing.AllocsPerRun(100, func() {
		if tokenwire.OpenChallenge(a, 78, sealed, &got) == nil {
			t.Fatal("opened with the wrong sequence")
		}
	})
	assert.Zero(t, allocs)
}

func testParams() token.Params {
	p := token.Params{
		ProtocolID:     0x1122334455667788,
		ClientID:       99,
		PrivateKey:     [32]byte{1, 2, 3},
		ServerAddrs:    []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("[::1]:40001")},
		ExpireSeconds:  45,
		TimeoutSeconds: 10,
	}
	p.UserData[0] = 0xAB
	return p
}

func TestGenerate(t *testing.T) {
	p := testParams()
	before := uint64(time.Now().Unix())
	tok, err := token.Generate(&p)
	after := uint64(time.Now().Unix())
	require.NoError(t, err)
	require.Len(t, tok, token.ConnectTokenBytes)

	ct, err := token.Parse(tok)
	require.NoError(t, err)
	assert.Equal(t, p.ProtocolID, ct.ProtocolID)
	assert.GreaterOrEqual(t, ct.CreateTimestamp, before)
	assert.LessOrEqual(t, ct.CreateTimestamp, after)
	assert.Equal(t, ct.CreateTimestamp+45, ct.ExpireTimestamp)
	assert.Equal(t, p.TimeoutSeconds, ct.TimeoutSeconds)
	assert.Equal(t, p.ServerAddrs, ct.ServerAddrs)
	assert.NotEqual(t, ct.ClientToServerKey, ct.ServerToClientKey)
	assert.NotEqual(t, crypto.Key{}, ct.ClientToServerKey)

	var priv tokenwire.Private
	require.NoError(t, tokenwire.OpenPrivate(ct.PrivateData[:], crypto.NewPrivateTokenAEAD((*crypto.Key)(&p.PrivateKey)), &ct.Nonce, ct.ProtocolID, ct.ExpireTimestamp, &priv))
	assert.Equal(t, p.ClientID, priv.ClientID)
	assert.Equal(t, p.TimeoutSeconds, priv.TimeoutSeconds)
	assert.Equal(t, p.ServerAddrs, priv.ServerAddrs, "internal addresses default to the public ones")
	assert.Equal(t, ct.ClientToServerKey, priv.ClientToServerKey)
	assert.Equal(t, ct.ServerToClientKey, priv.ServerToClientKey)
	assert.Equal(t, p.UserData, priv.UserData)

	// Every token has its own nonce and keys.
	tok2, err := token.Generate(&p)
	require.NoError(t, err)
	ct2, err := token.Parse(tok2)
	require.NoError(t, err)
	assert.NotEqual(t, ct.Nonce, ct2.Nonce)
	assert.NotEqual(t, ct.ClientToServerKey, ct2.ClientToServerKey)
	assert.NotEqual(t, ct.ServerToClientKey, ct2.ServerToClientKey)
}

func TestGenerateInternalAddrs(t *testing.T) {
	p := testParams()
	p.InternalAddrs = []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2")}
	tok, err := token.Generate(&p)
	require.NoError(t, err)
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	assert.Equal(t, p.ServerAddrs, ct.ServerAddrs)
	var priv tokenwire.Private
	require.NoError(t, tokenwire.OpenPrivate(ct.PrivateData[:], crypto.NewPrivateTokenAEAD((*crypto.Key)(&p.PrivateKey)), &ct.Nonce, ct.ProtocolID, ct.ExpireTimestamp, &priv))
	assert.Equal(t, p.InternalAddrs, priv.ServerAddrs)
}

func TestGenerateExpire(t *testing.T) {
	p := testParams()
	var n [crypto.TokenNonceBytes]byte
	cases := []struct {
		create  uint64
		seconds int64
		want    uint64
	}{
		{1000, 0, 1000 + 30},
		{1000, 30, 1030},
		{0, math.MaxInt64, math.MaxInt64},
		{math.MaxUint64 - 5, 10, token.NeverExpireTimestamp}, // saturates, never wraps
		{math.MaxUint64 - 5, 5, math.MaxUint64},
		{math.MaxUint64, 0, math.MaxUint64},
	}
	for _, c := range cases {
		p.ExpireSeconds = c.seconds
		tok, err := tokentest.GenerateWith(p, c.create, n, crypto.Key{}, crypto.Key{})
		require.NoError(t, err)
		ct, err := token.Parse(tok)
		require.NoError(t, err, "create %d seconds %d", c.create, c.seconds)
		assert.Equal(t, c.create, ct.CreateTimestamp)
		assert.Equal(t, c.want, ct.ExpireTimestamp, "create %d seconds %d", c.create, c.seconds)
	}
}

// TestGenerateDefaults: zero lifetimes mean the documented defaults, and
// disabling the timeout takes the named NoTimeout; the wire carries what
// the reference reads.
func TestGenerateDefaults(t *testing.T) {
	tests := []struct {
		name        string
		expire      int64
		timeout     int32
		wantLife    uint64
		wantTimeout int32
	}{
		{"zero values", 0, 0, 30, 5},
		{"explicit", 45, 10, 45, 10},
		{"no timeout", 0, token.NoTimeout, 30, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testParams()
			p.ExpireSeconds, p.TimeoutSeconds = tt.expire, tt.timeout
			tok, err := token.Generate(&p)
			require.NoError(t, err)
			ct, err := token.Parse(tok)
			require.NoError(t, err)
			assert.Equal(t, tt.wantLife, ct.ExpireTimestamp-ct.CreateTimestamp)
			assert.Equal(t, tt.wantTimeout, ct.TimeoutSeconds)
			var priv tokenwire.Private
			key := crypto.Key(p.PrivateKey)
			require.NoError(t, tokenwire.OpenPrivate(append([]byte(nil), ct.PrivateData[:]...), crypto.NewPrivateTokenAEAD(&key), &ct.Nonce, p.ProtocolID, ct.ExpireTimestamp, &priv))
			assert.Equal(t, tt.wantTimeout, priv.TimeoutSeconds)
		})
	}
}

func TestGenerateInvalid(t *testing.T) {
	ok := netip.MustParseAddrPort("127.0.0.1:40000")
	cases := map[string]func(p *token.Params){
		"no servers":         func(p *token.Params) { p.ServerAddrs = nil },
		"33 servers":         func(p *token.Params) { p.ServerAddrs = make33(ok) },
		"invalid server":     func(p *token.Params) { p.ServerAddrs = []netip.AddrPort{ok, {}} },
		"zoned server":       func(p *token.Params) { p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort("[fe80::1%eth0]:1")} },
		"internal too short": func(p *token.Params) { p.InternalAddrs = []netip.AddrPort{ok} },
		"internal too long":  func(p *token.Params) { p.InternalAddrs = []netip.AddrPort{ok, ok, ok} },
		"internal invalid":   func(p *token.Params) { p.InternalAddrs = []netip.AddrPort{ok, {}} },
		"internal 33 for 33": func(p *token.Params) { p.ServerAddrs = make33(ok); p.InternalAddrs = make33(ok) },
		"all-zero key":       func(p *token.Params) { p.PrivateKey = [crypto.KeyBytes]byte{} },
		"negative expiry":    func(p *token.Params) { p.ExpireSeconds = -1 },
		"timeout -2":         func(p *token.Params) { p.TimeoutSeconds = -2 },
		"timeout min int32":  func(p *token.Params) { p.TimeoutSeconds = math.MinInt32 },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			p := testParams()
			mod(&p)
			tok, err := token.Generate(&p)
			assert.ErrorIs(t, err, token.ErrInvalid)
			assert.Nil(t, tok)
			tok, err = tokentest.GenerateWith(p, 1, [crypto.TokenNonceBytes]byte{}, crypto.Key{}, crypto.Key{})
			assert.ErrorIs(t, err, token.ErrInvalid)
			assert.Nil(t, tok)
		})
	}
	// 32 servers is the maximum and works, with IPv6 everywhere.
	p := testParams()
	p.ServerAddrs = make33(netip.MustParseAddrPort("[2001:db8::1]:65535"))[:32]
	tok, err := token.Generate(&p)
	require.NoError(t, err)
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	assert.Len(t, ct.ServerAddrs, 32)
}

// TestGenerateUnspecifiedAddr: a server address no client can send to
// (what a Listener bound to ":0" reports as its Addr) is refused with the
// message the CLI gives, and so is port 0.
func TestGenerateUnspecifiedAddr(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:40000", "[::]:48558", "[::ffff:0.0.0.0]:1", "127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			p := testParams()
			p.ServerAddrs = append(p.ServerAddrs, netip.MustParseAddrPort(addr))
			tok, err := token.Generate(&p)
			assert.Nil(t, tok)
			assert.ErrorIs(t, err, token.ErrInvalid)
			assert.ErrorIs(t, err, token.ErrUnspecifiedAddr)
			assert.EqualError(t, err, "netcode/token: invalid token: server address "+addr+": a concrete address and port are needed, not an unspecified address or port 0")
			_, err = tokentest.GenerateWith(p, 1, [crypto.TokenNonceBytes]byte{}, crypto.Key{1}, crypto.Key{2})
			assert.ErrorIs(t, err, token.ErrUnspecifiedAddr)
		})
	}
}

func TestAppendBinaryInvalid(t *testing.T) {
	v := loadVectors(t)
	good, err := token.Parse(findToken(t, v, "multi").ConnectToken)
	require.NoError(t, err)
	cases := map[string]func(ct *token.ConnectToken){
		"no servers":     func(ct *token.ConnectToken) { ct.ServerAddrs = nil },
		"33 servers":     func(ct *token.ConnectToken) { ct.ServerAddrs = make33(ct.ServerAddrs[0]) },
		"invalid server": func(ct *token.ConnectToken) { ct.ServerAddrs[1] = netip.AddrPort{} },
		"create>expire":  func(ct *token.ConnectToken) { ct.CreateTimestamp = ct.ExpireTimestamp + 1 },
	}
	for name, mod := range cases {
		ct := *good
		ct.ServerAddrs = append([]netip.AddrPort(nil), good.ServerAddrs...)
		mod(&ct)
		out, err := ct.AppendBinary([]byte{5})
		assert.ErrorIs(t, err, token.ErrInvalid, name)
		assertBytes(t, []byte{5}, out, name)
	}
	// Appending keeps the prefix.
	out, err := good.AppendBinary([]byte{5})
	require.NoError(t, err)
	assert.Equal(t, byte(5), out[0])
	assertBytes(t, []byte(findToken(t, v, "multi").ConnectToken), out[1:])
}

func TestGenerateConcurrent(t *testing.T) {
	p := testParams()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				tok, err := token.Generate(&p)
				if err == nil {
					_, err = token.Parse(tok)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}

// Params.Rand and Params.Time replace the random source and the clock: the
// same inputs give the same token, and a source that runs dry is an error,
// never a token with a short nonce or keys.
func TestGenerateRandAndTime(t *testing.T) {
	p := testParams()
	created := time.Unix(1_700_000_000, 0)
	p.Time = func() time.Time { return created }
	rnd := bytes.Repeat([]byte{7}, crypto.TokenNonceBytes+2*crypto.KeyBytes)
	p.Rand = bytes.NewReader(rnd)
	a, err := token.Generate(&p)
	require.NoError(t, err)
	p.Rand = bytes.NewReader(rnd)
	b, err := token.Generate(&p)
	require.NoError(t, err)
	require.Equal(t, a, b)
	ct, err := token.Parse(a)
	require.NoError(t, err)
	assert.Equal(t, uint64(created.Unix()), ct.CreateTimestamp)
	assert.Equal(t, crypto.Key(rnd[:crypto.KeyBytes]), ct.ClientToServerKey)

	p.Rand = bytes.NewReader(rnd[:len(rnd)-1])
	_, err = token.Generate(&p)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
