package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gonetcode/netcode/crypto"
)

var allReadErrors = []error{
	errLength, errPacketType, errNotAllowed, errSequenceBytes, errVersionInfo,
	ErrProtocolID, ErrExpired, ErrNoKey, ErrReplayed, ErrDecrypt, errBodySize,
}

func isReadError(err error) bool {
	for _, e := range allReadErrors {
		if err == e {
			return true
		}
	}
	return false
}

// fuzzSide is one reader configuration FuzzRead runs every input through.
type fuzzSide struct {
	name   string
	r      Reader
	key    *crypto.PacketAEAD
	replay *ReplayProtection
}

// FuzzRead feeds arbitrary datagrams to server-side and client-side readers,
// with and without keys. Nothing may panic; a refusal must be one of the
// package's errors and leave p zero; an accepted packet must be well formed
// and, written again, give back the same bytes.
func FuzzRead(f *testing.F) {
	vs := vectors(f)
	c := &vs.CommonInputs
	pid := uint64(c.ProtocolID)
	now := uint64(c.CreateTimestamp)
	for _, v := range vs.Packets {
		f.Add([]byte(v.Packet))
	}
	for _, v := range vs.InvalidPackets {
		f.Add([]byte(v.Packet))
	}
	for _, v := range vs.AcceptedEdgeCases {
		f.Add([]byte(v.Packet))
	}
	for _, v := range vs.ConnectTokens {
		f.Add([]byte(v.ConnectionRequestPacket))
	}
	for _, v := range vs.InvalidPrivateConnectTokens {
		f.Add([]byte(v.ConnectionRequestPacket))
	}
	for _, v := range vs.HandshakeTranscript.Packets {
		f.Add([]byte(v.Packet))
	}

	tok := tokenKey(f, c.PrivateKey)
	c2s := packetKey(f, c.ClientToServerKey, pid)
	s2c := packetKey(f, c.ServerToClientKey, pid)
	sides := []fuzzSide{
		{"server", Reader{ProtocolID: pid, Allowed: ServerAccepts, TokenAEAD: tok}, c2s, new(ReplayProtection)},
		{"server without keys", Reader{ProtocolID: pid, Allowed: ServerAccepts}, nil, nil},
		{"client", Reader{ProtocolID: pid, Allowed: ClientAccepts}, s2c, new(ReplayProtection)},
		{"client without key", Reader{ProtocolID: pid, Allowed: ClientAccepts, TokenAEAD: tok}, nil, nil},
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		for i := range sides {
			s := &sides[i]
			if s.replay != nil {
				*s.replay = ReplayProtection{}
			}
			data := bytes.Clone(in)
			var p Packet
			err := s.r.Read(data, now, s.key, s.replay, &p)
			if err != nil {
				if !isReadError(err) {
					t.Fatalf("%s: unexpected error %v", s.name, err)
				}
				if p.Type != 0 || p.Sequence != 0 || p.PrivateToken != nil || p.ChallengeToken != nil || p.Payload != nil {
					t.Fatalf("%s: refused packet left fields set: %+v", s.name, p)
				}
				continue
			}
			checkAccepted(t, s, in, &p, pid)
		}
	})
}

func checkAccepted(t *testing.T, s *fuzzSide, in []byte, p *Packet, pid uint64) {
	if !s.r.Allowed.has(p.Type) {
		t.Fatalf("%s: accepted a %v", s.name, p.Type)
	}
	if p.Type == ConnectionRequest {
		if len(in) != connectionRequestBytes || len(p.PrivateToken) != privateTokenPlainBytes || s.r.TokenAEAD == nil {
			t.Fatalf("%s: bad request: %d bytes, token %d", s.name, len(in), len(p.PrivateToken))
		}
		again := AppendConnectionRequest(nil, pid, p.ExpireTimestamp, &p.TokenNonce, in[connectionRequestBytes-PrivateTokenBytes:])
		if !bytes.Equal(again, in) {
			t.Fatalf("%s: request written again differs", s.name)
		}
		return
	}
	if s.key == nil {
		t.Fatalf("%s: accepted an encrypted packet without a key", s.name)
	}
	switch p.Type {
	case ConnectionChallenge, ConnectionResponse:
		if len(p.ChallengeToken) != ChallengeTokenBytes {
			t.Fatalf("%s: challenge token of %d bytes", s.name, len(p.ChallengeToken))
		}
	case Payload:
		if len(p.Payload) < 1 || len(p.Payload) > MaxPayloadBytes {
			t.Fatalf("%s: payload of %d bytes", s.name, len(p.Payload))
		}
	}
	n := int(in[0] >> 4)
	if n < 1 || n > 8 || len(in) < 1+n+crypto.MACBytes {
		t.Fatalf("%s: accepted bad framing % x", s.name, in[:1])
	}
	if n != sequenceBytes(p.Sequence) {
		return // non-minimal sequence: accepted, but not what the writers produce
	}
	body := bodyOf(p)
	again := appendEncrypted(nil, s.key, p.Type, p.Sequence, body)
	if !bytes.Equal(again, in) {
		t.Fatalf("%s: %v written again differs:\n% x\n% x", s.name, p.Type, again, in)
	}
}

