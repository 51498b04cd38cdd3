package crypto_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// hexBytes is a byte string written as hex in the vectors file.
type hexBytes = vectortest.Hex

type vecPacket struct {
	Name          string   `json:"name"`
	PacketType    int      `json:"packet_type"`
	Sequence      uint64   `json:"sequence,string"`
	SequenceBytes int      `json:"sequence_bytes"`
	PrefixByte    byte     `json:"prefix_byte"`
	ProtocolID    uint64   `json:"protocol_id,string"`
	Key           hexBytes `json:"key"`
	AD            hexBytes `json:"associated_data"`
	Nonce         hexBytes `json:"nonce"`
	Plaintext     hexBytes `json:"plaintext_body"`
	PacketBytes   int      `json:"packet_bytes"`
	Packet        hexBytes `json:"packet"`
}

type vecInvalidPacket struct {
	Name        string   `json:"name"`
	RejectStage string   `json:"reject_stage"`
	Reason      string   `json:"reason"`
	ReadKey     hexBytes `json:"read_key"`
	ProtocolID  uint64   `json:"protocol_id,string"`
	PrivateKey  hexBytes `json:"private_key"`
	Packet      hexBytes `json:"packet"`
}

type vecAccepted struct {
	Name       string   `json:"name"`
	ReadKey    hexBytes `json:"read_key"`
	ProtocolID uint64   `json:"protocol_id,string"`
	Sequence   uint64   `json:"sequence,string"`
	SeqBytes   int      `json:"sequence_bytes"`
	Plaintext  hexBytes `json:"plaintext_body"`
	Packet     hexBytes `json:"packet"`
}

type vectors struct {
	Format    string `json:"format"`
	Constants struct {
		VersionInfo             hexBytes `json:"version_info"`
		KeyBytes                int      `json:"key_bytes"`
		MACBytes                int      `json:"mac_bytes"`
		MinEncryptedPacketBytes int      `json:"min_encrypted_packet_bytes"`
	} `json:"constants"`
	Common struct {
		PrivateKey        hexBytes `json:"private_key"`
		ProtocolID        uint64   `json:"protocol_id,string"`
		ClientToServerKey hexBytes `json:"client_to_server_key"`
		ServerToClientKey hexBytes `json:"server_to_client_key"`
		ChallengeKey      hexBytes `json:"challenge_key"`
		WrongKey          hexBytes `json:"wrong_key"`
	} `json:"common_inputs"`
	ConnectTokens []struct {
		Name   string `json:"name"`
		Inputs struct {
			ProtocolID      uint64   `json:"protocol_id,string"`
			ExpireTimestamp uint64   `json:"expire_timestamp,string"`
			Nonce           hexBytes `json:"nonce"`
			PrivateKey      hexBytes `json:"private_key"`
		} `json:"inputs"`
		PrivatePlaintext hexBytes `json:"private_plaintext"`
		PrivateAD        hexBytes `json:"private_associated_data"`
		PrivateEncrypted hexBytes `json:"private_encrypted"`
		PrivateMAC       hexBytes `json:"private_mac"`
	} `json:"connect_tokens"`
	ChallengeTokens []struct {
		Name      string   `json:"name"`
		Key       hexBytes `json:"challenge_key"`
		Sequence  uint64   `json:"challenge_token_sequence,string"`
		Nonce     hexBytes `json:"nonce"`
		AD        hexBytes `json:"associated_data"`
		Plaintext hexBytes `json:"plaintext"`
		Encrypted hexBytes `json:"encrypted"`
		MAC       hexBytes `json:"mac"`
	} `json:"challenge_tokens"`
	Packets        []vecPacket        `json:"packets"`
	InvalidPackets []vecInvalidPacket `json:"invalid_packets"`
	Accepted       []vecAccepted      `json:"accepted_edge_cases"`
}

func loadVectors(t testing.TB) *vectors {
	t.Helper()
	return vectortest.Once[vectors](t, "netcode-1.02.json", vectortest.Load)
}

func key(t testing.TB, b []byte) *crypto.Key {
	t.Helper()
	require.Len(t, b, crypto.KeyBytes)
	k := crypto.Key(b)
	return &k
}

// assertBytes checks that got equals want, reporting only where they first
// differ rather than both byte strings in full.
func assertBytes(t testing.TB, want, got []byte, what string) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	win := func(b []byte) string { return hex.EncodeToString(b[i:min(i+16, len(b))]) }
	t.Errorf("%s: bytes differ: len want %d, got %d; first difference at %d: want %q, got %q",
		what, len(want), len(got), i, win(want), win(got))
	return false
}

