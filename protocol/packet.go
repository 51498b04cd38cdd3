// Package protocol encodes and decodes netcode 1.02 packets.
//
// It knows the seven packet types, how each is laid out on the wire, the
// variable-length sequence numbers in the prefix byte, the checks the C
// reference implementation (mas-bandwidth/netcode) makes before it accepts a
// packet, and its replay protection. It does no I/O and keeps no connection
// state: callers pass the keys and the replay window of the connection a
// datagram belongs to.
//
// Every function on the packet path works on caller-provided buffers. The
// writers append to a slice and allocate only when its capacity is too small;
// the Reader decrypts in place and returns fields that alias the datagram.
//
// Wire layout. A connection request is sent in the clear:
//
//	prefix 0x00 | version info (13) | protocol id (8) | expire timestamp (8) |
//	connect token nonce (24) | sealed private connect token (1024)
//
// Every other packet is encrypted:
//
//	prefix = type | sequence bytes << 4 | sequence (1..8 bytes, little endian) |
//	ChaCha20-Poly1305 ciphertext of the body | MAC (16)
//
// with the body of each type:
//
//	denied      (empty)
//	challenge   challenge token sequence (8) | sealed challenge token (300)
//	response    challenge token sequence (8) | sealed challenge token (300)
//	keep-alive  client index (4) | max clients (4)
//	payload     1..1200 bytes
//	disconnect  (empty)
//
// All integers are little endian.
package protocol

import (
	"math/bits"
	"strconv"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

// PacketType is the type of a netcode packet, the low four bits of its prefix
// byte.
type PacketType uint8

// The netcode 1.02 packet types.
const (
	ConnectionRequest   PacketType = 0 // client → server, unencrypted, carries the private connect token
	ConnectionDenied    PacketType = 1 // server → client: the server is full
	ConnectionChallenge PacketType = 2 // server → client: a sealed challenge token
	ConnectionResponse  PacketType = 3 // client → server: the challenge token echoed back
	KeepAlive           PacketType = 4 // both ways; from the server it carries the client's slot
	Payload             PacketType = 5 // both ways: one application message
	Disconnect          PacketType = 6 // both ways: the sender is going away
	numPacketTypes      PacketType = 7 // number of packet types; types ≥ numPacketTypes are invalid
)

var typeNames = [numPacketTypes]string{
	"connection request",
	"connection denied",
	"connection challenge",
	"connection response",
	"keep-alive",
	"payload",
	"disconnect",
}

// String returns the name of the packet type, e.g. "connection request".
func (t PacketType) String() string {
	if t < numPacketTypes {
		return typeNames[t]
	}
	return "PacketType(" + strconv.Itoa(int(t)) + ")"
}

// Sizes and limits of netcode 1.02.
const (
	// MaxPacketBytes is the largest datagram netcode sends.
	MaxPacketBytes = 1300
	// MaxPayloadBytes is the largest payload one packet carries.
	MaxPayloadBytes = 1200
	// ChallengeTokenBytes is the size of a sealed challenge token.
	ChallengeTokenBytes = 300
	// PrivateTokenBytes is the size of a sealed private connect token.
	PrivateTokenBytes = 1024
)

// Sizes the package doc's wire layout shows, and the replay window.
const (
	// connectionRequestBytes is the exact size of a connection request.
	connectionRequestBytes = 1 + len(aead.VersionInfo) + 8 + 8 + crypto.TokenNonceBytes + PrivateTokenBytes // 1078
	// challengeBodyBytes is the plaintext body of a challenge or response:
	// the challenge token sequence and the sealed challenge token.
	challengeBodyBytes = 8 + ChallengeTokenBytes // 308
	// keepAliveBodyBytes is the plaintext body of a keep-alive: client index
	// and max clients.
	keepAliveBodyBytes = 8
	// minEncryptedPacketBytes is the smallest encrypted packet: prefix, one
	// sequence byte and the MAC.
	minEncryptedPacketBytes = 1 + 1 + crypto.MACBytes // 18
	// maxSequenceBytes is the most bytes a sequence number takes on the wire.
	maxSequenceBytes = 8
	// replayWindow is the number of recent sequence numbers replay
	// protection remembers.
	replayWindow = 256
	// privateTokenPlainBytes is the size of a decrypted private connect
	// token: the sealed one without its MAC.
	privateTokenPlainBytes = PrivateTokenBytes - crypto.MACBytes // 1008
)

// Offsets inside a connection request.
const (
	requestVersionAt  = 1
	requestProtocolAt = requestVersionAt + 13
	requestExpireAt   = requestProtocolAt + 8
	requestNonceAt    = requestExpireAt + 8
	requestPrivateAt  = requestNonceAt + crypto.TokenNonceBytes
)

// TypeSet is a set of packet types, bit 1<<t for type t: for example
// 1<<Payload | 1<<KeepAlive, or ServerAccepts | ClientAccepts to read both sides.
type TypeSet uint8

// has reports whether t is in the set.
func (s TypeSet) has(t PacketType) bool {
	return t < numPacketTypes && s&(1<<t) != 0
}

// The packet types each side accepts, as in the reference.
const (
	// ServerAccepts holds the types a server reads: request, response,
	// keep-alive, payload and disconnect.
	ServerAccepts TypeSet = 1<<ConnectionRequest | 1<<ConnectionResponse | 1<<KeepAlive | 1<<Payload | 1<<Disconnect
	// ClientAccepts holds the types a client reads: denied, challenge,
	// keep-alive, payload and disconnect.
	ClientAccepts TypeSet = 1<<ConnectionDenied | 1<<ConnectionChallenge | 1<<KeepAlive | 1<<Payload | 1<<Disconnect
)

// Packet is a decoded packet. The byte slices alias the datagram that was
// read, so they are valid only as long as that buffer is not reused. Only the
// fields of the packet's type are set; the others are zero.
type Packet struct {
	// Type is the packet type.
	Type PacketType
	// Sequence is the packet's sequence number (0 for a connection request).
	Sequence uint64

	// ExpireTimestamp is the connect token's expire time, in Unix seconds
	// (connection request).
	ExpireTimestamp uint64
	// TokenNonce is the nonce the private connect token was sealed with
	// (connection request).
	TokenNonce [crypto.TokenNonceBytes]byte
	// PrivateToken is the decrypted private connect token, 1008 bytes
	// (PrivateTokenBytes less crypto.MACBytes) long (connection request). The 16-byte MAC that
	// followed it in the datagram is left in place after it.
	PrivateToken []byte

	// ChallengeSequence is the challenge token sequence (challenge and
	// response).
	ChallengeSequence uint64
	// ChallengeToken is the sealed challenge token, ChallengeTokenBytes long
	// (challenge and response).
	ChallengeToken []byte

	// ClientIndex is the client's slot on the server (keep-alive).
	ClientIndex uint32
	// MaxClients is the number of slots on the server (keep-alive).
	MaxClients uint32

	// Payload is the application data, 1..MaxPayloadBytes long (payload).
	Payload []byte
}

// PeekType returns the type of a datagram from its prefix byte, without any
// validation. ok is false if b is empty or the type is not a netcode type.
func PeekType(b []byte) (t PacketType, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	t = PacketType(b[0] & 0x0f)
	if t >= numPacketTypes {
		return 0, false
	}
	return t, true
}

// sequenceBytes returns how many bytes seq takes on the wire: the fewest that
// hold it, at least 1 and at most 8.
func sequenceBytes(seq uint64) int {
	if seq == 0 {
		return 1
	}
	return (bits.Len64(seq) + 7) / 8
}