// bodyOf rebuilds the plaintext body of a decoded encrypted packet.
func bodyOf(p *Packet) []byte {
	switch p.Type {
	case ConnectionChallenge, ConnectionResponse:
		return append(binary.LittleEndian.AppendUint64(nil, p.ChallengeSequence), p.ChallengeToken...)
	case KeepAlive:
		b := binary.LittleEndian.AppendUint32(nil, p.ClientIndex)
		return binary.LittleEndian.AppendUint32(b, p.MaxClients)
	case Payload:
		return p.Payload
	}
	return nil
}

// FuzzRoundTrip seals arbitrary bodies as every packet type and reads them
// back: those of the right size for their type are accepted with the same
// fields, the others refused with errBodySize (or errPacketType for type 0).
func FuzzRoundTrip(f *testing.F) {
	vs := vectors(f)
	for _, v := range vs.Packets {
		f.Add(byte(v.PacketType), uint64(v.Sequence), []byte(v.PlaintextBody))
	}
	c2s, _ := testKeys()
	r := Reader{ProtocolID: testProtocolID, Allowed: 0x7f}
	f.Fuzz(func(t *testing.T, typ byte, seq uint64, body []byte) {
		pt := PacketType(typ % uint8(numPacketTypes))
		if len(body) > MaxPacketBytes {
			body = body[:MaxPacketBytes]
		}
		pkt := appendEncrypted(nil, c2s, pt, seq, body)
		if len(pkt) != 1+sequenceBytes(seq)+len(body)+crypto.MACBytes {
			t.Fatalf("packet of %d bytes", len(pkt))
		}
		var rp ReplayProtection
		var p Packet
		err := r.Read(pkt, 0, c2s, &rp, &p)
		want := error(nil)
		switch pt {
		case ConnectionRequest:
			want = errPacketType
		case ConnectionDenied, Disconnect:
			if len(body) != 0 {
				want = errBodySize
			}
		case ConnectionChallenge, ConnectionResponse:
			if len(body) != challengeBodyBytes {
				want = errBodySize
			}
		case KeepAlive:
			if len(body) != keepAliveBodyBytes {
				want = errBodySize
			}
		case Payload:
			if len(body) < 1 || len(body) > MaxPayloadBytes {
				want = errBodySize
			}
		}
		if err != want {
			t.Fatalf("%v with %d-byte body: got %v, want %v", pt, len(body), err, want)
		}
		if err != nil {
			return
		}
		if p.Type != pt || p.Sequence != seq || !bytes.Equal(bodyOf(&p), body) {
			t.Fatalf("read back %+v", p)
		}
	})
}

// replayModel is a direct transcription of the reference's replay
// protection (with the overflow-safe age test the vectors require): empty
// slots hold 2^64-1.
type replayModel struct {
	mostRecent uint64
	received   [replayWindow]uint64
}

func newReplayModel() *replayModel {
	m := new(replayModel)
	for i := range m.received {
		m.received[i] = ^uint64(0)
	}
	return m
}

func (m *replayModel) alreadyReceived(seq uint64) bool {
	if seq+replayWindow < seq { // the top 256 sequences are never too old
		// fall through to the slot test
	} else if seq+replayWindow <= m.mostRecent {
		return true
	}
	i := seq % replayWindow
	if m.received[i] == ^uint64(0) {
		return false
	}
	return m.received[i] >= seq
}

func (m *replayModel) advance(seq uint64) {
	if seq > m.mostRecent {
		m.mostRecent = seq
	}
	m.received[seq%replayWindow] = seq
}

// FuzzReplay drives ReplayProtection and the reference model with the same
// sequence numbers (near the most recent, small, and near 2^64) and compares
// every decision.
func FuzzReplay(f *testing.F) {
	vs := vectors(f)
	for _, c := range vs.ReplayProtection.Cases {
		var b []byte
		for _, s := range c.Steps {
			b = append(b, 4) // absolute
			b = binary.LittleEndian.AppendUint64(b, uint64(s.Sequence))
		}
		f.Add(b)
	}
	f.Add([]byte{0, 1, 0, 0, 1, 1, 0, 2, 0, 1, 3, 0, 0, 5, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var r ReplayProtection
		m := newReplayModel()
		for len(ops) >= 3 {
			mode := ops[0]
			v := uint64(ops[1]) | uint64(ops[2])<<8
			ops = ops[3:]
			var seq uint64
			switch mode % 5 {
			case 0:
				seq = m.mostRecent + v%300
			case 1:
				seq = m.mostRecent - v%600
			case 2:
				seq = v
			case 3:
				seq = ^uint64(0) - v%600
			case 4:
				if len(ops) < 6 {
					return
				}
				seq = v | binary.LittleEndian.Uint64(append(ops[:6:6], 0, 0))<<16
				ops = ops[6:]
			}
			got, want := r.alreadyReceived(seq), m.alreadyReceived(seq)
			if got != want {
				t.Fatalf("sequence %d (most recent %d): AlreadyReceived %v, reference %v", seq, m.mostRecent, got, want)
			}
			// Bit 3 of the mode: the packet failed to decrypt, no advance.
			if !got && mode&8 == 0 {
				r.advance(seq)
				m.advance(seq)
			}
			if r.mostRecent != m.mostRecent {
				t.Fatalf("most recent %d, reference %d", r.mostRecent, m.mostRecent)
			}
		}
	})
}
