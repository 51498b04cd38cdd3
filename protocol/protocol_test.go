package protocol

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

const testProtocolID = 0x1122334455667788

func testKeys() (c2s, s2c *crypto.PacketAEAD) {
	var k1, k2 crypto.Key
	for i := range k1 {
		k1[i] = byte(0x40 + i)
		k2[i] = byte(0x80 + i)
	}
	return crypto.NewPacketAEAD(&k1, testProtocolID), crypto.NewPacketAEAD(&k2, testProtocolID)
}

func TestPacketTypeString(t *testing.T) {
	tests := []struct {
		t    PacketType
		want string
	}{
		{ConnectionRequest, "connection request"},
		{ConnectionDenied, "connection denied"},
		{ConnectionChallenge, "connection challenge"},
		{ConnectionResponse, "connection response"},
		{KeepAlive, "keep-alive"},
		{Payload, "payload"},
		{Disconnect, "disconnect"},
		{numPacketTypes, "PacketType(7)"},
		{255, "PacketType(255)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.t.String())
	}
}

func TestTypeSet(t *testing.T) {
	tests := []struct {
		set  TypeSet
		in   []PacketType
		name string
	}{
		{ServerAccepts, []PacketType{ConnectionRequest, ConnectionResponse, KeepAlive, Payload, Disconnect}, "server"},
		{ClientAccepts, []PacketType{ConnectionDenied, ConnectionChallenge, KeepAlive, Payload, Disconnect}, "client"},
		{0, nil, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.set, typesOf(tt.in...))
			for typ := PacketType(0); typ < 16; typ++ {
				want := false
				for _, in := range tt.in {
					want = want || in == typ
				}
				assert.Equal(t, want, tt.set.has(typ), "%v", typ)
			}
		})
	}
	assert.False(t, TypeSet(0xff).has(numPacketTypes), "invalid types are never members")
}

func TestMalformedErrors(t *testing.T) {
	for _, err := range []error{errLength, errPacketType, errNotAllowed, errSequenceBytes, errVersionInfo, errBodySize} {
		assert.ErrorIs(t, err, ErrMalformed)
		assert.Contains(t, err.Error(), "netcode/protocol: malformed packet: ")
		for _, other := range []error{ErrProtocolID, ErrExpired, ErrNoKey, ErrReplayed, ErrDecrypt} {
			assert.NotErrorIs(t, err, other)
		}
	}
}

// typesOf returns the set holding the given types.
func typesOf(types ...PacketType) TypeSet {
	var s TypeSet
	for _, t := range types {
		s |= 1 << t
	}
	return s
}

func TestPeekType(t *testing.T) {
	tests := []struct {
		b    []byte
		want PacketType
		ok   bool
	}{
		{nil, 0, false},
		{[]byte{}, 0, false},
		{[]byte{0x00}, ConnectionRequest, true},
		{[]byte{0x11, 0xff}, ConnectionDenied, true},
		{[]byte{0x82}, ConnectionChallenge, true},
		{[]byte{0x03}, ConnectionResponse, true}, // no validation of the sequence length
		{[]byte{0xf4}, KeepAlive, true},
		{[]byte{0x15}, Payload, true},
		{[]byte{0x16}, Disconnect, true},
		{[]byte{0x17}, 0, false},
		{[]byte{0x1f}, 0, false},
	}
	for _, tt := range tests {
		got, ok := PeekType(tt.b)
		assert.Equal(t, tt.ok, ok, "% x", tt.b)
		assert.Equal(t, tt.want, got, "% x", tt.b)
	}
}

func TestSequenceBytes(t *testing.T) {
	assert.Equal(t, 1, sequenceBytes(0))
	for n := 1; n <= 8; n++ {
		top := uint64(math.MaxUint64) >> (64 - 8*n)
		assert.Equal(t, n, sequenceBytes(top), "%#x", top)
		if n > 1 {
			assert.Equal(t, n, sequenceBytes(top>>8+1), "%#x", top>>8+1)
		}
	}
}

