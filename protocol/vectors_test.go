package protocol

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// The golden vectors produced by the C reference; see testdata/ and
// /work/shared/vectors/README.md for their description.

// The vectors' JSON types (see internal/testing/vectortest).
type (
	u64      = vectortest.U64
	hexBytes = vectortest.Hex
)

type packetVector struct {
	Name                   string     `json:"name"`
	PacketType             PacketType `json:"packet_type"`
	Direction              string     `json:"direction"`
	Sequence               u64        `json:"sequence"`
	SequenceBytes          int        `json:"sequence_bytes"`
	PrefixByte             byte       `json:"prefix_byte"`
	ProtocolID             u64        `json:"protocol_id"`
	Key                    hexBytes   `json:"key"`
	AssociatedData         hexBytes   `json:"associated_data"`
	Nonce                  hexBytes   `json:"nonce"`
	PlaintextBodyBytes     int        `json:"plaintext_body_bytes"`
	PlaintextBody          hexBytes   `json:"plaintext_body"`
	PacketBytes            int        `json:"packet_bytes"`
	Packet                 hexBytes   `json:"packet"`
	ChallengeTokenSequence u64        `json:"challenge_token_sequence"`
	ClientIndex            uint32     `json:"client_index"`
	MaxClients             uint32     `json:"max_clients"`
	PayloadBytes           int        `json:"payload_bytes"`
}

type invalidPacketVector struct {
	Name               string       `json:"name"`
	RejectStage        string       `json:"reject_stage"`
	Reason             string       `json:"reason"`
	Reader             string       `json:"reader"`
	AllowedPacketTypes []PacketType `json:"allowed_packet_types"`
	ReadKey            hexBytes     `json:"read_key"`
	ProtocolID         u64          `json:"protocol_id"`
	CurrentTimestamp   u64          `json:"current_timestamp"`
	PrivateKey         hexBytes     `json:"private_key"`
	PacketBytes        int          `json:"packet_bytes"`
	Packet             hexBytes     `json:"packet"`
	Expected           string       `json:"expected"`
}

type edgeCaseVector struct {
	Name          string     `json:"name"`
	Reader        string     `json:"reader"`
	ReadKey       hexBytes   `json:"read_key"`
	ProtocolID    u64        `json:"protocol_id"`
	PacketType    PacketType `json:"packet_type"`
	Sequence      u64        `json:"sequence"`
	SequenceBytes int        `json:"sequence_bytes"`
	PlaintextBody hexBytes   `json:"plaintext_body"`
	PacketBytes   int        `json:"packet_bytes"`
	Packet        hexBytes   `json:"packet"`
	Expected      string     `json:"expected"`
}

type sequenceVector struct {
	Sequence      u64      `json:"sequence"`
	SequenceBytes int      `json:"sequence_bytes"`
	Encoded       hexBytes `json:"encoded"`
	PrefixByte    byte     `json:"prefix_byte_for_keep_alive"`
}

type connectTokenVector struct {
	Name   string `json:"name"`
	Inputs struct {
		ProtocolID      u64      `json:"protocol_id"`
		CreateTimestamp u64      `json:"create_timestamp"`
		ExpireTimestamp u64      `json:"expire_timestamp"`
		Nonce           hexBytes `json:"nonce"`
		PrivateKey      hexBytes `json:"private_key"`
	} `json:"inputs"`
	PrivatePlaintext        hexBytes `json:"private_plaintext"`
	PrivateAssociatedData   hexBytes `json:"private_associated_data"`
	PrivateEncrypted        hexBytes `json:"private_encrypted"`
	PrivateMAC              hexBytes `json:"private_mac"`
	ConnectionRequestPacket hexBytes `json:"connection_request_packet"`
}

type invalidPrivateTokenVector struct {
	Name                    string   `json:"name"`
	RejectStage             string   `json:"reject_stage"`
	PrivatePlaintext        hexBytes `json:"private_plaintext"`
	PrivateEncrypted        hexBytes `json:"private_encrypted"`
	ConnectionRequestPacket hexBytes `json:"connection_request_packet"`
	CurrentTimestamp        u64      `json:"current_timestamp"`
}

