package wire

import "github.com/gonetcode/netcode/cute/internal/hydro"

// Key is a packet key: the token's client-to-server key for packets from
// the client, its server-to-client key for packets from the server.
type Key = [KeyBytes]byte

// PacketKey is a Key ready to seal and open packets: the secretbox states
// the key and the protocol's Context give, computed once (NewPacketKey),
// so that no packet repeats those permutations (hydro.BoxKey). A
// connection keeps its two keys this way.
type PacketKey = hydro.BoxKey

// NewPacketKey returns k ready for packets.
func NewPacketKey(k *Key) PacketKey {
	var pk PacketKey
	pk.Set(k, &Context)
	return pk
}

// IV is the random input of one seal. It is never sent; it only makes the
// SIV, and so the keystream, unique even when a sequence repeats.
type IV = [hydro.IVBytes]byte

// begin appends the header of a packet with a body of n bytes to dst and
// returns the grown slice and the offset of the packet in it. The body is
// written at offset HeaderBytes of the packet, then sealed in place.
func begin(dst []byte, t Type, seq uint64, n int) ([]byte, int) {
	start := len(dst)
	dst = grow(dst, HeaderBytes+n)
	p := dst[start:]
	p[0] = byte(t)
	le.PutUint64(p[1:9], seq)
	clear(p[9:HeaderBytes])
	return dst, start
}

// grow extends dst by n bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		d := make([]byte, len(dst), 2*cap(dst)+n)
		copy(d, dst)
		dst = d
	}
	return dst[:len(dst)+n]
}

// seal encrypts the body of the packet p (SIV ‖ MAC ‖ ciphertext from offset
// 37), with the sequence as the message id.
func seal(p []byte, seq uint64, key *PacketKey, iv *IV) {
	key.SealIV(p[sealAt:], p[HeaderBytes:], seq, iv)
}

// AppendEmpty appends a sealed packet with an empty body: ConnectionDenied,
// KeepAlive or Disconnect (73 bytes).
func AppendEmpty(dst []byte, t Type, seq uint64, key *PacketKey, iv *IV) []byte {
	dst, at := begin(dst, t, seq, 0)
	seal(dst[at:], seq, key, iv)
	return dst
}

// AppendAccepted appends a sealed ConnectionAccepted (89 bytes): the client
// id from the token, the server's slot count and its connection timeout in
// seconds.
func AppendAccepted(dst []byte, seq uint64, key *PacketKey, iv *IV, clientID uint64, maxClients, timeout uint32) []byte {
	dst, at := begin(dst, ConnectionAccepted, seq, 16)
	b := dst[at+HeaderBytes:]
	le.PutUint64(b[0:], clientID)
	le.PutUint32(b[8:], maxClients)
	le.PutUint32(b[12:], timeout)
	seal(dst[at:], seq, key, iv)
	return dst
}

// AppendChallenge appends a sealed ChallengeRequest or ChallengeResponse
// (337 bytes): the challenge nonce and the 256 challenge bytes.
func AppendChallenge(dst []byte, t Type, seq uint64, key *PacketKey, iv *IV, nonce uint64, data *[ChallengeDataBytes]byte) []byte {
	dst, at := begin(dst, t, seq, 8+ChallengeDataBytes)
	b := dst[at+HeaderBytes:]
	le.PutUint64(b, nonce)
	copy(b[8:], data[:])
	seal(dst[at:], seq, key, iv)
	return dst
}

// AppendPayload appends a sealed Payload: a u16 length and the payload,
// 0..MaxPayloadBytes bytes (the code sends empty payloads too). It panics
// on a longer payload; callers check first.
func AppendPayload(dst []byte, seq uint64, key *PacketKey, iv *IV, payload []byte) []byte {
	if len(payload) > MaxPayloadBytes {
		panic("cute/wire: payload larger than MaxPayloadBytes")
	}
	dst, at := begin(dst, Payload, seq, 2+len(payload))
	b := dst[at+HeaderBytes:]
	le.PutUint16(b, uint16(len(payload)))
	copy(b[2:], payload)
	seal(dst[at:], seq, key, iv)
	return dst
}

// Packet is a decrypted packet. Its slices point into the datagram that
// was opened.
type Packet struct {
	Type     Type
	Sequence uint64
	// ConnectionAccepted.
	ClientID          uint64
	MaxClients        uint32
	ConnectionTimeout uint32
	// ChallengeRequest and ChallengeResponse.
	ChallengeNonce uint64
	ChallengeData  []byte // 256 bytes
	// Payload.
	Payload []byte
}

// Open reads one encrypted packet (every type but ConnectToken) and
// decrypts it in place (the plaintext lands at offset 37, as in the code).
// replay, when not nil, refuses a repeated or too old sequence, and records
// the sequence once the packet decrypted and parsed.
//
// The size rules are the code's: 89 bytes for ConnectionAccepted, 73 for
// ConnectionDenied, KeepAlive and Disconnect, 337 for the challenges. A
// Payload's length field must equal the rest of its body, and its body be
// at least the field: the code reads the field without checking it (a
// 74-byte datagram or an over-long field makes it copy bytes from outside
// the plaintext). The type byte is not authenticated: a packet relabelled to
// another type of the same size opens as that type; only the sizes tell.
func Open(data []byte, key *PacketKey, replay *Replay, p *Packet) error {
	if len(data) < HeaderBytes {
		return ErrPacketSize
	}
	t := Type(data[0])
	n := len(data)
	switch t {
	case ConnectionAccepted:
		if n != AcceptedBytes {
			return ErrPacketSize
		}
	case ConnectionDenied, KeepAlive, Disconnect:
		if n != EmptyBytes {
			return ErrPacketSize
		}
	case ChallengeRequest, ChallengeResponse:
		if n != ChallengeBytes {
			return ErrPacketSize
		}
	case Payload:
		if n < HeaderBytes+2 || n > MaxPacketBytes {
			return ErrPacketSize
		}
	default:
		return ErrPacketType
	}
	seq := le.Uint64(data[1:9])
	if replay != nil && replay.Duplicate(seq) {
		return ErrReplayed
	}
	body := data[sealAt : n-hydro.HeaderBytes]
	if key.Open(body, data[sealAt:], seq) != nil {
		return ErrDecrypt
	}
	*p = Packet{Type: t, Sequence: seq}
	switch t {
	case ConnectionAccepted:
		p.ClientID = le.Uint64(body[0:])
		p.MaxClients = le.Uint32(body[8:])
		p.ConnectionTimeout = le.Uint32(body[12:])
	case ChallengeRequest, ChallengeResponse:
		p.ChallengeNonce = le.Uint64(body)
		p.ChallengeData = body[8 : 8+ChallengeDataBytes : 8+ChallengeDataBytes]
	case Payload:
		size := int(le.Uint16(body))
		if size != len(body)-2 {
			*p = Packet{}
			return ErrPayloadLen
		}
		p.Payload = body[2:len(body):len(body)]
	}
	if replay != nil {
		replay.Update(seq)
	}
	return nil
}