func TestAppendEncryptedOverlap(t *testing.T) {
	c2s, _ := testKeys()
	body := []byte("hello, overlapping world")
	want := appendEncrypted(nil, c2s, Payload, 1000, body)

	// The body written where the packet starts (dst's spare capacity).
	buf := make([]byte, 3, 100)
	copy(buf[:3], "abc")
	in := append(buf[3:3], body...)
	got := appendEncrypted(buf, c2s, Payload, 1000, in)
	assert.Equal(t, want, got[3:])
	assert.Equal(t, "abc", string(got[:3]))
	assert.Equal(t, &buf[0], &got[0], "no reallocation")

	// The body written where it will be sealed (after a 2-byte sequence).
	buf = make([]byte, 0, 100)
	in = append(buf[3:3], body...)
	got = AppendPayload(buf, c2s, 1000, in)
	assert.Equal(t, want, got)

	// Same for challenge tokens.
	tok := bytes.Repeat([]byte{0xab}, ChallengeTokenBytes)
	wantCh := AppendChallenge(nil, c2s, 5, 6, tok)
	buf = make([]byte, 0, 400)
	in = append(buf[:0], tok...)
	assert.Equal(t, wantCh, AppendChallenge(buf, c2s, 5, 6, in))

	// And the sealed private part of a request.
	priv := bytes.Repeat([]byte{0xcd}, PrivateTokenBytes)
	var nonce [crypto.TokenNonceBytes]byte
	wantReq := AppendConnectionRequest(nil, 1, 2, &nonce, priv)
	buf = make([]byte, 0, 1200)
	in = append(buf[:0], priv...)
	assert.Equal(t, wantReq, AppendConnectionRequest(buf, 1, 2, &nonce, in))
}

func TestWriterPanicsOnWrongSizes(t *testing.T) {
	c2s, _ := testKeys()
	var nonce [crypto.TokenNonceBytes]byte
	assert.Panics(t, func() { AppendChallenge(nil, c2s, 1, 1, make([]byte, 299)) })
	assert.Panics(t, func() { AppendResponse(nil, c2s, 1, 1, make([]byte, 301)) })
	assert.Panics(t, func() { AppendConnectionRequest(nil, 1, 1, &nonce, make([]byte, 1023)) })
}

func TestRoundTripAllTypes(t *testing.T) {
	c2s, s2c := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	client := Reader{ProtocolID: testProtocolID, Allowed: ClientAccepts}
	tok := bytes.Repeat([]byte{7}, ChallengeTokenBytes)
	payload := bytes.Repeat([]byte{9}, MaxPayloadBytes)

	tests := []struct {
		name  string
		pkt   []byte
		r     *Reader
		key   *crypto.PacketAEAD
		check func(t *testing.T, p *Packet)
	}{
		{"denied", AppendDenied(nil, s2c, 1), &client, s2c, func(t *testing.T, p *Packet) {}},
		{"challenge", AppendChallenge(nil, s2c, serverGlobalSequenceStart, 42, tok), &client, s2c, func(t *testing.T, p *Packet) {
			assert.Equal(t, uint64(42), p.ChallengeSequence)
			assert.Equal(t, tok, p.ChallengeToken)
			assert.Equal(t, ChallengeTokenBytes, cap(p.ChallengeToken))
		}},
		{"response", AppendResponse(nil, c2s, 3, 42, tok), &server, c2s, func(t *testing.T, p *Packet) {
			assert.Equal(t, uint64(42), p.ChallengeSequence)
			assert.Equal(t, tok, p.ChallengeToken)
		}},
		{"keep-alive", AppendKeepAlive(nil, s2c, 4, 4095, 4096), &client, s2c, func(t *testing.T, p *Packet) {
			assert.Equal(t, uint32(4095), p.ClientIndex)
			assert.Equal(t, uint32(4096), p.MaxClients)
		}},
		{"payload", AppendPayload(nil, c2s, 5, payload), &server, c2s, func(t *testing.T, p *Packet) {
			assert.Equal(t, payload, p.Payload)
			assert.Equal(t, len(p.Payload), cap(p.Payload))
		}},
		{"disconnect", AppendDisconnect(nil, c2s, 6), &server, c2s, func(t *testing.T, p *Packet) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.LessOrEqual(t, len(tt.pkt), MaxPacketBytes)
			var p Packet
			data := bytes.Clone(tt.pkt)
			require.NoError(t, tt.r.Read(data, 0, tt.key, nil, &p))
			tt.check(t, &p)
			// Wrong direction's key: refused, and p is cleared.
			other := c2s
			if tt.key == c2s {
				other = s2c
			}
			assert.Equal(t, ErrDecrypt, tt.r.Read(bytes.Clone(tt.pkt), 0, other, nil, &p))
			assert.Equal(t, Packet{}, p)
		})
	}
}