type challengeTokenVector struct {
	Name                   string   `json:"name"`
	ChallengeKey           hexBytes `json:"challenge_key"`
	ChallengeTokenSequence u64      `json:"challenge_token_sequence"`
	Plaintext              hexBytes `json:"plaintext"`
	Encrypted              hexBytes `json:"encrypted"`
	MAC                    hexBytes `json:"mac"`
}

type transcriptPacket struct {
	Index       int        `json:"index"`
	From        string     `json:"from"`
	PacketType  PacketType `json:"packet_type"`
	Sequence    u64        `json:"sequence"`
	KeyName     string     `json:"key_name"`
	Note        string     `json:"note"`
	PacketBytes int        `json:"packet_bytes"`
	Packet      hexBytes   `json:"packet"`
}

type replayStep struct {
	Sequence       u64  `json:"sequence"`
	Accepted       bool `json:"accepted"`
	MostRecent     u64  `json:"most_recent_sequence_after"`
	ReferenceQuirk bool `json:"reference_quirk"`
}

type replayCase struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Steps       []replayStep `json:"steps"`
}

type vectorFile struct {
	Format    string `json:"format"`
	Constants struct {
		VersionInfo                  hexBytes `json:"version_info"`
		ConnectTokenPrivateBytes     int      `json:"connect_token_private_bytes"`
		ConnectTokenNonceBytes       int      `json:"connect_token_nonce_bytes"`
		ChallengeTokenBytes          int      `json:"challenge_token_bytes"`
		KeyBytes                     int      `json:"key_bytes"`
		MACBytes                     int      `json:"mac_bytes"`
		MaxPayloadBytes              int      `json:"max_payload_bytes"`
		MaxPacketBytes               int      `json:"max_packet_bytes"`
		ReplayProtectionBufferSize   int      `json:"replay_protection_buffer_size"`
		ConnectionRequestPacketBytes int      `json:"connection_request_packet_bytes"`
		MinEncryptedPacketBytes      int      `json:"min_encrypted_packet_bytes"`
		ServerGlobalSequenceStart    u64      `json:"server_global_sequence_start"`
	} `json:"constants"`
	CommonInputs struct {
		PrivateKey        hexBytes `json:"private_key"`
		ProtocolID        u64      `json:"protocol_id"`
		CreateTimestamp   u64      `json:"create_timestamp"`
		ClientToServerKey hexBytes `json:"client_to_server_key"`
		ServerToClientKey hexBytes `json:"server_to_client_key"`
		ChallengeKey      hexBytes `json:"challenge_key"`
		WrongKey          hexBytes `json:"wrong_key"`
		Payload1200       hexBytes `json:"payload_1200"`
	} `json:"common_inputs"`
	ConnectTokens               []connectTokenVector        `json:"connect_tokens"`
	InvalidPrivateConnectTokens []invalidPrivateTokenVector `json:"invalid_private_connect_tokens"`
	ChallengeTokens             []challengeTokenVector      `json:"challenge_tokens"`
	Packets                     []packetVector              `json:"packets"`
	SequenceEncoding            []sequenceVector            `json:"sequence_encoding"`
	InvalidPackets              []invalidPacketVector       `json:"invalid_packets"`
	AcceptedEdgeCases           []edgeCaseVector            `json:"accepted_edge_cases"`
	HandshakeTranscript         struct {
		MaxClients        uint32             `json:"max_clients"`
		ChallengeKey      hexBytes           `json:"challenge_key"`
		ClientToServerKey hexBytes           `json:"client_to_server_key"`
		ServerToClientKey hexBytes           `json:"server_to_client_key"`
		Packets           []transcriptPacket `json:"packets"`
	} `json:"handshake_transcript"`
	ReplayProtection struct {
		BufferSize int          `json:"buffer_size"`
		Cases      []replayCase `json:"cases"`
	} `json:"replay_protection"`
}

func vectors(tb testing.TB) *vectorFile {
	tb.Helper()
	return vectortest.Once[vectorFile](tb, "netcode-1.02.json", vectortest.Load)
}

