package protocol

import (
	"encoding/binary"
	"slices"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

// AppendConnectionRequest appends a connection request (1078 bytes, as the
// package doc's wire layout shows) to dst and returns the extended slice. sealedPrivate is the sealed
// private part of the connect token, PrivateTokenBytes long, as found in the
// public token together with protocolID, expire and nonce. It panics if
// sealedPrivate has another length.
func AppendConnectionRequest(dst []byte, protocolID, expire uint64, nonce *[crypto.TokenNonceBytes]byte, sealedPrivate []byte) []byte {
	if len(sealedPrivate) != PrivateTokenBytes {
		panic("netcode/protocol: sealed private connect token must be 1024 bytes")
	}
	start := len(dst)
	dst = slices.Grow(dst, connectionRequestBytes)
	dst = dst[:start+connectionRequestBytes]
	p := dst[start:]
	copy(p[requestPrivateAt:], sealedPrivate) // first: it may alias dst's spare capacity
	p[0] = byte(ConnectionRequest)
	copy(p[requestVersionAt:], []byte(aead.VersionInfo))
	binary.LittleEndian.PutUint64(p[requestProtocolAt:], protocolID)
	binary.LittleEndian.PutUint64(p[requestExpireAt:], expire)
	copy(p[requestNonceAt:], nonce[:])
	return dst
}

// appendEncrypted appends an encrypted packet of type t with sequence number
// seq and plaintext body to dst, sealed with key, and returns the extended
// slice. The packet is 1 + sequenceBytes(seq) + len(body) + crypto.MACBytes long.
//
// body may lie anywhere, including in dst's spare capacity: it is moved into
// place before it is sealed there. appendEncrypted does not check that body
// has the size the reader requires for t.
func appendEncrypted(dst []byte, key *crypto.PacketAEAD, t PacketType, seq uint64, body []byte) []byte {
	n := sequenceBytes(seq)
	start := len(dst)
	bodyAt := start + 1 + n
	dst = slices.Grow(dst, 1+n+len(body)+crypto.MACBytes)
	dst = dst[:bodyAt+len(body)]
	copy(dst[bodyAt:], body) // memmove: safe if body overlaps dst
	return seal(dst, key, t, seq, n, start)
}

// seal writes the header of an encrypted packet at dst[start:], whose body
// already follows it up to len(dst), and seals the body in place. dst must have
// room for the MAC.
func seal(dst []byte, key *crypto.PacketAEAD, t PacketType, seq uint64, n, start int) []byte {
	prefix := byte(t) | byte(n)<<4
	dst[start] = prefix
	for i := range n {
		dst[start+1+i] = byte(seq >> (8 * i))
	}
	bodyAt := start + 1 + n
	body := dst[bodyAt:]
	sealed := aead.SealPacket(key, body[:0], prefix, seq, body)
	return dst[:bodyAt+len(sealed)]
}

// begin reserves room for an encrypted packet with a body of bodyLen bytes
// and returns dst extended to cover the header and the body, the number of
// sequence bytes, and the offset of the packet.
func begin(dst []byte, seq uint64, bodyLen int) (out []byte, n, start int) {
	n = sequenceBytes(seq)
	start = len(dst)
	out = slices.Grow(dst, 1+n+bodyLen+crypto.MACBytes)
	return out[:start+1+n+bodyLen], n, start
}

// AppendDenied appends a connection denied packet to dst.
func AppendDenied(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
	dst, n, start := begin(dst, seq, 0)
	return seal(dst, key, ConnectionDenied, seq, n, start)
}

// AppendChallenge appends a connection challenge packet carrying the
// challenge token sequence and the sealed challenge token (ChallengeTokenBytes
// long) to dst. It panics if challengeToken has another length.
func AppendChallenge(dst []byte, key *crypto.PacketAEAD, seq, challengeSeq uint64, challengeToken []byte) []byte {
	return appendChallengeBody(dst, key, ConnectionChallenge, seq, challengeSeq, challengeToken)
}

// AppendResponse appends a connection response packet echoing the challenge
// token sequence and the sealed challenge token (ChallengeTokenBytes long) to
// dst. It panics if challengeToken has another length.
func AppendResponse(dst []byte, key *crypto.PacketAEAD, seq, challengeSeq uint64, challengeToken []byte) []byte {
	return appendChallengeBody(dst, key, ConnectionResponse, seq, challengeSeq, challengeToken)
}

func appendChallengeBody(dst []byte, key *crypto.PacketAEAD, t PacketType, seq, challengeSeq uint64, challengeToken []byte) []byte {
	if len(challengeToken) != ChallengeTokenBytes {
		panic("netcode/protocol: challenge token must be 300 bytes")
	}
	dst, n, start := begin(dst, seq, challengeBodyBytes)
	body := dst[start+1+n:]
	copy(body[8:], challengeToken) // first: challengeToken may alias dst's spare capacity
	binary.LittleEndian.PutUint64(body, challengeSeq)
	return seal(dst, key, t, seq, n, start)
}

// AppendKeepAlive appends a keep-alive packet to dst. Servers send the
// client's slot index and their slot count; clients send zeros.
func AppendKeepAlive(dst []byte, key *crypto.PacketAEAD, seq uint64, clientIndex, maxClients uint32) []byte {
	dst, n, start := begin(dst, seq, keepAliveBodyBytes)
	body := dst[start+1+n:]
	binary.LittleEndian.PutUint32(body, clientIndex)
	binary.LittleEndian.PutUint32(body[4:], maxClients)
	return seal(dst, key, KeepAlive, seq, n, start)
}

// AppendPayload appends a payload packet to dst. The caller makes sure the
// payload is 1..MaxPayloadBytes long; readers drop anything else. payload may
// lie in dst's spare capacity.
func AppendPayload(dst []byte, key *crypto.PacketAEAD, seq uint64, payload []byte) []byte {
	return appendEncrypted(dst, key, Payload, seq, payload)
}

// AppendDisconnect appends a disconnect packet to dst.
func AppendDisconnect(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
	dst, n, start := begin(dst, seq, 0)
	return seal(dst, key, Disconnect, seq, n, start)
}