func TestReadOrder(t *testing.T) {
	c2s, _ := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	valid := AppendKeepAlive(nil, c2s, 1000, 0, 0)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	tests := []struct {
		name string
		data []byte
		key  *crypto.PacketAEAD
		want error
	}{
		{"empty no key", nil, nil, errLength},
		// The reference checks for a key before anything else about an
		// encrypted packet.
		{"short no key", []byte{0x14}, nil, ErrNoKey},
		{"bad type no key", mod(func(b []byte) []byte { b[0] = 0x27; return b }), nil, ErrNoKey},
		{"short bad type", []byte{0x1f, 0, 0}, c2s, errLength},
		{"bad type bad sequence length", mod(func(b []byte) []byte { b[0] = 0x0f; return b }), c2s, errPacketType},
		{"not allowed bad sequence length", mod(func(b []byte) []byte { b[0] = 0x02; return b }), c2s, errNotAllowed},
		{"encrypted type 0", mod(func(b []byte) []byte { b[0] = 0x10; return b }), c2s, errPacketType},
		{"sequence length beyond packet", append([]byte{0x84}, make([]byte, 23)...), c2s, errLength},
		{"minimal length, 8 sequence bytes", append([]byte{0x84}, make([]byte, 24)...), c2s, ErrDecrypt},
		{"valid", valid, c2s, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Packet
			assert.Equal(t, tt.want, server.Read(tt.data, 0, tt.key, nil, &p))
		})
	}
}

func TestRequestChecksInOrder(t *testing.T) {
	var priv crypto.Key
	tokenAEAD := crypto.NewPrivateTokenAEAD(&priv)
	var nonce [crypto.TokenNonceBytes]byte
	plain := bytes.Repeat([]byte{1}, privateTokenPlainBytes)
	const expire = 1000
	sealed := aead.SealToken(tokenAEAD, nil, &nonce, testProtocolID, expire, plain)
	valid := AppendConnectionRequest(nil, testProtocolID, expire, &nonce, sealed)
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts, TokenAEAD: tokenAEAD}

	tests := []struct {
		name string
		edit func(b []byte) []byte
		r    Reader
		now  uint64
		want error
	}{
		{"valid", nil, server, expire - 1, nil},
		{"not allowed before length", func(b []byte) []byte { return b[:5] }, Reader{Allowed: ClientAccepts}, 0, errNotAllowed},
		{"length before key", func(b []byte) []byte { return b[:5] }, Reader{Allowed: ServerAccepts}, 0, errLength},
		{"key before version", func(b []byte) []byte { b[1] = 'X'; return b }, Reader{Allowed: ServerAccepts}, 0, ErrNoKey},
		{"version before protocol", func(b []byte) []byte { b[1] = 'X'; b[14]++; return b }, server, 0, errVersionInfo},
		{"protocol before expiry", func(b []byte) []byte { b[14]++; return b }, server, expire, ErrProtocolID},
		{"expiry before decryption", func(b []byte) []byte { b[100]++; return b }, server, expire, ErrExpired},
		{"far future now", nil, server, math.MaxUint64, ErrExpired},
		{"decryption", func(b []byte) []byte { b[100]++; return b }, server, 0, ErrDecrypt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(valid)
			if tt.edit != nil {
				b = tt.edit(b)
			}
			var p Packet
			err := tt.r.Read(b, tt.now, nil, nil, &p)
			assert.Equal(t, tt.want, err)
			if err == nil {
				assert.Equal(t, plain, p.PrivateToken)
				assert.Equal(t, uint64(expire), p.ExpireTimestamp)
			}
		})
	}
}

// As in the reference, replay protection advances as soon as a packet
// authenticates, even if its body then has the wrong size, and only for
// keep-alive, payload and disconnect.
func TestReplayAdvanceOrder(t *testing.T) {
	c2s, _ := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	var rp ReplayProtection
	var p Packet

	bad := appendEncrypted(nil, c2s, KeepAlive, 10, make([]byte, 7))
	assert.Equal(t, errBodySize, server.Read(bad, 0, c2s, &rp, &p))
	assert.Equal(t, uint64(10), rp.mostRecent)
	assert.True(t, rp.alreadyReceived(10))
	assert.Equal(t, ErrReplayed, server.Read(AppendKeepAlive(nil, c2s, 10, 0, 0), 0, c2s, &rp, &p))

	resp := AppendResponse(nil, c2s, 20, 1, make([]byte, ChallengeTokenBytes))
	require.NoError(t, server.Read(bytes.Clone(resp), 0, c2s, &rp, &p))
	assert.Equal(t, uint64(10), rp.mostRecent, "responses are not replay protected")
	require.NoError(t, server.Read(resp, 0, c2s, &rp, &p))

	for _, typ := range []PacketType{Payload, Disconnect} {
		pkt := appendEncrypted(nil, c2s, typ, 30+uint64(typ), []byte{1})
		if typ == Disconnect {
			pkt = AppendDisconnect(nil, c2s, 30+uint64(typ))
		}
		require.NoError(t, server.Read(bytes.Clone(pkt), 0, c2s, &rp, &p))
		assert.Equal(t, ErrReplayed, server.Read(pkt, 0, c2s, &rp, &p))
	}
}