// splitPacket splits an encrypted packet into prefix byte, sequence number
// and ciphertext (body and MAC).
func splitPacket(t testing.TB, pkt []byte) (byte, uint64, []byte) {
	t.Helper()
	require.NotEmpty(t, pkt)
	prefix := pkt[0]
	n := int(prefix >> 4)
	require.True(t, n >= 1 && n <= 8 && len(pkt) >= 1+n, "sequence bytes %d", n)
	var seq [8]byte
	copy(seq[:], pkt[1:1+n])
	return prefix, binary.LittleEndian.Uint64(seq[:]), pkt[1+n:]
}

func TestConstants(t *testing.T) {
	v := loadVectors(t)
	assertBytes(t, v.Constants.VersionInfo, []byte(aead.VersionInfo), "version info")
	assert.Equal(t, v.Constants.KeyBytes, crypto.KeyBytes)
	assert.Equal(t, v.Constants.MACBytes, crypto.MACBytes)
	assert.Equal(t, 24, crypto.TokenNonceBytes)
	assert.Len(t, vectortest.PacketAD(0, 0), 22)
	assert.Len(t, vectortest.TokenAD(0, 0), 29)
	// The smallest encrypted packet is a prefix, one sequence byte and a MAC.
	assert.Equal(t, v.Constants.MinEncryptedPacketBytes, 1+1+crypto.MACBytes)
}

func TestPacketVectors(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.Packets, 68)
	for _, tc := range v.Packets {
		t.Run(tc.Name, func(t *testing.T) {
			require.Len(t, tc.Packet, tc.PacketBytes)
			prefix, seq, ct := splitPacket(t, tc.Packet)
			require.Equal(t, tc.PrefixByte, prefix)
			require.Equal(t, tc.Sequence, seq)
			require.Equal(t, tc.SequenceBytes, int(prefix>>4))
			require.Equal(t, tc.PacketType, int(prefix&0xf))

			// Associated data and nonce are built as the reference does.
			ad := vectortest.PacketAD(tc.ProtocolID, prefix)
			assertBytes(t, tc.AD, ad[:], "associated data")
			var nonce [chacha20poly1305.NonceSize]byte
			binary.LittleEndian.PutUint64(nonce[4:], seq)
			assertBytes(t, tc.Nonce, nonce[:], "nonce")
			raw, err := chacha20poly1305.New(tc.Key)
			require.NoError(t, err)
			assertBytes(t, ct, raw.Seal(nil, nonce[:], tc.Plaintext, tc.AD), "raw ChaCha20-Poly1305")

			// PacketAEAD seals to the reference's bytes and opens them.
			p := crypto.NewPacketAEAD(key(t, tc.Key), tc.ProtocolID)
			sealed := aead.SealPacket(p, bytes.Clone(tc.Packet[:len(tc.Packet)-len(ct)]), prefix, seq, tc.Plaintext)
			assertBytes(t, tc.Packet, sealed, "sealed packet")
			opened, err := aead.OpenPacket(p, nil, prefix, seq, ct)
			require.NoError(t, err)
			assertBytes(t, tc.Plaintext, opened, "opened body")

			// The plain AEAD with explicit associated data agrees.
			a := aead.New(key(t, tc.Key))
			assertBytes(t, ct, a.Seal(nil, seq, tc.Plaintext, ad[:]), "AEAD seal")

			// In place, both ways.
			buf := bytes.Clone(ct)
			opened, err = aead.OpenPacket(p, buf[:0], prefix, seq, buf)
			require.NoError(t, err)
			assertBytes(t, tc.Plaintext, opened, "opened in place")
			resealed := aead.SealPacket(p, opened[:0], prefix, seq, opened)
			assertBytes(t, ct, resealed, "sealed in place")
		})
	}
}

func TestAcceptedEdgeCases(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.Accepted)
	for _, tc := range v.Accepted {
		t.Run(tc.Name, func(t *testing.T) {
			prefix, seq, ct := splitPacket(t, tc.Packet)
			require.Equal(t, tc.Sequence, seq)
			require.Equal(t, tc.SeqBytes, int(prefix>>4))
			p := crypto.NewPacketAEAD(key(t, tc.ReadKey), tc.ProtocolID)
			got, err := aead.OpenPacket(p, nil, prefix, seq, ct)
			require.NoError(t, err)
			assertBytes(t, tc.Plaintext, got, "body")
		})
	}
}

