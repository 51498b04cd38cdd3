package protocol

import (
	"encoding/binary"
	"errors"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

// Reasons Reader.Read refuses a datagram, for errors.Is. A datagram whose
// bytes break the layout of netcode 1.02 is ErrMalformed, whichever check it
// fails; the error's text names the check. The others name the stages of the
// reference's validation that a caller may act on.
var (
	// ErrMalformed: the datagram is empty, its prefix byte names no packet
	// type or a sequence length outside 1..8, its type is not one this
	// side reads (Reader.Allowed), it has the wrong length for its type (a
	// connection request not exactly 1078 bytes, an encrypted packet too
	// short for its prefix, sequence and MAC, a decrypted body of the
	// wrong size), or a connection request is not for "NETCODE 1.02".
	ErrMalformed = errors.New("netcode/protocol: malformed packet")
	// ErrProtocolID: a connection request is for another protocol id.
	ErrProtocolID = errors.New("netcode/protocol: wrong protocol id")
	// ErrExpired: a connection request's connect token has expired.
	ErrExpired = errors.New("netcode/protocol: connect token expired")
	// ErrNoKey: there is no key to open the packet with (no packet key for an
	// encrypted packet, no private key for a connection request).
	ErrNoKey = errors.New("netcode/protocol: no key")
	// ErrReplayed: the sequence number was already received or is too old.
	ErrReplayed = errors.New("netcode/protocol: replayed packet")
	// ErrDecrypt: the packet or the private connect token did not
	// authenticate.
	ErrDecrypt = errors.New("netcode/protocol: decryption failed")
)

// malformed is an ErrMalformed naming the check that failed. Read returns
// the values below, made once, so that refusing a datagram never allocates.
type malformed string

func (e malformed) Error() string        { return ErrMalformed.Error() + ": " + string(e) }
func (e malformed) Is(target error) bool { return target == ErrMalformed }

// The checks a malformed datagram fails, each an ErrMalformed.
var (
	errLength        error = malformed("bad packet length")
	errPacketType    error = malformed("invalid packet type")
	errNotAllowed    error = malformed("packet type not allowed")
	errSequenceBytes error = malformed("bad sequence length")
	errVersionInfo   error = malformed("bad version info")
	errBodySize      error = malformed("bad body size")
)

// Reader validates and decodes the packets one side of a connection receives.
// A server uses Allowed: ServerAccepts and its private key in TokenAEAD; a
// client uses ClientAccepts and no TokenAEAD. A Reader keeps nothing between
// calls but scratch space, and the AEADs it uses must not be used
// concurrently, so neither may the Reader.
type Reader struct {
	// ProtocolID is the application's protocol id.
	ProtocolID uint64
	// Allowed is the set of packet types this side reads; others are refused
	// as ErrMalformed.
	Allowed TypeSet
	// TokenAEAD opens private connect tokens with the server's private key.
	// Nil refuses connection requests with ErrNoKey.
	TokenAEAD *crypto.PrivateTokenAEAD
	// PreviousTokenAEAD, if not nil, opens the private connect tokens that
	// TokenAEAD does not: during a key rotation, tokens sealed with the
	// previous private key.
	PreviousTokenAEAD *crypto.PrivateTokenAEAD

	// keep holds a sealed private token while the first key is tried: a
	// failed in-place open wipes its input.
	keep [PrivateTokenBytes]byte
}

// Read validates the datagram data and decodes it into p, in the order the
// reference's netcode_read_packet does, and returns the first check that
// fails (one of the Err values of this package) or nil.
//
// data is decrypted in place, so it is modified even when Read fails, and
// the slices in p alias it. now is the current Unix time in seconds, used only
// to check a connection request's expire timestamp (the token is expired when
// expire <= now). key opens encrypted packets; nil refuses them with ErrNoKey.
// replay, if not nil, applies replay protection to keep-alive, payload and
// disconnect packets: it is checked before decryption and advanced once the
// packet authenticates (before the body size check, as in the reference).
//
// Read does not allocate.
func (r *Reader) Read(data []byte, now uint64, key *crypto.PacketAEAD, replay *ReplayProtection, p *Packet) error {
	*p = Packet{}
	if len(data) < 1 {
		return errLength
	}
	prefix := data[0]
	if prefix == byte(ConnectionRequest) {
		return r.readRequest(data, now, p)
	}

	// Encrypted packets.
	if key == nil {
		return ErrNoKey
	}
	if len(data) < minEncryptedPacketBytes {
		return errLength
	}
	t := PacketType(prefix & 0x0f)
	if t >= numPacketTypes || t == ConnectionRequest {
		// The reference lets an encrypted type 0 through to decryption and
		// refuses it afterwards; refusing it here saves the work and
		// changes no outcome (type 0 has no replay protection).
		return errPacketType
	}
	if !r.Allowed.has(t) {
		return errNotAllowed
	}
	n := int(prefix >> 4)
	if n < 1 || n > maxSequenceBytes {
		return errSequenceBytes
	}
	if len(data) < 1+n+crypto.MACBytes {
		return errLength
	}
	var seq uint64
	for i := range n {
		seq |= uint64(data[1+i]) << (8 * i)
	}
	protected := replay != nil && t >= KeepAlive
	if protected && replay.alreadyReceived(seq) {
		return ErrReplayed
	}
	sealed := data[1+n:]
	body, err := aead.OpenPacket(key, sealed[:0], prefix, seq, sealed)
	if err != nil {
		return ErrDecrypt
	}
	if protected {
		replay.advance(seq)
	}

	switch t {
	case ConnectionDenied, Disconnect:
		if len(body) != 0 {
			return errBodySize
		}
	case ConnectionChallenge, ConnectionResponse:
		if len(body) != challengeBodyBytes {
			return errBodySize
		}
		p.ChallengeSequence = binary.LittleEndian.Uint64(body)
		p.ChallengeToken = body[8:challengeBodyBytes:challengeBodyBytes]
	case KeepAlive:
		if len(body) != keepAliveBodyBytes {
			return errBodySize
		}
		p.ClientIndex = binary.LittleEndian.Uint32(body)
		p.MaxClients = binary.LittleEndian.Uint32(body[4:])
	case Payload:
		if len(body) < 1 || len(body) > MaxPayloadBytes {
			return errBodySize
		}
		p.Payload = body[:len(body):len(body)]
	}
	p.Type = t
	p.Sequence = seq
	return nil
}

// readRequest validates and decodes a connection request (prefix byte 0).
func (r *Reader) readRequest(data []byte, now uint64, p *Packet) error {
	if !r.Allowed.has(ConnectionRequest) {
		return errNotAllowed
	}
	if len(data) != connectionRequestBytes {
		return errLength
	}
	if r.TokenAEAD == nil {
		return ErrNoKey
	}
	if string(data[requestVersionAt:requestProtocolAt]) != aead.VersionInfo {
		return errVersionInfo
	}
	if binary.LittleEndian.Uint64(data[requestProtocolAt:]) != r.ProtocolID {
		return ErrProtocolID
	}
	expire := binary.LittleEndian.Uint64(data[requestExpireAt:])
	if expire <= now {
		return ErrExpired
	}
	nonce := (*[crypto.TokenNonceBytes]byte)(data[requestNonceAt:requestPrivateAt])
	sealed := data[requestPrivateAt:connectionRequestBytes]
	if r.PreviousTokenAEAD != nil {
		copy(r.keep[:], sealed)
	}
	plain, err := aead.OpenToken(r.TokenAEAD, sealed[:0], nonce, r.ProtocolID, expire, sealed)
	if err != nil && r.PreviousTokenAEAD != nil {
		copy(sealed, r.keep[:])
		plain, err = aead.OpenToken(r.PreviousTokenAEAD, sealed[:0], nonce, r.ProtocolID, expire, sealed)
	}
	if err != nil {
		return ErrDecrypt
	}
	p.Type = ConnectionRequest
	p.ExpireTimestamp = expire
	p.TokenNonce = *nonce
	p.PrivateToken = plain[:privateTokenPlainBytes:privateTokenPlainBytes]
	return nil
}