func TestReplayProtection(t *testing.T) {
	var r ReplayProtection
	assert.False(t, r.alreadyReceived(0))
	assert.False(t, r.alreadyReceived(math.MaxUint64))
	r.advance(0)
	assert.True(t, r.alreadyReceived(0))
	r.advance(300)
	assert.True(t, r.alreadyReceived(44), "300-256")
	assert.False(t, r.alreadyReceived(45))
	assert.True(t, r.alreadyReceived(300))
	assert.False(t, r.alreadyReceived(301))
	assert.False(t, r.alreadyReceived(299))

	// Near the top of the sequence space nothing wraps.
	r = ReplayProtection{}
	top := uint64(math.MaxUint64 - 1)
	r.advance(top)
	assert.False(t, r.alreadyReceived(top-1))
	assert.False(t, r.alreadyReceived(top-255))
	assert.True(t, r.alreadyReceived(top-256))
	assert.True(t, r.alreadyReceived(top))
	assert.False(t, r.alreadyReceived(math.MaxUint64))
	r.advance(math.MaxUint64)
	assert.Equal(t, uint64(math.MaxUint64), r.mostRecent)
	assert.False(t, r.alreadyReceived(math.MaxUint64), "reference quirk: 2^64-1 is the empty marker")
	assert.True(t, r.alreadyReceived(top))
}

func TestZeroAllocs(t *testing.T) {
	c2s, s2c := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	client := Reader{ProtocolID: testProtocolID, Allowed: ClientAccepts}
	payload := bytes.Repeat([]byte{3}, MaxPayloadBytes)
	tok := make([]byte, ChallengeTokenBytes)
	buf := make([]byte, 0, MaxPacketBytes)
	in := make([]byte, MaxPacketBytes)
	var rp ReplayProtection
	var p Packet
	seq := uint64(0)

	writers := map[string]func() []byte{
		"denied":     func() []byte { return AppendDenied(buf[:0], s2c, seq) },
		"challenge":  func() []byte { return AppendChallenge(buf[:0], s2c, seq, 1, tok) },
		"response":   func() []byte { return AppendResponse(buf[:0], c2s, seq, 1, tok) },
		"keep-alive": func() []byte { return AppendKeepAlive(buf[:0], c2s, seq, 1, 2) },
		"payload":    func() []byte { return AppendPayload(buf[:0], c2s, seq, payload) },
		"disconnect": func() []byte { return AppendDisconnect(buf[:0], c2s, seq) },
		"generic":    func() []byte { return appendEncrypted(buf[:0], c2s, Payload, seq, payload[:10]) },
	}
	for name, w := range writers {
		assert.Zero(t, testing.AllocsPerRun(100, func() { seq++; w() }), name)
	}

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		seq++
		pkt := AppendPayload(buf[:0], c2s, seq, payload)
		n := copy(in, pkt)
		if err := server.Read(in[:n], 0, c2s, &rp, &p); err != nil {
			t.Fatal(err)
		}
	}), "read payload")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		seq++
		pkt := AppendChallenge(buf[:0], s2c, seq, 1, tok)
		n := copy(in, pkt)
		if err := client.Read(in[:n], 0, s2c, &rp, &p); err != nil {
			t.Fatal(err)
		}
	}), "read challenge")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = server.Read(in[:50], 0, c2s, &rp, &p) // garbage: refused
	}), "refuse garbage")
}

// serverGlobalSequenceStart is where the reference server starts the
// sequence numbers of challenges and denials (internal/server's
// GlobalSequenceStart; the vectors check it there too).
const serverGlobalSequenceStart uint64 = 1 << 63