func toKey(tb testing.TB, b []byte) *crypto.Key {
	tb.Helper()
	require.Len(tb, b, crypto.KeyBytes)
	return (*crypto.Key)(b)
}

func packetKey(tb testing.TB, b []byte, protocolID uint64) *crypto.PacketAEAD {
	tb.Helper()
	if b == nil {
		return nil
	}
	return crypto.NewPacketAEAD(toKey(tb, b), protocolID)
}

func tokenKey(tb testing.TB, b []byte) *crypto.PrivateTokenAEAD {
	tb.Helper()
	if b == nil {
		return nil
	}
	return crypto.NewPrivateTokenAEAD(toKey(tb, b))
}

// readerFor returns the reader of the side that receives packets sent in
// direction ("client_to_server" or "server_to_client").
func readerFor(direction string, protocolID uint64, tok *crypto.PrivateTokenAEAD) *Reader {
	if direction == "client_to_server" {
		return &Reader{ProtocolID: protocolID, Allowed: ServerAccepts, TokenAEAD: tok}
	}
	return &Reader{ProtocolID: protocolID, Allowed: ClientAccepts}
}

var stageErrors = map[string]error{
	"length":         errLength,
	"packet_type":    errPacketType,
	"not_allowed":    errNotAllowed,
	"sequence_bytes": errSequenceBytes,
	"version_info":   errVersionInfo,
	"protocol_id":    ErrProtocolID,
	"expired":        ErrExpired,
	"no_key":         ErrNoKey,
	"replayed":       ErrReplayed,
	"decrypt":        ErrDecrypt,
	"body_size":      errBodySize,
}

func TestConstants(t *testing.T) {
	c := vectors(t).Constants
	assert.Equal(t, []byte(aead.VersionInfo), []byte(c.VersionInfo))
	assert.Equal(t, PrivateTokenBytes, c.ConnectTokenPrivateBytes)
	assert.Equal(t, privateTokenPlainBytes, c.ConnectTokenPrivateBytes-c.MACBytes)
	assert.Equal(t, crypto.TokenNonceBytes, c.ConnectTokenNonceBytes)
	assert.Equal(t, ChallengeTokenBytes, c.ChallengeTokenBytes)
	assert.Equal(t, challengeBodyBytes, 8+c.ChallengeTokenBytes)
	assert.Equal(t, crypto.KeyBytes, c.KeyBytes)
	assert.Equal(t, crypto.MACBytes, c.MACBytes)
	assert.Equal(t, crypto.MACBytes, c.MACBytes)
	assert.Equal(t, MaxPayloadBytes, c.MaxPayloadBytes)
	assert.Equal(t, MaxPacketBytes, c.MaxPacketBytes)
	assert.Equal(t, replayWindow, c.ReplayProtectionBufferSize)
	assert.Equal(t, replayWindow, vectors(t).ReplayProtection.BufferSize)
	assert.Equal(t, connectionRequestBytes, c.ConnectionRequestPacketBytes)
	assert.Equal(t, minEncryptedPacketBytes, c.MinEncryptedPacketBytes)
	assert.Equal(t, serverGlobalSequenceStart, uint64(c.ServerGlobalSequenceStart))
	assert.Equal(t, 1078, connectionRequestBytes)
	assert.Equal(t, 308, challengeBodyBytes)
	assert.Equal(t, 8, keepAliveBodyBytes)
	assert.Equal(t, 1008, privateTokenPlainBytes)
}

// writeVector writes the packet a vector describes with the typed writer of
// its type, appended after prefix.
func writeVector(t *testing.T, v *packetVector, key *crypto.PacketAEAD, prefix []byte) []byte {
	seq := uint64(v.Sequence)
	dst := append([]byte(nil), prefix...)
	switch v.PacketType {
	case ConnectionDenied:
		return AppendDenied(dst, key, seq)
	case ConnectionChallenge:
		return AppendChallenge(dst, key, seq, uint64(v.ChallengeTokenSequence), v.PlaintextBody[8:])
	case ConnectionResponse:
		return AppendResponse(dst, key, seq, uint64(v.ChallengeTokenSequence), v.PlaintextBody[8:])
	case KeepAlive:
		return AppendKeepAlive(dst, key, seq, v.ClientIndex, v.MaxClients)
	case Payload:
		return AppendPayload(dst, key, seq, v.PlaintextBody)
	case Disconnect:
		return AppendDisconnect(dst, key, seq)
	}
	t.Fatalf("%s: unexpected packet type %d", v.Name, v.PacketType)
	return nil
}