// TestInvalidPacketsDecrypt checks that every packet the reference refuses at
// its decryption stage fails to open here too.
func TestInvalidPacketsDecrypt(t *testing.T) {
	v := loadVectors(t)
	count := 0
	for _, tc := range v.InvalidPackets {
		if tc.RejectStage != "decrypt" {
			continue
		}
		count++
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Packet[0] == 0 {
				// A connection request: the private connect token fails.
				require.Len(t, tc.Packet, 1078)
				expire := binary.LittleEndian.Uint64(tc.Packet[22:30])
				nonce := [crypto.TokenNonceBytes]byte(tc.Packet[30:54])
				pt := crypto.NewPrivateTokenAEAD(key(t, tc.PrivateKey))
				_, err := aead.OpenToken(pt, nil, &nonce, tc.ProtocolID, expire, tc.Packet[54:])
				assert.ErrorIs(t, err, aead.ErrOpen, tc.Reason)
				return
			}
			prefix, seq, ct := splitPacket(t, tc.Packet)
			p := crypto.NewPacketAEAD(key(t, tc.ReadKey), tc.ProtocolID)
			_, err := aead.OpenPacket(p, nil, prefix, seq, ct)
			assert.ErrorIs(t, err, aead.ErrOpen, tc.Reason)
		})
	}
	assert.Equal(t, 12, count)
}

func TestPrivateTokenVectors(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.ConnectTokens)
	for _, tc := range v.ConnectTokens {
		t.Run(tc.Name, func(t *testing.T) {
			in := tc.Inputs
			nonce := [crypto.TokenNonceBytes]byte(in.Nonce)
			ad := vectortest.TokenAD(in.ProtocolID, in.ExpireTimestamp)
			assertBytes(t, tc.PrivateAD, ad[:], "associated data")

			// The reference seals the first 1008 bytes of its 1024-byte
			// buffer; the MAC fills the last 16.
			plain := tc.PrivatePlaintext[:1024-crypto.MACBytes]
			pt := crypto.NewPrivateTokenAEAD(key(t, in.PrivateKey))
			sealed := aead.SealToken(pt, nil, &nonce, in.ProtocolID, in.ExpireTimestamp, plain)
			assertBytes(t, tc.PrivateEncrypted, sealed, "sealed private token")
			assertBytes(t, tc.PrivateMAC, sealed[len(sealed)-crypto.MACBytes:], "MAC")

			raw, err := chacha20poly1305.NewX(in.PrivateKey)
			require.NoError(t, err)
			assertBytes(t, tc.PrivateEncrypted, raw.Seal(nil, nonce[:], plain, ad[:]), "raw XChaCha20-Poly1305")

			opened, err := aead.OpenToken(pt, nil, &nonce, in.ProtocolID, in.ExpireTimestamp, tc.PrivateEncrypted)
			require.NoError(t, err)
			assertBytes(t, plain, opened, "opened private token")

			// Each bound input matters.
			wrongNonce := nonce
			wrongNonce[0] ^= 1
			for name, open := range map[string]func() error{
				"protocol id": func() error {
					_, err := aead.OpenToken(pt, nil, &nonce, in.ProtocolID^1, in.ExpireTimestamp, tc.PrivateEncrypted)
					return err
				},
				"expire": func() error {
					_, err := aead.OpenToken(pt, nil, &nonce, in.ProtocolID, in.ExpireTimestamp-1, tc.PrivateEncrypted)
					return err
				},
				"nonce": func() error {
					_, err := aead.OpenToken(pt, nil, &wrongNonce, in.ProtocolID, in.ExpireTimestamp, tc.PrivateEncrypted)
					return err
				},
				"key": func() error {
					wk := crypto.NewPrivateTokenAEAD(key(t, v.Common.WrongKey))
					_, err := aead.OpenToken(wk, nil, &nonce, in.ProtocolID, in.ExpireTimestamp, tc.PrivateEncrypted)
					return err
				},
			} {
				assert.ErrorIs(t, open(), aead.ErrOpen, name)
			}
		})
	}
}

