package protocol

import (
	"encoding/binary"
	"errors"

	"github.com/gonetcode/netcode/crypto"
)

// Reasons Reader.Read refuses a datagram. Each names one stage of the
// reference's validation; compare with ==.
var (
	// ErrLength: the datagram is empty, a connection request is not exactly
	// ConnectionRequestBytes long, or an encrypted packet is too short for
	// its prefix, sequence and MAC.
	ErrLength = errors.New("netcode/protocol: bad packet length")
	// ErrPacketType: the prefix byte names no packet type.
	ErrPacketType = errors.New("netcode/protocol: invalid packet type")
	// ErrNotAllowed: the packet type is not one this side reads.
	ErrNotAllowed = errors.New("netcode/protocol: packet type not allowed")
	// ErrSequenceBytes: the prefix byte's sequence length is outside 1..8.
	ErrSequenceBytes = errors.New("netcode/protocol: bad sequence length")
	// ErrVersionInfo: a connection request is not for "NETCODE 1.02".
	ErrVersionInfo = errors.New("netcode/protocol: bad version info")
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
	// ErrBodySize: the decrypted body has the wrong size for its type.
	ErrBodySize = errors.New("netcode/protocol: bad body size")
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
	// with ErrNotAllowed.
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
		return ErrLength
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
		return ErrLength
	}
	t := PacketType(prefix & 0x0f)
	if t >= NumPacketTypes || t == ConnectionRequest {
		// The reference lets an encrypted type 0 through to decryption and
		// refuses it afterwards; refusing it here saves the work and
		// changes no outcome (type 0 has no replay protection).
		return ErrPacketType
	}
	if !r.Allowed.Has(t) {
		return ErrNotAllowed
	}
	n := int(prefix >> 4)
	if n < 1 || n > maxSequenceBytes {
		return ErrSequenceBytes
	}
	if len(data) < 1+n+crypto.MACBytes {
		return ErrLength
	}
	var seq uint64
	for i := range n {
		seq |= uint64(data[1+i]) << (8 * i)
	}
	protected := replay != nil && t >= KeepAlive
	if protected && replay.AlreadyReceived(seq) {
		return ErrReplayed
	}
	sealed := data[1+n:]
	body, err := key.Open(sealed[:0], prefix, seq, sealed)
	if err != nil {
		return ErrDecrypt
	}
	if protected {
		replay.Advance(seq)
	}

	switch t {
	case ConnectionDenied, Disconnect:
		if len(body) != 0 {
			return ErrBodySize
		}
	case ConnectionChallenge, ConnectionResponse:
		if len(body) != challengeBodyBytes {
			return ErrBodySize
		}
		p.ChallengeSequence = binary.LittleEndian.Uint64(body)
		p.ChallengeToken = body[8:challengeBodyBytes:challengeBodyBytes]
	case KeepAlive:
		if len(body) != keepAliveBodyBytes {
			return ErrBodySize
		}
		p.ClientIndex = binary.LittleEndian.Uint32(body)
		p.MaxClients = binary.LittleEndian.Uint32(body[4:])
	case Payload:
		if len(body) < 1 || len(body) > MaxPayloadBytes {
			return ErrBodySize
		}
		p.Payload = body[:len(body):len(body)]
	}
	p.Type = t
	p.Sequence = seq
	return nil
}

// readRequest validates and decodes a connection request (prefix byte 0).
func (r *Reader) readRequest(data []byte, now uint64, p *Packet) error {
	if !r.Allowed.Has(ConnectionRequest) {
		return ErrNotAllowed
	}
	if len(data) != ConnectionRequestBytes {
		return ErrLength
	}
	if r.TokenAEAD == nil {
		return ErrNoKey
	}
	if string(data[requestVersionAt:requestProtocolAt]) != crypto.VersionInfo {
		return ErrVersionInfo
	}
	if binary.LittleEndian.Uint64(data[requestProtocolAt:]) != r.ProtocolID {
		return ErrProtocolID
	}
	expire := binary.LittleEndian.Uint64(data[requestExpireAt:])
	if expire <= now {
		return ErrExpired
	}
	nonce := (*[crypto.TokenNonceBytes]byte)(data[requestNonceAt:requestPrivateAt])
	sealed := data[requestPrivateAt:ConnectionRequestBytes]
	if r.PreviousTokenAEAD != nil {
		copy(r.keep[:], sealed)
	}
	plain, err := r.TokenAEAD.Open(sealed[:0], nonce, r.ProtocolID, expire, sealed)
	if err != nil && r.PreviousTokenAEAD != nil {
		copy(sealed, r.keep[:])
		plain, err = r.PreviousTokenAEAD.Open(sealed[:0], nonce, r.ProtocolID, expire, sealed)
	}
	if err != nil {
		return ErrDecrypt
	}
	p.Type = ConnectionRequest
	p.ExpireTimestamp = expire
	p.TokenNonce = *nonce
	p.PrivateToken = plain[:PrivateTokenPlainBytes:PrivateTokenPlainBytes]
	return nil
}