func TestPacketVectors(t *testing.T) {
	vs := vectors(t)
	require.Len(t, vs.Packets, 68)
	seen := map[PacketType]int{}
	for i := range vs.Packets {
		v := &vs.Packets[i]
		t.Run(v.Name, func(t *testing.T) {
			seen[v.PacketType]++
			pid := uint64(v.ProtocolID)
			seq := uint64(v.Sequence)
			key := packetKey(t, v.Key, pid)
			require.Len(t, v.Packet, v.PacketBytes)
			require.Len(t, v.PlaintextBody, v.PlaintextBodyBytes)

			// The vector's own description of the framing.
			assert.Equal(t, v.SequenceBytes, sequenceBytes(seq))
			assert.Equal(t, byte(v.PacketType)|byte(v.SequenceBytes)<<4, v.PrefixByte)
			assert.Equal(t, v.PrefixByte, v.Packet[0])
			ad := vectortest.PacketAD(pid, v.PrefixByte)
			assert.Equal(t, []byte(v.AssociatedData), ad[:])
			assert.Equal(t, 1+v.SequenceBytes+v.PlaintextBodyBytes+crypto.MACBytes, v.PacketBytes)
			switch v.PacketType {
			case ConnectionChallenge, ConnectionResponse:
				require.Len(t, v.PlaintextBody, challengeBodyBytes)
				assert.Equal(t, uint64(v.ChallengeTokenSequence), leUint64(v.PlaintextBody))
			case KeepAlive:
				assert.Equal(t, keepAliveBodyBytes, v.PlaintextBodyBytes)
			case Payload:
				assert.Equal(t, v.PayloadBytes, v.PlaintextBodyBytes)
				assert.Equal(t, []byte(vs.CommonInputs.Payload1200[:v.PayloadBytes]), []byte(v.PlaintextBody))
			}

			// Writers: typed and generic, into an empty and a non-empty dst.
			assert.Equal(t, []byte(v.Packet), writeVector(t, v, key, nil), "typed writer")
			head := []byte("head")
			got := writeVector(t, v, key, head)
			assert.Equal(t, head, got[:len(head)])
			assert.Equal(t, []byte(v.Packet), got[len(head):], "typed writer after existing bytes")
			assert.Equal(t, []byte(v.Packet), appendEncrypted(nil, key, v.PacketType, seq, v.PlaintextBody), "generic writer")

			// Reader of the receiving side, with and without replay protection.
			for _, replay := range []*ReplayProtection{nil, new(ReplayProtection)} {
				r := readerFor(v.Direction, pid, nil)
				data := bytes.Clone(v.Packet)
				var p Packet
				require.NoError(t, r.Read(data, 0, packetKey(t, v.Key, pid), replay, &p))
				checkRead(t, v, &p)
				if replay != nil {
					data = bytes.Clone(v.Packet)
					err := r.Read(data, 0, key, replay, &p)
					switch {
					case v.PacketType < KeepAlive:
						assert.Zero(t, replay.mostRecent, "handshake packets leave replay protection alone")
						assert.NoError(t, err, "handshake packets have no replay protection")
					case seq == math.MaxUint64:
						// The reference quirk: 2^64-1 is its empty-slot marker.
						assert.Equal(t, seq, replay.mostRecent, "replay advanced")
						assert.NoError(t, err, "the reference accepts 2^64-1 again")
					default:
						assert.Equal(t, seq, replay.mostRecent, "replay advanced")
						assert.Equal(t, ErrReplayed, err, "second read is a replay")
					}
				}
			}

			// The other side does not accept it.
			other := "server_to_client"
			if v.Direction == other {
				other = "client_to_server"
			}
			r := readerFor(other, pid, nil)
			var p Packet
			err := r.Read(bytes.Clone(v.Packet), 0, key, nil, &p)
			switch v.PacketType {
			case KeepAlive, Payload, Disconnect:
				assert.NoError(t, err, "both sides read this type")
			default:
				assert.Equal(t, errNotAllowed, err)
			}
		})
	}
	for typ := ConnectionDenied; typ < numPacketTypes; typ++ {
		assert.Positive(t, seen[typ], "vectors cover %v", typ)
	}
}