func TestChallengeTokenVectors(t *testing.T) {
	v := loadVectors(t)
	require.NotEmpty(t, v.ChallengeTokens)
	for _, tc := range v.ChallengeTokens {
		t.Run(tc.Name, func(t *testing.T) {
			assert.Empty(t, tc.AD)
			var nonce [chacha20poly1305.NonceSize]byte
			binary.LittleEndian.PutUint64(nonce[4:], tc.Sequence)
			assertBytes(t, tc.Nonce, nonce[:], "nonce")
			plain := tc.Plaintext[:300-crypto.MACBytes]
			a := aead.New(key(t, tc.Key))
			sealed := a.Seal(nil, tc.Sequence, plain, nil)
			assertBytes(t, tc.Encrypted, sealed, "sealed challenge token")
			assertBytes(t, tc.MAC, sealed[len(sealed)-crypto.MACBytes:], "MAC")
			opened, err := a.Open(nil, tc.Sequence, tc.Encrypted, nil)
			require.NoError(t, err)
			assertBytes(t, plain, opened, "opened challenge token")
		})
	}
}

func TestOpenFailures(t *testing.T) {
	v := loadVectors(t)
	var tc vecPacket
	for _, p := range v.Packets {
		if p.Name == "connection_payload_100B_seq_1000" {
			tc = p
		}
	}
	require.NotEmpty(t, tc.Packet)
	prefix, seq, ct := splitPacket(t, tc.Packet)
	good := crypto.NewPacketAEAD(key(t, tc.Key), tc.ProtocolID)
	_, err := aead.OpenPacket(good, nil, prefix, seq, ct)
	require.NoError(t, err)

	flip := func(i int) []byte {
		b := bytes.Clone(ct)
		b[i] ^= 0x01
		return b
	}
	cases := []struct {
		name   string
		aead   *crypto.PacketAEAD
		prefix byte
		seq    uint64
		ct     []byte
	}{
		{"tampered first byte", good, prefix, seq, flip(0)},
		{"tampered last body byte", good, prefix, seq, flip(len(ct) - crypto.MACBytes - 1)},
		{"tampered MAC", good, prefix, seq, flip(len(ct) - 1)},
		{"wrong prefix (AD)", good, prefix ^ 0x01, seq, ct},
		{"wrong sequence bytes in prefix (AD)", good, prefix + 0x10, seq, ct},
		{"wrong sequence (nonce)", good, prefix, seq + 1, ct},
		{"wrong key", crypto.NewPacketAEAD(key(t, v.Common.WrongKey), tc.ProtocolID), prefix, seq, ct},
		{"other direction's key", crypto.NewPacketAEAD(key(t, v.Common.ServerToClientKey), tc.ProtocolID), prefix, seq, ct},
		{"wrong protocol id (AD)", crypto.NewPacketAEAD(key(t, tc.Key), tc.ProtocolID+1), prefix, seq, ct},
		{"truncated", good, prefix, seq, ct[:len(ct)-1]},
		{"MAC only", good, prefix, seq, ct[len(ct)-crypto.MACBytes:]},
		{"shorter than a MAC", good, prefix, seq, ct[:crypto.MACBytes-1]},
		{"empty", good, prefix, seq, nil},
		{"extended", good, prefix, seq, append(bytes.Clone(ct), 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := aead.OpenPacket(c.aead, nil, c.prefix, c.seq, c.ct)
			assert.ErrorIs(t, err, aead.ErrOpen)
			assert.Nil(t, out)
		})
	}

	// The plain AEAD: wrong associated data.
	a := aead.New(key(t, tc.Key))
	ad := vectortest.PacketAD(tc.ProtocolID, prefix)
	_, err = a.Open(nil, seq, ct, ad[:])
	require.NoError(t, err)
	ad[0] ^= 1
	_, err = a.Open(nil, seq, ct, ad[:])
	assert.ErrorIs(t, err, aead.ErrOpen)
	_, err = a.Open(nil, seq, ct, nil)
	assert.ErrorIs(t, err, aead.ErrOpen)
}

func TestSealOpenRoundTrip(t *testing.T) {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	p := crypto.NewPacketAEAD(&k, 42)
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1200} {
		msg := bytes.Repeat([]byte{byte(n)}, n)
		for _, seq := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
			sealed := aead.SealPacket(p, nil, 0x15, seq, msg)
			require.Len(t, sealed, n+crypto.MACBytes)
			got, err := aead.OpenPacket(p, nil, 0x15, seq, sealed)
			require.NoError(t, err)
			assert.Equal(t, msg, append([]byte{}, got...))
		}
	}
}

