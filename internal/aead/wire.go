package aead

import (
	"crypto/cipher"
	"encoding/binary"

	"golang.org/x/crypto/chacha20poly1305"
)

// VersionInfo is the 13-byte protocol version string, NUL terminated, that
// starts every connect token and connection request and every associated
// data of netcode 1.02.
const VersionInfo = "NETCODE 1.02\x00"

// Sizes of the associated data.
const (
	versionBytes  = len(VersionInfo)     // 13
	packetADBytes = versionBytes + 8 + 1 // version info, protocol id, prefix byte
	tokenADBytes  = versionBytes + 8 + 8 // version info, protocol id, expire timestamp
)

// Packet is the cipher of crypto.PacketAEAD, which embeds it under an
// unexported name: the packet cipher of one direction of one connection,
// with the key, the protocol id and the version info fixed. Packages
// protocol and crypto's tests seal and open with it through SealPacket and
// OpenPacket, so that crypto.PacketAEAD exports no method. It has no
// exported method or field of its own, as they would be promoted into
// crypto's API. A Packet must not be used concurrently.
type Packet struct {
	aead *AEAD
	ad   [packetADBytes]byte
}

func (p *Packet) packet() *Packet { return p }

// PacketCipher is a *crypto.PacketAEAD: a type that embeds a Packet.
type PacketCipher interface{ packet() *Packet }

// InitPacket makes p the cipher of key and protocolID.
func InitPacket(p *Packet, key *[32]byte, protocolID uint64) {
	p.aead = New(key)
	copy(p.ad[:], VersionInfo)
	binary.LittleEndian.PutUint64(p.ad[versionBytes:], protocolID)
}

// SealPacket appends the encryption of plaintext, authenticated together
// with the packet's prefix byte, followed by the MAC, to dst.
func SealPacket(c PacketCipher, dst []byte, prefix byte, sequence uint64, plaintext []byte) []byte {
	p := c.packet()
	p.ad[packetADBytes-1] = prefix
	return p.aead.Seal(dst, sequence, plaintext, p.ad[:])
}

// OpenPacket authenticates ciphertext (ending with the MAC) against the
// packet's prefix byte and sequence number, and appends the plaintext to
// dst. It returns ErrOpen if authentication fails.
func OpenPacket(c PacketCipher, dst []byte, prefix byte, sequence uint64, ciphertext []byte) ([]byte, error) {
	p := c.packet()
	p.ad[packetADBytes-1] = prefix
	return p.aead.Open(dst, sequence, ciphertext, p.ad[:])
}

// Token is the cipher of crypto.PrivateTokenAEAD, embedded as Packet is in
// crypto.PacketAEAD: XChaCha20-Poly1305 under the server's private key for
// the private part of connect tokens. A Token must not be used concurrently.
type Token struct {
	aead cipher.AEAD
	ad   [tokenADBytes]byte
}

func (t *Token) token() *Token { return t }

// TokenCipher is a *crypto.PrivateTokenAEAD: a type that embeds a Token.
type TokenCipher interface{ token() *Token }

// InitToken makes t the cipher of privateKey.
func InitToken(t *Token, privateKey *[32]byte) {
	a, err := chacha20poly1305.NewX(privateKey[:])
	if err != nil {
		panic("netcode/crypto: " + err.Error()) // unreachable: the key has the right size
	}
	t.aead = a
	copy(t.ad[:], VersionInfo)
}

func (t *Token) setAD(protocolID, expireTimestamp uint64) []byte {
	binary.LittleEndian.PutUint64(t.ad[versionBytes:], protocolID)
	binary.LittleEndian.PutUint64(t.ad[versionBytes+8:], expireTimestamp)
	return t.ad[:]
}

// SealToken appends the encryption of plaintext and its MAC to dst, bound to
// the protocol id and the token's expire timestamp.
func SealToken(c TokenCipher, dst []byte, nonce *[chacha20poly1305.NonceSizeX]byte, protocolID, expireTimestamp uint64, plaintext []byte) []byte {
	t := c.token()
	return t.aead.Seal(dst, nonce[:], plaintext, t.setAD(protocolID, expireTimestamp))
}

// OpenToken authenticates and decrypts a sealed private token, appending the
// plaintext to dst. It returns ErrOpen if authentication fails.
func OpenToken(c TokenCipher, dst []byte, nonce *[chacha20poly1305.NonceSizeX]byte, protocolID, expireTimestamp uint64, ciphertext []byte) ([]byte, error) {
	t := c.token()
	out, err := t.aead.Open(dst, nonce[:], ciphertext, t.setAD(protocolID, expireTimestamp))
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