func leUint64(b []byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

func checkRead(t *testing.T, v *packetVector, p *Packet) {
	t.Helper()
	assert.Equal(t, v.PacketType, p.Type)
	assert.Equal(t, uint64(v.Sequence), p.Sequence)
	switch v.PacketType {
	case ConnectionChallenge, ConnectionResponse:
		assert.Equal(t, uint64(v.ChallengeTokenSequence), p.ChallengeSequence)
		assert.Equal(t, []byte(v.PlaintextBody[8:]), p.ChallengeToken)
	case KeepAlive:
		assert.Equal(t, v.ClientIndex, p.ClientIndex)
		assert.Equal(t, v.MaxClients, p.MaxClients)
	case Payload:
		assert.Equal(t, []byte(v.PlaintextBody), p.Payload)
	}
	if v.PacketType != Payload {
		assert.Nil(t, p.Payload)
	}
	if v.PacketType != ConnectionChallenge && v.PacketType != ConnectionResponse {
		assert.Nil(t, p.ChallengeToken)
	}
	assert.Nil(t, p.PrivateToken)
}

func TestSequenceEncoding(t *testing.T) {
	vs := vectors(t)
	require.NotEmpty(t, vs.SequenceEncoding)
	key := packetKey(t, vs.CommonInputs.ServerToClientKey, uint64(vs.CommonInputs.ProtocolID))
	for _, v := range vs.SequenceEncoding {
		seq := uint64(v.Sequence)
		t.Run(strconv.FormatUint(seq, 10), func(t *testing.T) {
			assert.Equal(t, v.SequenceBytes, sequenceBytes(seq))
			require.Len(t, v.Encoded, v.SequenceBytes)
			pkt := AppendKeepAlive(nil, key, seq, 1, 2)
			assert.Equal(t, v.PrefixByte, pkt[0])
			assert.Equal(t, []byte(v.Encoded), pkt[1:1+v.SequenceBytes])
			assert.Len(t, pkt, 1+v.SequenceBytes+keepAliveBodyBytes+crypto.MACBytes)
			r := Reader{ProtocolID: uint64(vs.CommonInputs.ProtocolID), Allowed: ClientAccepts}
			var p Packet
			require.NoError(t, r.Read(pkt, 0, key, nil, &p))
			assert.Equal(t, seq, p.Sequence)
		})
	}
}

func TestInvalidPackets(t *testing.T) {
	vs := vectors(t)
	require.Len(t, vs.InvalidPackets, 44)
	stages := map[string]bool{}
	for _, v := range vs.InvalidPackets {
		t.Run(v.Name, func(t *testing.T) {
			require.Equal(t, "reject", v.Expected)
			want, ok := stageErrors[v.RejectStage]
			require.True(t, ok, "unknown stage %q", v.RejectStage)
			stages[v.RejectStage] = true
			require.Len(t, v.Packet, v.PacketBytes)
			allowed := typesOf(v.AllowedPacketTypes...)
			switch v.Reader {
			case "server":
				require.Equal(t, ServerAccepts, allowed)
			case "client":
				require.Equal(t, ClientAccepts, allowed)
			default:
				t.Fatalf("reader %q", v.Reader)
			}
			pid := uint64(v.ProtocolID)
			r := Reader{ProtocolID: pid, Allowed: allowed, TokenAEAD: tokenKey(t, v.PrivateKey)}
			for _, replay := range []*ReplayProtection{nil, new(ReplayProtection)} {
				var p Packet
				err := r.Read(bytes.Clone(v.Packet), uint64(v.CurrentTimestamp), packetKey(t, v.ReadKey, pid), replay, &p)
				assert.Equal(t, want, err, v.Reason)
				assert.Equal(t, Packet{}, p, "nothing decoded from a refused packet")
			}
		})
	}
	assert.Len(t, stages, 10, "every stage but replayed has a vector")
}

func TestAcceptedEdgeCases(t *testing.T) {
	vs := vectors(t)
	require.NotEmpty(t, vs.AcceptedEdgeCases)
	for _, v := range vs.AcceptedEdgeCases {
		t.Run(v.Name, func(t *testing.T) {
			require.Equal(t, "accept", v.Expected)
			require.Equal(t, "server", v.Reader)
			require.Len(t, v.Packet, v.PacketBytes)
			pid := uint64(v.ProtocolID)
			r := Reader{ProtocolID: pid, Allowed: ServerAccepts}
			var p Packet
			require.NoError(t, r.Read(bytes.Clone(v.Packet), 0, packetKey(t, v.ReadKey, pid), new(ReplayProtection), &p))
			assert.Equal(t, v.PacketType, p.Type)
			assert.Equal(t, uint64(v.Sequence), p.Sequence)
			assert.Equal(t, v.SequenceBytes, int(v.Packet[0]>>4))
			switch v.PacketType {
			case KeepAlive:
				assert.Equal(t, leUint32(v.PlaintextBody), p.ClientIndex)
				assert.Equal(t, leUint32(v.PlaintextBody[4:]), p.MaxClients)
			case Payload:
				assert.Equal(t, []byte(v.PlaintextBody), p.Payload)
			}
		})
	}
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func TestConnectionRequestVectors(t *testing.T) {
	vs := vectors(t)
	require.NotEmpty(t, vs.ConnectTokens)
	for _, v := range vs.ConnectTokens {
		t.Run(v.Name, func(t *testing.T) {
			in := &v.Inputs
			pid := uint64(in.ProtocolID)
			expire := uint64(in.ExpireTimestamp)
			nonce := (*[crypto.TokenNonceBytes]byte)(in.Nonce)
			require.Len(t, v.PrivateEncrypted, PrivateTokenBytes)
			assert.Equal(t, []byte(v.PrivateMAC), []byte(v.PrivateEncrypted[privateTokenPlainBytes:]))
			ad := vectortest.TokenAD(pid, expire)
			assert.Equal(t, []byte(v.PrivateAssociatedData), ad[:])

			pkt := AppendConnectionRequest(nil, pid, expire, nonce, v.PrivateEncrypted)
			assert.Equal(t, []byte(v.ConnectionRequestPacket), pkt)
			assert.Len(t, pkt, connectionRequestBytes)
			got, ok := PeekType(pkt)
			assert.True(t, ok)
			assert.Equal(t, ConnectionRequest, got)

			r := Reader{ProtocolID: pid, Allowed: ServerAccepts, TokenAEAD: tokenKey(t, in.PrivateKey)}
			now := uint64(in.CreateTimestamp)
			var p Packet
			require.NoError(t, r.Read(pkt, now, nil, new(ReplayProtection), &p))
			assert.Equal(t, ConnectionRequest, p.Type)
			assert.Equal(t, uint64(0), p.Sequence)
			assert.Equal(t, expire, p.ExpireTimestamp)
			assert.Equal(t, *nonce, p.TokenNonce)
			assert.Equal(t, []byte(v.PrivatePlaintext[:privateTokenPlainBytes]), p.PrivateToken)
			assert.Len(t, p.PrivateToken, privateTokenPlainBytes)
			assert.Equal(t, []byte(v.PrivateMAC), pkt[len(pkt)-crypto.MACBytes:], "the MAC stays at the end of the datagram")

			// One second before expiry is fine; at expiry it is refused.
			if expire > now {
				pkt = AppendConnectionRequest(pkt[:0], pid, expire, nonce, v.PrivateEncrypted)
				require.NoError(t, r.Read(pkt, expire-1, nil, nil, &p))
				pkt = AppendConnectionRequest(pkt[:0], pid, expire, nonce, v.PrivateEncrypted)
				assert.Equal(t, ErrExpired, r.Read(pkt, expire, nil, nil, &p))
			}

			// Without the private key, and on the client side.
			pkt = AppendConnectionRequest(pkt[:0], pid, expire, nonce, v.PrivateEncrypted)
			noKey := Reader{ProtocolID: pid, Allowed: ServerAccepts}
			assert.Equal(t, ErrNoKey, noKey.Read(pkt, now, nil, nil, &p))
			client := Reader{ProtocolID: pid, Allowed: ClientAccepts, TokenAEAD: r.TokenAEAD}
			assert.Equal(t, errNotAllowed, client.Read(pkt, now, nil, nil, &p))
		})
	}
}

// The reference's reader accepts these requests: the private token
// decrypts, and only parsing it fails (in package token).
func TestInvalidPrivateTokensDecrypt(t *testing.T) {
	vs := vectors(t)
	require.NotEmpty(t, vs.InvalidPrivateConnectTokens)
	c := &vs.CommonInputs
	for _, v := range vs.InvalidPrivateConnectTokens {
		t.Run(v.Name, func(t *testing.T) {
			require.Equal(t, "connect_token_private_read", v.RejectStage)
			r := Reader{ProtocolID: uint64(c.ProtocolID), Allowed: ServerAccepts, TokenAEAD: tokenKey(t, c.PrivateKey)}
			pkt := bytes.Clone(v.ConnectionRequestPacket)
			assert.Equal(t, []byte(v.PrivateEncrypted), pkt[connectionRequestBytes-PrivateTokenBytes:])
			var p Packet
			require.NoError(t, r.Read(pkt, uint64(v.CurrentTimestamp), nil, nil, &p))
			assert.Equal(t, []byte(v.PrivatePlaintext[:privateTokenPlainBytes]), p.PrivateToken)
		})
	}
}

func TestHandshakeTranscript(t *testing.T) {
	vs := vectors(t)
	h := &vs.HandshakeTranscript
	require.NotEmpty(t, h.Packets)
	pid := uint64(vs.CommonInputs.ProtocolID)
	now := uint64(vs.CommonInputs.CreateTimestamp)
	c2s := packetKey(t, h.ClientToServerKey, pid)
	s2c := packetKey(t, h.ServerToClientKey, pid)
	server := Reader{ProtocolID: pid, Allowed: ServerAccepts, TokenAEAD: tokenKey(t, vs.CommonInputs.PrivateKey)}
	client := Reader{ProtocolID: pid, Allowed: ClientAccepts}
	var serverReplay, clientReplay ReplayProtection
	challenge := aead.New(toKey(t, h.ChallengeKey))
	var challengeSeq uint64
	var challengeToken []byte
	var disconnects int

	for _, tp := range h.Packets {
		t.Run(strconv.Itoa(tp.Index)+"_"+tp.PacketType.String(), func(t *testing.T) {
			require.Len(t, tp.Packet, tp.PacketBytes)
			data := bytes.Clone(tp.Packet)
			var p Packet
			var key, wkey *crypto.PacketAEAD
			switch tp.From {
			case "client":
				key, wkey = c2s, c2s
				if tp.PacketType == ConnectionRequest {
					key = nil
				}
				require.NoError(t, server.Read(data, now, key, &serverReplay, &p))
			case "server":
				key, wkey = s2c, s2c
				require.NoError(t, client.Read(data, now, key, &clientReplay, &p))
			default:
				t.Fatalf("from %q", tp.From)
			}
			require.Equal(t, tp.PacketType, p.Type)
			assert.Equal(t, uint64(tp.Sequence), p.Sequence)

			// Write it again from what was read.
			var again []byte
			switch p.Type {
			case ConnectionRequest:
				assert.Len(t, p.PrivateToken, privateTokenPlainBytes)
				again = AppendConnectionRequest(nil, pid, p.ExpireTimestamp, &p.TokenNonce, tp.Packet[connectionRequestBytes-PrivateTokenBytes:])
			case ConnectionChallenge:
				assert.Equal(t, serverGlobalSequenceStart, p.Sequence)
				// The challenge token opens with the challenge key.
				_, err := challenge.Open(nil, p.ChallengeSequence, p.ChallengeToken, nil)
				require.NoError(t, err)
				challengeSeq, challengeToken = p.ChallengeSequence, bytes.Clone(p.ChallengeToken)
				again = AppendChallenge(nil, wkey, p.Sequence, p.ChallengeSequence, p.ChallengeToken)
			case ConnectionResponse:
				assert.Equal(t, challengeSeq, p.ChallengeSequence)
				assert.Equal(t, challengeToken, p.ChallengeToken)
				again = AppendResponse(nil, wkey, p.Sequence, p.ChallengeSequence, p.ChallengeToken)
			case KeepAlive:
				if tp.From == "server" {
					assert.Equal(t, uint32(0), p.ClientIndex)
					assert.Equal(t, h.MaxClients, p.MaxClients)
				} else {
					assert.Zero(t, p.ClientIndex)
					assert.Zero(t, p.MaxClients)
				}
				again = AppendKeepAlive(nil, wkey, p.Sequence, p.ClientIndex, p.MaxClients)
			case Payload:
				if tp.Index == 5 {
					assert.Equal(t, "hello from server!!!", string(p.Payload))
				} else {
					assert.Equal(t, []byte(vs.CommonInputs.Payload1200[:100]), p.Payload)
				}
				again = AppendPayload(nil, wkey, p.Sequence, p.Payload)
			case Disconnect:
				disconnects++
				again = AppendDisconnect(nil, wkey, p.Sequence)
			}
			assert.Equal(t, []byte(tp.Packet), again)

			// Played again, protected packets are refused.
			if p.Type >= KeepAlive {
				r, rp := &server, &serverReplay
				if tp.From == "server" {
					r, rp = &client, &clientReplay
				}
				assert.Equal(t, ErrReplayed, r.Read(bytes.Clone(tp.Packet), now, key, rp, &p))
			}
		})
	}
	assert.Equal(t, 10, disconnects)
}

func TestReplayVectors(t *testing.T) {
	vs := vectors(t)
	require.NotEmpty(t, vs.ReplayProtection.Cases)
	quirks := 0
	for _, c := range vs.ReplayProtection.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var r ReplayProtection
			for i, s := range c.Steps {
				seq := uint64(s.Sequence)
				accepted := !r.alreadyReceived(seq)
				assert.Equal(t, s.Accepted, accepted, "step %d: sequence %d", i, seq)
				if accepted {
					r.advance(seq)
				}
				assert.Equal(t, uint64(s.MostRecent), r.mostRecent, "step %d", i)
				if s.ReferenceQuirk {
					quirks++
				}
			}
		})
	}
	assert.Positive(t, quirks, "the vectors include the reference quirk at 2^64-1")
}