func TestGenerateKey(t *testing.T) {
	a, err := crypto.GenerateKey()
	require.NoError(t, err)
	b, err := crypto.GenerateKey()
	require.NoError(t, err)
	assert.NotEqual(t, crypto.Key{}, a)
	assert.NotEqual(t, a, b)
}

func TestZeroAllocs(t *testing.T) {
	k := crypto.Key{1}
	p := crypto.NewPacketAEAD(&k, 7)
	msg := make([]byte, 1200)
	buf := make([]byte, 0, 1300)
	out := make([]byte, 0, 1300)
	var sealed []byte
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		sealed = aead.SealPacket(p, buf[:0], 0x15, 9, msg)
	}), "PacketAEAD.Seal")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := aead.OpenPacket(p, out[:0], 0x15, 9, sealed); err != nil {
			t.Fatal(err)
		}
	}), "PacketAEAD.Open")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := aead.OpenPacket(p, out[:0], 0x15, 10, sealed); err == nil {
			t.Fatal("opened with the wrong sequence")
		}
	}), "PacketAEAD.Open failing")

	pt := crypto.NewPrivateTokenAEAD(&k)
	var nonce [crypto.TokenNonceBytes]byte
	plain := make([]byte, 1008)
	tok := make([]byte, 0, 1024)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		tok = aead.SealToken(pt, tok[:0], &nonce, 1, 2, plain)
	}), "PrivateTokenAEAD.Seal")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := aead.OpenToken(pt, plain[:0], &nonce, 1, 2, tok); err != nil {
			t.Fatal(err)
		}
	}), "PrivateTokenAEAD.Open")
}

func benchPacket(b *testing.B, size int, open bool) {
	k := crypto.Key{1}
	p := crypto.NewPacketAEAD(&k, 7)
	msg := make([]byte, size)
	buf := make([]byte, 0, size+crypto.MACBytes)
	sealed := aead.SealPacket(p, nil, 0x15, 9, msg)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	for b.Loop() {
		if open {
			if _, err := aead.OpenPacket(p, buf[:0], 0x15, 9, sealed); err != nil {
				b.Fatal(err)
			}
		} else {
			buf = aead.SealPacket(p, buf[:0], 0x15, 9, msg)
		}
	}
}

func BenchmarkPacketSeal100(b *testing.B)  { benchPacket(b, 100, false) }
func BenchmarkPacketSeal1200(b *testing.B) { benchPacket(b, 1200, false) }
func BenchmarkPacketOpen100(b *testing.B)  { benchPacket(b, 100, true) }
func BenchmarkPacketOpen1200(b *testing.B) { benchPacket(b, 1200, true) }

func BenchmarkPacketOpenForged(b *testing.B) {
	k := crypto.Key{1}
	p := crypto.NewPacketAEAD(&k, 7)
	forged := make([]byte, 1200+crypto.MACBytes)
	buf := make([]byte, 0, 1200)
	b.ReportAllocs()
	b.SetBytes(int64(len(forged)))
	for b.Loop() {
		if _, err := aead.OpenPacket(p, buf[:0], 0x15, 9, forged); err == nil {
			b.Fatal("forgery opened")
		}
	}
}

func BenchmarkPrivateTokenSeal(b *testing.B) {
	k := crypto.Key{1}
	pt := crypto.NewPrivateTokenAEAD(&k)
	var nonce [crypto.TokenNonceBytes]byte
	plain := make([]byte, 1008)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(1008)
	for b.Loop() {
		buf = aead.SealToken(pt, buf[:0], &nonce, 1, 2, plain)
	}
}

func BenchmarkPrivateTokenOpen(b *testing.B) {
	k := crypto.Key{1}
	pt := crypto.NewPrivateTokenAEAD(&k)
	var nonce [crypto.TokenNonceBytes]byte
	sealed := aead.SealToken(pt, nil, &nonce, 1, 2, make([]byte, 1008))
	buf := make([]byte, 0, 1008)
	b.ReportAllocs()
	b.SetBytes(1008)
	for b.Loop() {
		if _, err := aead.OpenToken(pt, buf[:0], &nonce, 1, 2, sealed); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewPacketAEAD(b *testing.B) {
	k := crypto.Key{1}
	b.ReportAllocs()
	for b.Loop() {
		_ = crypto.NewPacketAEAD(&k, 7)
	}
}