// The replay vectors, played through Read with real keep-alive packets: the
// same decisions, and a packet that fails to decrypt does not advance.
func TestReplayThroughRead(t *testing.T) {
	vs := vectors(t)
	pid := uint64(vs.CommonInputs.ProtocolID)
	key := packetKey(t, vs.CommonInputs.ClientToServerKey, pid)
	r := Reader{ProtocolID: pid, Allowed: ServerAccepts}
	for _, c := range vs.ReplayProtection.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var rp ReplayProtection
			var p Packet
			for i, s := range c.Steps {
				seq := uint64(s.Sequence)
				// A forged packet first: refused (replayed or decrypt), no effect.
				forged := AppendKeepAlive(nil, key, seq, 0, 0)
				forged[len(forged)-1] ^= 1
				before := rp
				err := r.Read(forged, 0, key, &rp, &p)
				assert.Contains(t, []error{ErrReplayed, ErrDecrypt}, err)
				assert.Equal(t, before, rp, "a forged packet leaves the window alone")

				err = r.Read(AppendKeepAlive(nil, key, seq, 0, 0), 0, key, &rp, &p)
				if s.Accepted {
					assert.NoError(t, err, "step %d", i)
				} else {
					assert.Equal(t, ErrReplayed, err, "step %d", i)
				}
				assert.Equal(t, uint64(s.MostRecent), rp.mostRecent, "step %d", i)
			}
		})
	}
}
